package prompt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

type echoIn struct {
	Text string `json:"text"`
}

// recorder counts invocations per tool and can block them.
type recorder struct {
	mu    sync.Mutex
	calls []string // "tool:text"
	block chan struct{}
}

func (r *recorder) record(name, text string) {
	r.mu.Lock()
	r.calls = append(r.calls, name+":"+text)
	r.mu.Unlock()
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *recorder) tool(t testing.TB, name string, gate func(context.Context, echoIn) (prompt.Requirement, error)) *prompt.Tool {
	t.Helper()
	tool, err := prompt.NewTool(name, "echoes text", gate, func(ctx context.Context, in echoIn) (string, error) {
		r.record(name, in.Text)
		if r.block != nil {
			select {
			case <-r.block:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if in.Text == "fail" {
			return "", errors.New("tool failed on purpose")
		}
		return "echo " + in.Text, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

type harness struct {
	t     testing.TB
	svc   *prompt.Service
	store prompt.Store
	mem   *prompt.MemStore
	model *prompttest.Model
	rec   *recorder

	mu       sync.Mutex
	requests []prompt.ApprovalRequest
	done     []string
}

type opts struct {
	store    func(*prompt.MemStore) prompt.Store
	maxTurns int
	tools    func(r *recorder) []*prompt.Tool
	rec      *recorder
	mem      *prompt.MemStore
}

func defaultTools(t testing.TB) func(r *recorder) []*prompt.Tool {
	return func(r *recorder) []*prompt.Tool {
		return []*prompt.Tool{
			r.tool(t, "test.free", nil),
			r.tool(t, "test.gated", prompt.AlwaysFor[echoIn]("it is risky")),
		}
	}
}

func newHarness(t testing.TB, o opts, steps ...prompttest.Step) *harness {
	t.Helper()
	if o.rec == nil {
		o.rec = &recorder{}
	}
	if o.tools == nil {
		o.tools = defaultTools(t)
	}
	mem := o.mem
	if mem == nil {
		mem = prompt.NewMemStore()
	}
	var store prompt.Store = mem
	if o.store != nil {
		store = o.store(mem)
	}
	h := &harness{t: t, mem: mem, store: store, model: prompttest.NewModel(steps...), rec: o.rec}
	svc, err := prompt.NewService(prompt.Config{
		Model: h.model, Store: store, Tools: o.tools(o.rec), System: "be careful", MaxTurns: o.maxTurns,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.OnApprovalRequested(func(_ context.Context, _ *prompt.Completion, req prompt.ApprovalRequest) {
		h.mu.Lock()
		h.requests = append(h.requests, req)
		h.mu.Unlock()
	})
	svc.OnCompleted(func(_ context.Context, c *prompt.Completion) {
		h.mu.Lock()
		h.done = append(h.done, c.ID())
		h.mu.Unlock()
	})
	h.svc = svc
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

func (h *harness) approvals() []prompt.ApprovalRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]prompt.ApprovalRequest(nil), h.requests...)
}

func (h *harness) create(input string) *prompt.Completion {
	h.t.Helper()
	c, err := h.svc.Create(context.Background(), "conv-1", input)
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	h.wait(c)
	return c
}

func (h *harness) wait(c *prompt.Completion) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// waitEnded waits for a prompt resumed in the background to end, and
// returns it as stored.
func (h *harness) waitEnded(id string) *prompt.Prompt {
	h.t.Helper()
	var p *prompt.Prompt
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		p, err = h.mem.Prompt(id)
		if err != nil {
			h.t.Fatal(err)
		}
		if p.State.Final() {
			h.mu.Lock()
			n := len(h.done)
			h.mu.Unlock()
			if n > 0 {
				return p
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("prompt %s still %s", id, p.State)
		}
		time.Sleep(time.Millisecond)
	}
}

func call(id, name, text string) prompt.ToolCall {
	return prompttest.Call(id, name, fmt.Sprintf(`{"text":%q}`, text))
}

func wantState(t *testing.T, c *prompt.Completion, want prompt.State) *prompt.Prompt {
	t.Helper()
	p := c.Prompt()
	if p.State != want {
		t.Fatalf("state = %s (error %q), want %s", p.State, p.Error, want)
	}
	return p
}

func callOf(t *testing.T, p *prompt.Prompt, id string) *prompt.Call {
	t.Helper()
	for _, it := range p.Output {
		if it.Call != nil && it.Call.ID == id {
			return it.Call
		}
	}
	t.Fatalf("no call %s in %+v", id, p.Output)
	return nil
}

// lastToolResults returns the tool messages of the model's last request.
func lastToolResults(m *prompttest.Model) map[string]string {
	reqs := m.Requests()
	out := map[string]string{}
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == prompt.RoleTool {
			out[msg.ToolCallID] = msg.Text
		}
	}
	return out
}

func TestApproveRunsTheGatedCallOnceAndCompletes(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("c1", "test.gated", "hi")),
		prompttest.Answer("done"),
	)
	c := h.create("please")
	p := wantState(t, c, prompt.StateWaiting)
	if got := callOf(t, p, "c1"); got.Status != prompt.CallPending || got.Result.Type != prompt.ResultPending || got.Result.Reason != "it is risky" {
		t.Fatalf("pending call = %+v %+v", got, got.Result)
	}
	reqs := h.approvals()
	if len(reqs) != 1 || reqs[0].ToolCallID != "c1" || reqs[0].ToolName != "test.gated" || reqs[0].Reason != "it is risky" ||
		string(reqs[0].Input) != `{"text":"hi"}` || len(reqs[0].ApprovalID) != 16 || reqs[0].ConversationID != "conv-1" {
		t.Fatalf("approval requests = %+v", reqs)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran before approval")
	}
	// Saved before it was announced.
	stored, err := h.mem.Prompt(c.ID())
	if err != nil || stored.State != prompt.StateWaiting {
		t.Fatalf("stored = %+v, %v", stored, err)
	}

	if err := h.svc.Approve(context.Background(), reqs[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	p = wantState(t, c, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:hi"}) {
		t.Fatalf("invocations = %v", got)
	}
	cl := callOf(t, p, "c1")
	if cl.Status != prompt.CallDone || cl.Result.Output != "echo hi" || cl.Approval.DecidedBy != "alice" || cl.Approval.DecidedAt.IsZero() {
		t.Fatalf("call = %+v approval %+v", cl, cl.Approval)
	}
	if p.FinalText() != "done" {
		t.Fatalf("final text = %q", p.FinalText())
	}
	if got := lastToolResults(h.model)["c1"]; got != "echo hi" {
		t.Fatalf("model saw %q", got)
	}
	if h.svc.GetActive(c.ID()) != nil {
		t.Fatal("completed prompt still active")
	}
}

func TestRejectGivesTheModelTheReasonAndNeverRuns(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("c1", "test.gated", "hi")),
		prompttest.Answer("ok, I won't"),
	)
	c := h.create("please")
	req := h.approvals()[0]
	if err := h.svc.Reject(context.Background(), req.ApprovalID, "not that site", "bob"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	p := wantState(t, c, prompt.StateCompleted)
	if len(h.rec.got()) != 0 {
		t.Fatalf("rejected tool ran: %v", h.rec.got())
	}
	if got := lastToolResults(h.model)["c1"]; got != "Error: Rejected by user: not that site" {
		t.Fatalf("model saw %q", got)
	}
	if cl := callOf(t, p, "c1"); cl.Status != prompt.CallRejected || cl.Approval.Note != "not that site" {
		t.Fatalf("call = %+v", cl)
	}
}

func TestDynamicGate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gate       func(context.Context, echoIn) (prompt.Requirement, error)
		wantState  prompt.State
		wantRun    int
		wantResult string
	}{
		{"required", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Required: true, Reason: "dyn"}, nil
		}, prompt.StateWaiting, 0, ""},
		{"not required", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Required: false, Reason: "fine"}, nil
		}, prompt.StateCompleted, 1, "echo x"},
		{"erroring", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{}, errors.New("allowlist unavailable")
		}, prompt.StateCompleted, 0, "Error: approval check failed: allowlist unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, opts{tools: func(r *recorder) []*prompt.Tool {
				return []*prompt.Tool{r.tool(t, "test.dyn", tc.gate)}
			}}, prompttest.Calls(call("c1", "test.dyn", "x")), prompttest.Answer("end"))
			c := h.create("go")
			wantState(t, c, tc.wantState)
			if got := len(h.rec.got()); got != tc.wantRun {
				t.Fatalf("ran %d times, want %d", got, tc.wantRun)
			}
			if tc.wantState == prompt.StateWaiting {
				if r := h.approvals(); len(r) != 1 || r[0].Reason != "dyn" {
					t.Fatalf("requests = %+v", r)
				}
				return
			}
			if len(h.approvals()) != 0 {
				t.Fatal("approval asked")
			}
			if got := lastToolResults(h.model)["c1"]; got != tc.wantResult {
				t.Fatalf("model saw %q, want %q", got, tc.wantResult)
			}
		})
	}
}

func TestBatchRunsInOrderAroundAPause(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("a", "test.free", "1"), call("b", "test.gated", "2"), call("c", "test.free", "3")),
		prompttest.Answer("all done"),
	)
	c := h.create("go")
	wantState(t, c, prompt.StateWaiting)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:1"}) {
		t.Fatalf("before decision ran %v", got)
	}
	req := h.approvals()[0]
	if len(req.Queued) != 1 || req.Queued[0].ID != "c" || req.Queued[0].Name != "test.free" {
		t.Fatalf("queued = %+v", req.Queued)
	}
	if err := h.svc.Approve(context.Background(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:1", "test.gated:2", "test.free:3"}) {
		t.Fatalf("order = %v", got)
	}
	// One assistant message with three calls, then three results in order.
	msgs := h.model.Requests()[1].Messages
	if len(msgs) != 5 || len(msgs[1].ToolCalls) != 3 || msgs[2].ToolCallID != "a" || msgs[3].ToolCallID != "b" || msgs[4].ToolCallID != "c" {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestTwoPausesInOneBatch(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("a", "test.gated", "1"), call("b", "test.free", "2"), call("c", "test.gated", "3")),
		prompttest.Answer("end"),
	)
	c := h.create("go")
	wantState(t, c, prompt.StateWaiting)
	first := h.approvals()[0]
	if first.ToolCallID != "a" || len(first.Queued) != 2 {
		t.Fatalf("first = %+v", first)
	}
	if err := c.Approve(context.Background(), "a", "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateWaiting)
	reqs := h.approvals()
	if len(reqs) != 2 || reqs[1].ToolCallID != "c" || len(reqs[1].Queued) != 0 || reqs[1].ApprovalID == first.ApprovalID {
		t.Fatalf("second = %+v", reqs)
	}
	if err := c.Reject(context.Background(), "c", "", "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:1", "test.free:2"}) {
		t.Fatalf("ran %v", got)
	}
	if got := lastToolResults(h.model)["c"]; got != "Error: Rejected by user" {
		t.Fatalf("model saw %q", got)
	}
}

func TestInvalidInputAndUnknownToolAreErrorsForTheModel(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(
			prompttest.Call("u", "no.such", `{}`),
			prompttest.Call("j", "test.gated", `{"text":`),
			prompttest.Call("s", "test.gated", `{"text":5}`),
			prompttest.Call("x", "test.gated", `{"text":"a","extra":1}`),
			prompttest.Call("m", "test.gated", `{}`),
		),
		prompttest.Answer("sorry"),
	)
	c := h.create("go")
	wantState(t, c, prompt.StateCompleted)
	if len(h.approvals()) != 0 || len(h.rec.got()) != 0 {
		t.Fatalf("approvals %v, runs %v", h.approvals(), h.rec.got())
	}
	res := lastToolResults(h.model)
	for id, want := range map[string]string{
		"u": `unknown tool "no.such"`, "j": "not valid JSON", "s": "invalid arguments", "x": "invalid arguments", "m": "invalid arguments",
	} {
		if !strings.HasPrefix(res[id], "Error: ") || !strings.Contains(res[id], want) {
			t.Errorf("result %s = %q, want it to contain %q", id, res[id], want)
		}
	}
}

func TestConcurrentApprovalsInvokeOnce(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("c1", "test.gated", "once")),
		prompttest.Answer("done"),
	)
	c := h.create("go")
	id := h.approvals()[0].ApprovalID
	var wg sync.WaitGroup
	var ok, notPending, other atomic.Int32
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				err = h.svc.Approve(context.Background(), id, "alice")
			} else {
				err = c.Approve(context.Background(), "c1", "bob")
			}
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, prompt.ErrNotPending):
				notPending.Add(1)
			default:
				other.Add(1)
				t.Errorf("approve: %v", err)
			}
		}()
	}
	wg.Wait()
	h.wait(c)
	if ok.Load() != 1 || notPending.Load() != 99 || other.Load() != 0 {
		t.Fatalf("ok %d, not pending %d, other %d", ok.Load(), notPending.Load(), other.Load())
	}
	if got := h.rec.got(); len(got) != 1 {
		t.Fatalf("invocations = %v", got)
	}
}

func TestApproveRacingRejectGivesOneDecision(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	c := h.create("go")
	id := h.approvals()[0].ApprovalID
	errs := make(chan error, 2)
	go func() { errs <- h.svc.Approve(context.Background(), id, "alice") }()
	go func() { errs <- h.svc.Reject(context.Background(), id, "no", "bob") }()
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), prompt.ErrNotPending) {
		t.Fatalf("errors = %v, %v", e1, e2)
	}
	h.wait(c)
	p := wantState(t, c, prompt.StateCompleted)
	cl := callOf(t, p, "c1")
	if ran := len(h.rec.got()); (cl.Status == prompt.CallDone) != (ran == 1) || ran > 1 {
		t.Fatalf("status %s, ran %d", cl.Status, ran)
	}
}

func TestDecisionAfterCompletionIsRefusedWithNoChange(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	c := h.create("go")
	id := h.approvals()[0].ApprovalID
	if err := h.svc.Approve(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	before, err := h.mem.Prompt(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Reject(context.Background(), id, "late", "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("late reject = %v, want ErrNotPending", err)
	}
	if err := c.Approve(context.Background(), "c1", "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("late approve = %v, want ErrNotPending", err)
	}
	if err := c.Approve(context.Background(), "nope", "bob"); !errors.Is(err, prompt.ErrUnknownCall) {
		t.Fatalf("unknown call = %v, want ErrUnknownCall", err)
	}
	if err := h.svc.Approve(context.Background(), "aaaaaaaaaaaaaaaa", "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown approval = %v, want ErrNotFound", err)
	}
	after, _ := h.mem.Prompt(c.ID())
	if !reflect.DeepEqual(before, after) || len(h.rec.got()) != 1 {
		t.Fatalf("prompt changed:\n%+v\n%+v", before, after)
	}
}

// failingStore fails SavePrompt when fail says so.
type failingStore struct {
	prompt.Store
	fail func(p *prompt.Prompt) error
}

func (f *failingStore) SavePrompt(ctx context.Context, p *prompt.Prompt) error {
	if err := f.fail(p); err != nil {
		return err
	}
	return f.Store.SavePrompt(ctx, p)
}

func TestStoreFailureWhilePausingFailsClosed(t *testing.T) {
	h := newHarness(t, opts{store: func(m *prompt.MemStore) prompt.Store {
		return &failingStore{Store: m, fail: func(p *prompt.Prompt) error {
			if p.State == prompt.StateWaiting {
				return errors.New("disk full")
			}
			return nil
		}}
	}}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	p := wantState(t, c, prompt.StateFailed)
	if len(h.approvals()) != 0 {
		t.Fatal("approval requested although its state was not saved")
	}
	if !strings.Contains(p.Error, "could not save") {
		t.Fatalf("error = %q", p.Error)
	}
	stored, _ := h.mem.Prompt(c.ID())
	if stored.State != prompt.StateFailed || stored.PendingCall() != nil {
		t.Fatalf("stored = %+v", stored)
	}
	// In the audit trail, a request nobody saw must not read as done.
	if a := callOf(t, stored, "c1").Approval; a == nil || a.DecidedBy != "" || !strings.HasPrefix(a.Note, "not asked") {
		t.Fatalf("approval = %+v", a)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

func TestCrashWhileToolRunsIsOutcomeUnknownAfterRecover(t *testing.T) {
	rec := &recorder{block: make(chan struct{})}
	mem := prompt.NewMemStore()
	h := newHarness(t, opts{rec: rec, mem: mem}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	// The tool is now running: "crash" by copying what is stored into a
	// fresh process's store.
	waitFor(t, func() bool { return len(rec.got()) == 1 })
	crashed := prompt.NewMemStore()
	stored, err := mem.Prompt(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	if cl := callOf(t, stored, "c1"); cl.Status != prompt.CallExecuting {
		t.Fatalf("stored status = %s, want executing before the tool runs", cl.Status)
	}
	if err := crashed.SavePrompt(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	close(rec.block)

	rec2 := &recorder{}
	h2 := newHarness(t, opts{rec: rec2, mem: crashed}, prompttest.Answer("I could not tell"))
	n, err := h2.svc.Recover(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("recover = %d, %v", n, err)
	}
	p := h2.waitEnded(c.ID())
	if p.State != prompt.StateCompleted {
		t.Fatalf("state = %s", p.State)
	}
	if cl := callOf(t, p, "c1"); cl.Status != prompt.CallInterrupted || cl.Result.Error != prompt.InterruptedError {
		t.Fatalf("call = %+v %+v", cl, cl.Result)
	}
	if len(rec2.got()) != 0 {
		t.Fatal("tool ran again after the crash")
	}
	if got := lastToolResults(h2.model)["c1"]; got != "Error: "+prompt.InterruptedError {
		t.Fatalf("model saw %q", got)
	}
}

func TestApprovedButNotStartedRunsOnceAfterRecover(t *testing.T) {
	// A crash after the decision was saved but before executing was: the
	// call certainly did not run, so recovery runs it. From the executing
	// save on, the "dead" process writes nothing more.
	mem := prompt.NewMemStore()
	var dead atomic.Bool
	h := newHarness(t, opts{mem: mem, store: func(m *prompt.MemStore) prompt.Store {
		return &failingStore{Store: m, fail: func(p *prompt.Prompt) error {
			for _, it := range p.Output {
				if it.Call != nil && it.Call.Status == prompt.CallExecuting {
					dead.Store(true)
				}
			}
			if dead.Load() {
				return errors.New("crash")
			}
			return nil
		}}
	}}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	crashed := prompt.NewMemStore()
	stored, _ := mem.Prompt(c.ID())
	if cl := callOf(t, stored, "c1"); cl.Status != prompt.CallApproved || stored.State != prompt.StateRunning {
		t.Fatalf("stored = %s / %s", stored.State, cl.Status)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran without executing saved")
	}
	_ = crashed.SavePrompt(context.Background(), stored)

	h2 := newHarness(t, opts{mem: crashed}, prompttest.Answer("done"))
	if _, err := h2.svc.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := h2.waitEnded(c.ID()); p.State != prompt.StateCompleted {
		t.Fatalf("state = %s", p.State)
	}
	if got := h2.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) {
		t.Fatalf("ran %v", got)
	}
}

func TestRecoverReemitsOneRequestPerPendingCall(t *testing.T) {
	mem := prompt.NewMemStore()
	h := newHarness(t, opts{mem: mem},
		prompttest.Calls(call("a", "test.gated", "1")),
		prompttest.Calls(call("b", "test.gated", "2"), call("q", "test.free", "3")),
	)
	c1 := h.create("one")
	c2, err := h.svc.Create(context.Background(), "conv-2", "two")
	if err != nil {
		t.Fatal(err)
	}
	h.wait(c2)
	first := h.approvals()

	h2 := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
	n, err := h2.svc.Recover(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("recover = %d, %v", n, err)
	}
	again := h2.approvals()
	if len(again) != 2 {
		t.Fatalf("re-emitted %d requests: %+v", len(again), again)
	}
	byID := map[string]prompt.ApprovalRequest{}
	for _, r := range again {
		byID[r.ApprovalID] = r
	}
	for _, r := range first {
		got, ok := byID[r.ApprovalID]
		if !ok || got.ToolCallID != r.ToolCallID || got.PromptID != r.PromptID || len(got.Queued) != len(r.Queued) {
			t.Fatalf("request %+v not re-emitted as it was: %+v", r, again)
		}
	}
	// The recovered request still works.
	if err := h2.svc.Approve(context.Background(), first[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	c := h2.svc.GetActive(c1.ID())
	if c == nil {
		c = h2.svc.ActiveIn("conv-1")
	}
	if c != nil {
		h2.wait(c)
	}
	p, _ := mem.Prompt(c1.ID())
	if p.State != prompt.StateCompleted {
		t.Fatalf("state after recovered approve = %s", p.State)
	}
}

func TestRoundBound(t *testing.T) {
	var steps []prompttest.Step
	for i := range 5 {
		steps = append(steps, prompttest.Calls(call(fmt.Sprintf("c%d", i), "test.free", "again")))
	}
	h := newHarness(t, opts{maxTurns: 3}, steps...)
	c := h.create("loop forever")
	p := wantState(t, c, prompt.StateFailed)
	if p.Error != "Stopped after 3 model turns without a final answer." || len(h.model.Requests()) != 3 {
		t.Fatalf("error %q after %d turns", p.Error, len(h.model.Requests()))
	}
}

func TestModelErrorFailsThePromptWithTheError(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Step{Err: errors.New("The model endpoint answered 401: check LLM_API_KEY.")})
	c := h.create("hi")
	p := wantState(t, c, prompt.StateFailed)
	if !strings.Contains(p.Error, "check LLM_API_KEY") {
		t.Fatalf("error = %q", p.Error)
	}
	if len(h.done) != 1 {
		t.Fatalf("completed events = %v", h.done)
	}
}

func TestBusyConversationRefusesASecondPrompt(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("a"), prompttest.Answer("b"))
	c := h.create("first")
	if _, err := h.svc.Create(context.Background(), "conv-1", "second"); !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("second create = %v, want ErrBusy", err)
	}
	if h.svc.ActiveIn("conv-1") != c {
		t.Fatal("ActiveIn does not return the waiting completion")
	}
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "a"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	c2 := h.create("third")
	wantState(t, c2, prompt.StateCompleted)
	// The second prompt saw the first in its history.
	msgs := h.model.Requests()[2].Messages
	if msgs[0].Text != "first" || msgs[len(msgs)-1].Text != "third" {
		t.Fatalf("history = %+v", msgs)
	}
}

func TestCancelWhileWaitingRejectsAndEnds(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x"), call("c2", "test.free", "y")))
	c := h.create("go")
	id := h.approvals()[0].ApprovalID
	if err := c.Cancel(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, c, prompt.StateFailed)
	if cl := callOf(t, p, "c1"); cl.Status != prompt.CallRejected {
		t.Fatalf("pending call = %s", cl.Status)
	}
	if cl := callOf(t, p, "c2"); cl.Status != prompt.CallDone || cl.Result.Type != prompt.ResultError {
		t.Fatalf("queued call = %+v", cl)
	}
	if err := h.svc.Approve(context.Background(), id, "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("approve after cancel = %v", err)
	}
	if len(h.rec.got()) != 0 || h.svc.ActiveIn("conv-1") != nil {
		t.Fatal("cancelled prompt ran or stayed active")
	}
	if err := c.Cancel(context.Background(), "alice"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("second cancel = %v", err)
	}
}

func TestCancelWhileRunningStopsTheModelTurn(t *testing.T) {
	started := make(chan struct{})
	model := prompt.ModelFunc(func(ctx context.Context, _ prompt.Request) (prompt.Response, error) {
		close(started)
		<-ctx.Done()
		return prompt.Response{}, ctx.Err()
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: prompt.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Create(context.Background(), "conv", "slow")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.Cancel(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if p := c.Prompt(); p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("prompt = %s %q", p.State, p.Error)
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCloseLeavesARunningPromptForTheNextStart(t *testing.T) {
	started := make(chan struct{})
	model := prompt.ModelFunc(func(ctx context.Context, _ prompt.Request) (prompt.Response, error) {
		close(started)
		<-ctx.Done()
		return prompt.Response{}, ctx.Err()
	})
	mem := prompt.NewMemStore()
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Create(context.Background(), "conv", "slow")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := svc.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close = %v, want deadline exceeded", err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := c.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	p, _ := mem.Prompt(c.ID())
	if p.State != prompt.StateRunning {
		t.Fatalf("stored state after shutdown = %s, want running (resumed next start)", p.State)
	}
	if _, err := svc.Create(context.Background(), "conv2", "x"); !errors.Is(err, prompt.ErrClosed) {
		t.Fatalf("create after close = %v", err)
	}
}

func TestPromptRoundTripsThroughJSON(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Step{Text: "let me", ToolCalls: []prompt.ToolCall{call("c1", "test.gated", "x"), call("c2", "test.free", "y")}})
	c := h.create("go")
	p := c.Prompt()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back prompt.Prompt
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if string(b) != string(b2) || back.PendingCall() == nil || back.PendingCall().Approval.ID != h.approvals()[0].ApprovalID {
		t.Fatalf("round trip differs:\n%s\n%s", b, b2)
	}
}

func TestNewServiceRejectsBadTools(t *testing.T) {
	rec := &recorder{}
	good := rec.tool(t, "a.b", nil)
	for name, tools := range map[string][]*prompt.Tool{
		"duplicate": {good, good},
		"bad name":  {{Name: "has space", Invoke: good.Invoke}},
		"no invoke": {{Name: "x"}},
		"nil":       {nil},
	} {
		if _, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompt.NewMemStore(), Tools: tools}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDecisionThatCannotBeSavedChangesNothing(t *testing.T) {
	var failing atomic.Bool
	h := newHarness(t, opts{store: func(m *prompt.MemStore) prompt.Store {
		return &failingDecide{Store: m, fail: &failing}
	}}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	c := h.create("go")
	failing.Store(true)
	if err := c.Cancel(context.Background(), "alice"); err == nil {
		t.Fatal("cancel succeeded although nothing was saved")
	}
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "alice"); err == nil {
		t.Fatal("approve succeeded although nothing was saved")
	}
	p := wantState(t, c, prompt.StateWaiting)
	if p.PendingCall() == nil || h.svc.ActiveIn("conv-1") != c || len(h.rec.got()) != 0 {
		t.Fatal("failed cancel or approve changed the prompt")
	}
	failing.Store(false)
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
}

type failingDecide struct {
	prompt.Store
	fail *atomic.Bool
}

func (f *failingDecide) DecideApproval(ctx context.Context, p *prompt.Prompt, callID string) error {
	if f.fail.Load() {
		return errors.New("database is locked")
	}
	return f.Store.DecideApproval(ctx, p, callID)
}

func TestExecutingThatCannotBeSavedEndsAsNotRun(t *testing.T) {
	// The tool never starts when its executing status cannot be saved; the
	// record (and the approval's audit row) must not say "executing"
	// forever after.
	var failed atomic.Bool
	h := newHarness(t, opts{store: func(m *prompt.MemStore) prompt.Store {
		return &failingStore{Store: m, fail: func(p *prompt.Prompt) error {
			for _, it := range p.Output {
				if it.Call != nil && it.Call.Status == prompt.CallExecuting && failed.CompareAndSwap(false, true) {
					return errors.New("disk I/O error")
				}
			}
			return nil
		}}
	}}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	if err := h.svc.Approve(context.Background(), h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	stored, _ := h.mem.Prompt(c.ID())
	cl := callOf(t, stored, "c1")
	if stored.State != prompt.StateFailed || cl.Status != prompt.CallDone || cl.Result == nil ||
		!strings.HasPrefix(cl.Result.Error, "not run") || !strings.HasPrefix(cl.Approval.Note, "not run") {
		t.Fatalf("stored %s, call %s %+v, approval %+v", stored.State, cl.Status, cl.Result, cl.Approval)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

func TestAPanickingToolIsAnErrorResultNotACrash(t *testing.T) {
	panicky := func(r *recorder) []*prompt.Tool {
		boom, err := prompt.NewTool("test.boom", "panics", nil, func(context.Context, echoIn) (string, error) {
			panic("index out of range in a parser")
		})
		if err != nil {
			t.Fatal(err)
		}
		badGate, err := prompt.NewTool("test.badgate", "gate panics",
			func(context.Context, echoIn) (prompt.Requirement, error) { panic("nil map") },
			func(context.Context, echoIn) (string, error) { return "ran", nil })
		if err != nil {
			t.Fatal(err)
		}
		return []*prompt.Tool{boom, badGate}
	}
	h := newHarness(t, opts{tools: panicky},
		prompttest.Calls(call("c1", "test.boom", "x"), call("c2", "test.badgate", "y")),
		prompttest.Answer("recovered"))
	c := h.create("go")
	wantState(t, c, prompt.StateCompleted)
	res := lastToolResults(h.model)
	for _, id := range []string{"c1", "c2"} {
		if !strings.Contains(res[id], "failed with an internal error") {
			t.Errorf("result %s = %q", id, res[id])
		}
	}
	if len(h.approvals()) != 0 {
		t.Fatal("a panicking gate asked for approval")
	}
}

// TestStaticGateOnAHandBuiltTool covers the other way to make a tool: a
// raw-JSON Invoke with the static gate Always and no schema.
func TestStaticGateOnAHandBuiltTool(t *testing.T) {
	var ran atomic.Int32
	raw := &prompt.Tool{
		Name: "test.raw", Description: "raw",
		Gate: prompt.Always("static reason"),
		Invoke: func(_ context.Context, in json.RawMessage) (string, error) {
			ran.Add(1)
			return "got " + string(in), nil
		},
	}
	h := newHarness(t, opts{tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{raw} }},
		prompttest.Calls(prompttest.Call("c1", "test.raw", `{"any":1}`)), prompttest.Answer("done"))
	c := h.create("go")
	reqs := h.approvals()
	if len(reqs) != 1 || reqs[0].Reason != "static reason" || ran.Load() != 0 {
		t.Fatalf("requests %+v, ran %d", reqs, ran.Load())
	}
	if err := c.Approve(context.Background(), "c1", "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	if got := lastToolResults(h.model)["c1"]; got != `got {"any":1}` || ran.Load() != 1 {
		t.Fatalf("result %q, ran %d", got, ran.Load())
	}
}
