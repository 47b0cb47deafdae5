package prompt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestTextAnswerCompletes(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Answer("hello there"))
	id := h.create("hi")
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.ConversationID != "conv-1" || a.State != prompt.StateCompleted || a.Text != "hello there" || a.Error != "" {
		t.Fatalf("answer = %+v", a)
	}
	p := h.stored(id)
	if p.State != prompt.StateCompleted || p.Turns != 1 || p.FinalText() != "hello there" || p.Input != "hi" {
		t.Fatalf("stored = %+v", p)
	}
	reqs := h.script.Requests()
	if len(reqs) != 1 || reqs[0].System != "be careful" || len(reqs[0].Tools) != 2 ||
		len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Role != prompt.RoleUser || reqs[0].Messages[0].Text != "hi" {
		t.Fatalf("model request = %+v", reqs)
	}
	if _, err := h.svc.Active(context.Background(), "conv-1"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("active after the end = %v, want ErrNotFound", err)
	}
}

func TestFreeToolRunsWithoutAsking(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done"))
	id := h.create("go")
	p := h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:x"}) {
		t.Fatalf("ran %v", got)
	}
	if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result.Type != prompt.ResultSuccess || c.Result.Output != "echo x" || c.Approval != nil {
		t.Fatalf("call = %+v", c)
	}
	if got := lastToolResults(t, h.script)["c1"]; got != "echo x" {
		t.Fatalf("model saw %q", got)
	}
	nothingOn(t, h.reqs, "approval asked for a free tool")
}

func TestApproveRunsTheGatedCallOnceAndCompletes(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("c1", "test.gated", "hi")),
		prompttest.Answer("done"),
	)
	id := h.create("please")
	req := h.request()
	if req.PromptID != id || req.ToolCallID != "c1" || req.ToolName != "test.gated" || req.Reason != "it is risky" ||
		string(req.Input) != `{"text":"hi"}` || len(req.ApprovalID) != 16 || req.ConversationID != "conv-1" ||
		req.RequestedAt.IsZero() || len(req.Queued) != 0 {
		t.Fatalf("approval request = %+v", req)
	}
	h.idle(id)
	p := h.stored(id)
	if got := callOf(t, p, "c1"); p.State != prompt.StateWaiting || got.Status != prompt.CallPending ||
		got.Result.Type != prompt.ResultPending || got.Result.Reason != "it is risky" || got.Approval.Status != prompt.ApprovalPending {
		t.Fatalf("stored %s, call %+v %+v", p.State, got, got.Result)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran before approval")
	}
	st, err := h.svc.Active(context.Background(), "conv-1")
	if err != nil || st.PromptID != id || st.State != prompt.StateWaiting || st.Pending == nil || st.Pending.ApprovalID != req.ApprovalID {
		t.Fatalf("active = %+v, %v", st, err)
	}
	ref, err := h.svc.LookupApproval(context.Background(), req.ApprovalID)
	if err != nil || ref.PromptID != id || ref.CallID != "c1" || ref.Status != prompt.ApprovalPending {
		t.Fatalf("lookup = %+v, %v", ref, err)
	}

	h.approve(req.ApprovalID)
	p = h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:hi"}) {
		t.Fatalf("invocations = %v", got)
	}
	cl := callOf(t, p, "c1")
	if cl.Status != prompt.CallDone || cl.Result.Output != "echo hi" || cl.Approval.Status != prompt.ApprovalApproved ||
		cl.Approval.DecidedBy != "alice" || cl.Approval.DecidedAt.IsZero() {
		t.Fatalf("call = %+v approval %+v", cl, cl.Approval)
	}
	if p.FinalText() != "done" {
		t.Fatalf("final text = %q", p.FinalText())
	}
	if got := lastToolResults(t, h.script)["c1"]; got != "echo hi" {
		t.Fatalf("model saw %q", got)
	}
	if n := len(h.script.Requests()); n != 2 {
		t.Fatalf("model turns = %d, want 2", n)
	}
}

func TestToolGetsItsCallInfo(t *testing.T) {
	infos := make(chan prompt.CallInfo, 2)
	tool, err := prompt.NewTool("test.info", "tells", prompt.AlwaysFor[echoIn]("risky"),
		func(ctx context.Context, _ echoIn) (string, error) {
			ci, _ := prompt.CallFromContext(ctx)
			infos <- ci
			return "ok", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, opts{tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{tool} }},
		prompttest.Calls(call("c1", "test.info", "x")), prompttest.Answer("done"))
	id := h.create("go")
	h.approve(h.request().ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if ci := waitFor(t, infos); ci != (prompt.CallInfo{PromptID: id, CallID: "c1", Approved: true, ApprovedBy: "alice"}) {
		t.Fatalf("call info = %+v", ci)
	}
}

func TestRejectGivesTheModelTheReasonAndNeverRuns(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("c1", "test.gated", "hi")),
		prompttest.Answer("ok, I won't"),
	)
	id := h.create("please")
	req := h.request()
	if err := h.svc.Reject(context.Background(), req.ApprovalID, "not that site", "bob"); err != nil {
		t.Fatal(err)
	}
	p := h.endAs(id, prompt.StateCompleted)
	if len(h.rec.got()) != 0 {
		t.Fatalf("rejected tool ran: %v", h.rec.got())
	}
	if got := lastToolResults(t, h.script)["c1"]; got != "Error: Rejected by user: not that site" {
		t.Fatalf("model saw %q", got)
	}
	if cl := callOf(t, p, "c1"); cl.Status != prompt.CallRejected || cl.Approval.Status != prompt.ApprovalRejected ||
		cl.Approval.Note != "not that site" || cl.Approval.DecidedBy != "bob" {
		t.Fatalf("call = %+v approval %+v", cl, cl.Approval)
	}
}

func TestDynamicGate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gate       func(context.Context, echoIn) (prompt.Requirement, error)
		wantAsk    bool
		wantRun    int
		wantResult string
	}{
		{"required", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Required: true, Reason: "dyn"}, nil
		}, true, 0, ""},
		{"not required", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Required: false, Reason: "fine"}, nil
		}, false, 1, "echo x"},
		{"erroring", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{}, errors.New("allowlist unavailable")
		}, false, 0, "Error: approval check failed: allowlist unavailable"},
		{"panicking", func(context.Context, echoIn) (prompt.Requirement, error) {
			panic("nil map")
		}, false, 0, "Error: approval check failed: the tool test.dyn failed with an internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, opts{tools: func(r *recorder) []*prompt.Tool {
				return []*prompt.Tool{r.tool(t, "test.dyn", tc.gate)}
			}}, prompttest.Calls(call("c1", "test.dyn", "x")), prompttest.Answer("end"))
			id := h.create("go")
			if tc.wantAsk {
				if r := h.request(); r.Reason != "dyn" || r.PromptID != id {
					t.Fatalf("request = %+v", r)
				}
				h.idle(id)
				if p := h.stored(id); p.State != prompt.StateWaiting || len(h.rec.got()) != 0 {
					t.Fatalf("stored %s, ran %v", p.State, h.rec.got())
				}
				return
			}
			h.endAs(id, prompt.StateCompleted)
			nothingOn(t, h.reqs, "approval asked")
			if got := len(h.rec.got()); got != tc.wantRun {
				t.Fatalf("ran %d times, want %d", got, tc.wantRun)
			}
			if got := lastToolResults(t, h.script)["c1"]; got != tc.wantResult {
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
	id := h.create("go")
	req := h.request()
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:1"}) {
		t.Fatalf("before the decision ran %v", got)
	}
	if req.ToolCallID != "b" || len(req.Queued) != 1 || req.Queued[0].ID != "c" || req.Queued[0].Name != "test.free" ||
		req.Queued[0].Arguments != `{"text":"3"}` {
		t.Fatalf("request = %+v", req)
	}
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:1", "test.gated:2", "test.free:3"}) {
		t.Fatalf("order = %v", got)
	}
	// One assistant message with three calls, then three results in order.
	msgs := h.script.Requests()[1].Messages
	if len(msgs) != 5 || len(msgs[1].ToolCalls) != 3 || msgs[2].ToolCallID != "a" || msgs[3].ToolCallID != "b" || msgs[4].ToolCallID != "c" {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestTwoPausesInOneBatch(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("a", "test.gated", "1"), call("b", "test.free", "2"), call("c", "test.gated", "3")),
		prompttest.Answer("end"),
	)
	id := h.create("go")
	first := h.request()
	if first.ToolCallID != "a" || len(first.Queued) != 2 {
		t.Fatalf("first = %+v", first)
	}
	h.approve(first.ApprovalID)
	second := h.request()
	if second.ToolCallID != "c" || len(second.Queued) != 0 || second.ApprovalID == first.ApprovalID {
		t.Fatalf("second = %+v", second)
	}
	if err := h.svc.Reject(context.Background(), second.ApprovalID, "", "alice"); err != nil {
		t.Fatal(err)
	}
	h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:1", "test.free:2"}) {
		t.Fatalf("ran %v", got)
	}
	if got := lastToolResults(t, h.script)["c"]; got != "Error: Rejected by user" {
		t.Fatalf("model saw %q", got)
	}
}

func TestInvalidInputAndUnknownToolAreErrorsForTheModel(t *testing.T) {
	gateRan := make(chan string, 10)
	tools := func(r *recorder) []*prompt.Tool {
		return []*prompt.Tool{r.tool(t, "test.gated", func(_ context.Context, in echoIn) (prompt.Requirement, error) {
			gateRan <- in.Text
			return prompt.Requirement{Required: true, Reason: "risky"}, nil
		})}
	}
	h := newHarness(t, opts{tools: tools},
		prompttest.Calls(
			prompttest.Call("u", "no.such", `{}`),
			prompttest.Call("j", "test.gated", `{"text":`),
			prompttest.Call("s", "test.gated", `{"text":5}`),
			prompttest.Call("x", "test.gated", `{"text":"a","extra":1}`),
			prompttest.Call("m", "test.gated", `{}`),
			prompttest.Call("d", "test.gated", `{"text":"harmless","text":"rm -rf /"}`),
		),
		prompttest.Answer("sorry"),
	)
	id := h.create("go")
	h.endAs(id, prompt.StateCompleted)
	nothingOn(t, gateRan, "the gate ran on invalid input")
	nothingOn(t, h.reqs, "approval asked for invalid input")
	if len(h.rec.got()) != 0 {
		t.Fatalf("ran %v", h.rec.got())
	}
	res := lastToolResults(t, h.script)
	for id, want := range map[string]string{
		"u": `unknown tool "no.such"`, "j": "not valid JSON", "s": "invalid arguments", "x": "invalid arguments",
		"m": "invalid arguments", "d": `duplicate key "text"`,
	} {
		if !strings.HasPrefix(res[id], "Error: ") || !strings.Contains(res[id], want) {
			t.Errorf("result %s = %q, want it to contain %q", id, res[id], want)
		}
	}
}

func TestToolErrorIsAnErrorResult(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.free", "fail")), prompttest.Answer("too bad"))
	id := h.create("go")
	p := h.endAs(id, prompt.StateCompleted)
	if got := lastToolResults(t, h.script)["c1"]; got != "Error: tool failed on purpose" {
		t.Fatalf("model saw %q", got)
	}
	if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result.Type != prompt.ResultError {
		t.Fatalf("call = %+v", c)
	}
}

func TestAPanickingToolIsAnErrorResultNotACrash(t *testing.T) {
	panicky := func(*recorder) []*prompt.Tool {
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
	id := h.create("go")
	p := h.endAs(id, prompt.StateCompleted)
	res := lastToolResults(t, h.script)
	if res["c1"] != "Error: the tool test.boom failed with an internal error" {
		t.Errorf("result c1 = %q", res["c1"])
	}
	if res["c2"] != "Error: approval check failed: the tool test.badgate failed with an internal error" {
		t.Errorf("result c2 = %q", res["c2"])
	}
	if c := callOf(t, p, "c2"); c.Status != prompt.CallDone || c.Approval != nil {
		t.Fatalf("call c2 = %+v", c)
	}
	nothingOn(t, h.reqs, "a panicking gate asked for approval")
}

func TestDuplicateAndEmptyCallIDsAreMadeUnique(t *testing.T) {
	h := newHarness(t, opts{},
		prompttest.Calls(call("x", "test.free", "1"), call("x", "test.free", "2"), call("", "test.free", "3")),
		prompttest.Calls(call("x", "test.gated", "4")),
		prompttest.Answer("done"),
	)
	id := h.create("go")
	req := h.request()
	if req.ToolCallID == "x" || req.ToolCallID == "" {
		t.Fatalf("a reused ID reached the request: %+v", req)
	}
	h.approve(req.ApprovalID)
	p := h.endAs(id, prompt.StateCompleted)
	seen := map[string]bool{}
	var ids []string
	for _, it := range p.Output {
		if c := it.Call; c != nil {
			if c.ID == "" || seen[c.ID] {
				t.Fatalf("call ID %q not unique in %+v", c.ID, p.Output)
			}
			seen[c.ID] = true
			ids = append(ids, c.ID)
			if c.Status != prompt.CallDone || c.Result.Type != prompt.ResultSuccess {
				t.Fatalf("call %s = %+v", c.ID, c)
			}
		}
	}
	if len(ids) != 4 || ids[0] != "x" || ids[3] != req.ToolCallID {
		t.Fatalf("call IDs = %v", ids)
	}
	// Every result reaches the model under its own call's ID.
	res := lastToolResults(t, h.script)
	for i, cid := range ids {
		if want := fmt.Sprintf("echo %d", i+1); res[cid] != want {
			t.Errorf("result of %s = %q, want %q", cid, res[cid], want)
		}
	}
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.free:1", "test.free:2", "test.free:3", "test.gated:4"}) {
		t.Fatalf("ran %v", got)
	}
}

func TestMaxTurnsEndsThePromptFailed(t *testing.T) {
	var steps []prompttest.Step
	for i := range 5 {
		steps = append(steps, prompttest.Calls(call(fmt.Sprintf("c%d", i), "test.free", "again")))
	}
	h := newHarness(t, opts{maxTurns: 3}, steps...)
	id := h.create("loop forever")
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.State != prompt.StateFailed || a.Error != "Stopped after 3 model turns without a final answer." {
		t.Fatalf("answer = %+v", a)
	}
	if n := len(h.script.Requests()); n != 3 {
		t.Fatalf("model turns = %d, want 3", n)
	}
	if p := h.stored(id); p.State != prompt.StateFailed || p.Turns != 3 || len(h.rec.got()) != 3 {
		t.Fatalf("stored %s after %d turns, ran %v", p.State, p.Turns, h.rec.got())
	}
}

func TestModelErrorFailsThePromptWithTheError(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Step{Err: errors.New("The model endpoint answered 401: check LLM_API_KEY.")})
	id := h.create("hi")
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.State != prompt.StateFailed || a.Error != "The model failed: The model endpoint answered 401: check LLM_API_KEY." {
		t.Fatalf("answer = %+v", a)
	}
	if p := h.stored(id); p.State != prompt.StateFailed || p.Error != a.Error {
		t.Fatalf("stored = %s %q", p.State, p.Error)
	}
	nothingOn(t, h.ended, "a second ended event")
}

func TestBusyConversationRefusesASecondPrompt(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("a"), prompttest.Answer("b"), prompttest.Answer("c"))
	id := h.create("first")
	req := h.request()
	if _, err := h.svc.Create(context.Background(), "conv-1", "second"); !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("second create = %v, want ErrBusy", err)
	}
	if st, err := h.svc.Active(context.Background(), "conv-1"); err != nil || st.PromptID != id {
		t.Fatalf("active = %+v, %v", st, err)
	}
	// Another conversation is not held up.
	other := h.createIn("conv-2", "elsewhere")
	h.approve(req.ApprovalID)
	ended := map[string]bool{h.end().ID: true, h.end().ID: true}
	if !ended[id] || !ended[other] {
		t.Fatalf("ended %v", ended)
	}
	third := h.create("third")
	h.endAs(third, prompt.StateCompleted)
}

func TestHistoryOfEarlierPromptsIsShownUpToTheLimit(t *testing.T) {
	h := newHarness(t, opts{historyLimit: 2},
		prompttest.Answer("one"), prompttest.Answer("two"), prompttest.Answer("three"),
		prompttest.Answer("alone"), prompttest.Answer("four"))
	for _, in := range []string{"first", "second", "third"} {
		h.endAs(h.create(in), prompt.StateCompleted)
	}
	h.endAs(h.createIn("conv-2", "elsewhere"), prompt.StateCompleted)
	h.endAs(h.create("fourth"), prompt.StateCompleted)
	texts := func(n int) []string {
		var out []string
		for _, m := range h.script.Requests()[n].Messages {
			out = append(out, string(m.Role)+":"+m.Text)
		}
		return out
	}
	if got, want := texts(2), []string{"user:first", "assistant:one", "user:second", "assistant:two", "user:third"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("third prompt saw %v, want %v", got, want)
	}
	// Only the latest two earlier prompts, and none of another conversation.
	if got, want := texts(3), []string{"user:elsewhere"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("conv-2 saw %v, want %v", got, want)
	}
	if got, want := texts(4), []string{"user:second", "assistant:two", "user:third", "assistant:three", "user:fourth"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("fourth prompt saw %v, want %v", got, want)
	}
}

func TestPromptRoundTripsThroughJSON(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Step{Text: "let me", ToolCalls: []prompt.ToolCall{call("c1", "test.gated", "x"), call("c2", "test.free", "y")}})
	id := h.create("go")
	req := h.request()
	h.idle(id)
	p := h.stored(id)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back prompt.Prompt
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if string(b) != string(b2) {
		t.Fatalf("round trip differs:\n%s\n%s", b, b2)
	}
	if got, ok := back.PendingRequest(); !ok || !reflect.DeepEqual(got.Queued, req.Queued) || got.ApprovalID != req.ApprovalID {
		t.Fatalf("pending request = %+v, %v; want %+v", got, ok, req)
	}
}

// A message handed over twice (a crash between taking it and recording
// that it was handled) starts the agent once.
func TestCreateOnceStartsAMessageOnce(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Answer("done"))
	ctx := context.Background()
	first, err := h.svc.CreateOnce(ctx, "conv-1", "msg-7", "go")
	if err != nil {
		t.Fatal(err)
	}
	h.endAs(first.PromptID, prompt.StateCompleted)
	if _, err := h.svc.CreateOnce(ctx, "conv-1", "msg-7", "go"); !errors.Is(err, prompt.ErrExists) {
		t.Fatalf("second create of one message: %v, want ErrExists", err)
	}
	if n := len(h.script.Requests()); n != 1 {
		t.Fatalf("model asked %d times, want once", n)
	}
	other, err := h.svc.CreateOnce(ctx, "conv-1", "msg-8", "again")
	if err != nil || other.PromptID == first.PromptID {
		t.Fatalf("another message: %+v, %v", other, err)
	}
	if _, err := h.svc.CreateOnce(ctx, "conv-2", "msg-7", "elsewhere"); err != nil && !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("the same key in another conversation: %v", err)
	}
}
