package prompt_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// waitTimeout only guards against a hung test: every wait ends on an event.
const waitTimeout = 10 * time.Second

// waitFor returns the next value from ch, failing the test if none comes
// in time.
func waitFor[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %T in %s", *new(T), waitTimeout)
		panic("unreachable")
	}
}

// waitClosed fails the test if ch is not closed in time.
func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: not in %s", what, waitTimeout)
	}
}

// until spins, yielding, until cond holds: for a state change that has no
// event, reached without a timer.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in %s", what, waitTimeout)
		}
		runtime.Gosched()
	}
}

// nothingOn fails the test if ch holds a value already.
func nothingOn[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: got %+v", what, v)
	default:
	}
}

type echoIn struct {
	Text string `json:"text"`
}

// recorder counts invocations per tool and can hold them.
type recorder struct {
	mu    sync.Mutex
	calls []string // "tool:text"
	// block, when set, holds every invocation until it is closed or the
	// call's context ends.
	block chan struct{}
	// started gets the text of each invocation as it starts.
	started chan string
}

func newRecorder() *recorder { return &recorder{started: make(chan string, 1000)} }

func (r *recorder) record(name, text string) {
	r.mu.Lock()
	r.calls = append(r.calls, name+":"+text)
	r.mu.Unlock()
	r.started <- text
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
				return "", context.Cause(ctx)
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

func defaultTools(t testing.TB) func(r *recorder) []*prompt.Tool {
	return func(r *recorder) []*prompt.Tool {
		return []*prompt.Tool{
			r.tool(t, "test.free", nil),
			r.tool(t, "test.gated", prompt.AlwaysFor[echoIn]("it is risky")),
		}
	}
}

// dbStore wraps the in-memory store the way a database behaves where it
// matters to the core: a save with a cancelled context fails, as
// database/sql does. save, when set, runs before each save and can fail it.
type dbStore struct {
	prompt.Store
	save func(p *prompt.Prompt, changed []int) error
}

func (s *dbStore) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.save != nil {
		if err := s.save(p, changed); err != nil {
			return err
		}
	}
	return s.Store.SavePrompt(ctx, p, changed, notices...)
}

type opts struct {
	mem          *prompttest.Store // shared with another service; new if nil
	save         func(p *prompt.Prompt, changed []int) error
	wrap         func(prompt.Store) prompt.Store // outermost
	model        prompt.Model                    // default: the scripted steps
	rec          *recorder
	tools        func(r *recorder) []*prompt.Tool
	maxTurns     int
	historyLimit int
	workers      int
	noClose      bool // the test closes the service itself
	// timeout, remind and clock set the approval deadlines and the
	// service's clock.
	timeout, remind time.Duration
	clock           *manualClock
	quorum          int
	// policy and mode are the operator's rules and approval mode.
	policy prompt.Policy
	mode   prompt.Mode
	// replica, when set, names the service and gives it leases: those of
	// leases, else mem's. ttl is its LeaseTTL.
	replica string
	leases  prompt.Leases
	ttl     time.Duration
	logger  *slog.Logger
}

type harness struct {
	t      testing.TB
	svc    *prompt.Service
	mem    *prompttest.Store
	script *prompttest.Model
	rec    *recorder

	reqs     chan prompt.ApprovalRequest
	ended    chan prompt.Answer
	activity chan prompt.Activity
}

func newHarness(t testing.TB, o opts, steps ...prompttest.Step) *harness {
	t.Helper()
	if o.rec == nil {
		o.rec = newRecorder()
	}
	if o.tools == nil {
		o.tools = defaultTools(t)
	}
	if o.mem == nil {
		o.mem = prompttest.NewStore()
	}
	var store prompt.Store = &dbStore{Store: o.mem, save: o.save}
	if o.wrap != nil {
		store = o.wrap(store)
	}
	if o.replica != "" && o.leases == nil {
		o.leases = o.mem
	}
	h := &harness{
		t: t, mem: o.mem, script: prompttest.NewModel(steps...), rec: o.rec,
		reqs:     make(chan prompt.ApprovalRequest, 1000),
		ended:    make(chan prompt.Answer, 1000),
		activity: make(chan prompt.Activity, 1000),
	}
	model := o.model
	if model == nil {
		model = h.script
	}
	svc, err := prompt.NewService(prompt.Config{
		Model: model, Store: store, Tools: o.tools(o.rec), System: "be careful",
		MaxTurns: o.maxTurns, HistoryLimit: o.historyLimit, Workers: o.workers,
		ApprovalTimeout: o.timeout, ApprovalRemind: o.remind, Quorum: o.quorum,
		Now: o.clock.nowFunc(), AfterFunc: o.clock.afterFunc(),
		Policy: o.policy, Mode: o.mode,
		Leases: o.leases, Replica: o.replica, LeaseTTL: o.ttl, Logger: o.logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.OnApprovalRequested(func(_ context.Context, req prompt.ApprovalRequest) { h.reqs <- req })
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { h.ended <- a })
	svc.OnActivity(func(_ context.Context, a prompt.Activity) { h.activity <- a })
	h.svc = svc
	if !o.noClose {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := svc.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	return h
}

// create starts a prompt in conversation conv-1.
func (h *harness) create(input string) string {
	h.t.Helper()
	return h.createIn("conv-1", input)
}

func (h *harness) createIn(conv, input string) string {
	h.t.Helper()
	c, err := h.svc.Create(context.Background(), conv, input)
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return c.PromptID
}

// request waits for the next approval request.
func (h *harness) request() prompt.ApprovalRequest {
	h.t.Helper()
	return waitFor(h.t, h.reqs)
}

// end waits for the next prompt to end and returns it as stored.
func (h *harness) end() *prompt.Prompt {
	h.t.Helper()
	a := waitFor(h.t, h.ended)
	return h.stored(a.PromptID)
}

// endAs waits for the next prompt to end, checks it is id in state want,
// and returns it as stored.
func (h *harness) endAs(id string, want prompt.State) *prompt.Prompt {
	h.t.Helper()
	p := h.end()
	if p.ID != id {
		h.t.Fatalf("prompt %s ended, want %s", p.ID, id)
	}
	if p.State != want {
		h.t.Fatalf("state = %s (error %q), want %s", p.State, p.Error, want)
	}
	return p
}

func (h *harness) stored(id string) *prompt.Prompt {
	h.t.Helper()
	p, err := h.mem.Prompt(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// idle waits until the service has no pass of prompt id under way: its
// last activity event said it stopped working.
func (h *harness) idle(id string) {
	h.t.Helper()
	for {
		a := waitFor(h.t, h.activity)
		if a.PromptID == id && !a.Working {
			return
		}
	}
}

func (h *harness) approve(id string) {
	h.t.Helper()
	if err := h.svc.Approve(context.Background(), id, "alice"); err != nil {
		h.t.Fatalf("approve: %v", err)
	}
}

func call(id, name, text string) prompt.ToolCall {
	return prompttest.Call(id, name, fmt.Sprintf(`{"text":%q}`, text))
}

func callOf(t testing.TB, p *prompt.Prompt, id string) *prompt.Call {
	t.Helper()
	for _, it := range p.Output {
		if it.Call != nil && it.Call.ID == id {
			return it.Call
		}
	}
	t.Fatalf("no call %s in %+v", id, p.Output)
	return nil
}

// toolResults returns the tool messages of request n (from 0; -1 is the
// last) the model was sent.
func toolResults(t testing.TB, m *prompttest.Model, n int) map[string]string {
	t.Helper()
	reqs := m.Requests()
	if n < 0 {
		n += len(reqs)
	}
	if n < 0 || n >= len(reqs) {
		t.Fatalf("no model request %d of %d", n, len(reqs))
	}
	out := map[string]string{}
	for _, msg := range reqs[n].Messages {
		if msg.Role == prompt.RoleTool {
			out[msg.ToolCallID] = msg.Text
		}
	}
	return out
}

func lastToolResults(t testing.TB, m *prompttest.Model) map[string]string {
	t.Helper()
	return toolResults(t, m, -1)
}

// blockingModel answers "done" to each request once it is let go: it
// sends on started when a request arrives and returns when release gives
// it a token, or with ctx's cause when ctx ends.
type blockingModel struct {
	started chan prompt.Request
	release chan struct{}
	// ignoreCtx makes it wait for release even when ctx ends, and answer
	// with resp then.
	ignoreCtx bool
	resp      prompt.Response
}

func newBlockingModel() *blockingModel {
	return &blockingModel{started: make(chan prompt.Request, 1000), release: make(chan struct{}),
		resp: prompt.Response{Text: "done"}}
}

func (m *blockingModel) Complete(ctx context.Context, req prompt.Request) (prompt.Response, error) {
	m.started <- req
	if m.ignoreCtx {
		<-m.release
		return m.resp, nil
	}
	select {
	case <-m.release:
		return m.resp, nil
	case <-ctx.Done():
		return prompt.Response{}, context.Cause(ctx)
	}
}
