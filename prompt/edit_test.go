package prompt_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// edit edits the request approvalID to args as bob, failing the test on
// an error.
func (h *harness) edit(approvalID, args string) {
	h.t.Helper()
	if err := h.svc.Edit(context.Background(), approvalID, args, "bob"); err != nil {
		h.t.Fatalf("edit to %s: %v", args, err)
	}
}

// editedRequest waits for the request of an edited call and checks it
// shows the edit of old, with input want.
func (h *harness) editedRequest(old prompt.ApprovalRequest, want string) prompt.ApprovalRequest {
	h.t.Helper()
	req := h.request()
	if req.PromptID != old.PromptID || req.ToolCallID != old.ToolCallID || req.ApprovalID == old.ApprovalID ||
		string(req.Input) != want || req.InputHash != prompt.InputHash(want) || req.InputHash == old.InputHash ||
		req.Edit == nil || req.Edit.Arguments != want || req.Edit.By != "bob" || req.Scope != nil {
		h.t.Fatalf("request after the edit: %s\nafter %s", fmtRequest(req), fmtRequest(old))
	}
	return req
}

func TestAnEditedCallAsksAgainAndRunsTheEditedInputOnce(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.gated", "x"), call("c2", "test.free", "after")), prompttest.Answer("done"))
	ctx := context.Background()
	id := h.create("go")
	old := h.request()
	h.edit(old.ApprovalID, `{ "text": "y" }`)

	ref, err := h.svc.LookupApproval(ctx, old.ApprovalID)
	if err != nil || ref.Status != prompt.ApprovalEdited || ref.DecidedBy != "bob" {
		t.Fatalf("the edited request: %+v, %v", ref, err)
	}
	if err := h.svc.Approve(ctx, old.ApprovalID, "alice"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("approve the edited request: %v, want ErrNotPending", err)
	}
	req := h.editedRequest(old, `{"text":"y"}`)
	if req.Edit.ApprovalID != old.ApprovalID || len(req.Queued) != 1 || req.Queued[0].ID != "c2" {
		t.Fatalf("request after the edit: %+v", req)
	}
	// The old request still reads as it was shown, with its outcome.
	was, wasRef, err := h.svc.Request(ctx, old.ApprovalID)
	if err != nil || wasRef.Status != prompt.ApprovalEdited || was.ApprovalID != old.ApprovalID ||
		string(was.Input) != `{"text":"x"}` || was.InputHash != old.InputHash || was.Reason != old.Reason ||
		was.ToolName != old.ToolName || was.ToolCallID != "c1" || !was.RequestedAt.Equal(old.RequestedAt) {
		t.Fatalf("the old request: %s, %+v, %v", fmtRequest(was), wasRef, err)
	}
	// An edited call is approved on its own: no "always".
	if _, err := h.svc.ApproveAlways(ctx, req.ApprovalID, "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNoGrant) {
		t.Fatalf("approve always an edited call: %v, want ErrNoGrant", err)
	}
	h.approve(req.ApprovalID)
	p := h.endAs(id, prompt.StateCompleted)

	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:y", "test.free:after"}) {
		t.Fatalf("ran %v", got)
	}
	if r := l.all()[0]; r.input != `{"text":"y"}` || !r.info.Approved || r.info.ApprovedBy != "alice" {
		t.Fatalf("the edited call ran as %+v", r)
	}
	c := callOf(t, p, "c1")
	if c.Arguments != `{"text":"x"}` || c.Edit == nil || c.Edit.Arguments != `{"text":"y"}` || c.Edit.ApprovalID != old.ApprovalID ||
		c.Approval.ID != req.ApprovalID || c.Approval.Status != prompt.ApprovalApproved || c.Result.Output != "echo y" {
		t.Fatalf("edited call: %+v, edit %+v, approval %+v", c, c.Edit, c.Approval)
	}

	// The model sees its own call, and one result for it that says what
	// ran instead.
	reqs := h.script.Requests()
	last := reqs[len(reqs)-1]
	var calls []prompt.ToolCall
	results := map[string][]string{}
	for _, m := range last.Messages {
		calls = append(calls, m.ToolCalls...)
		if m.Role == prompt.RoleTool {
			results[m.ToolCallID] = append(results[m.ToolCallID], m.Text)
		}
	}
	if len(calls) != 2 || calls[0].ID != "c1" || calls[0].Arguments != `{"text":"x"}` {
		t.Fatalf("the model's calls as it is shown them: %+v", calls)
	}
	if len(results) != 2 || len(results["c1"]) != 1 || len(results["c2"]) != 1 {
		t.Fatalf("results per call: %v", results)
	}
	text := results["c1"][0]
	for _, want := range []string{`{"text":"y"}`, prompt.Changes(`{"text":"x"}`, `{"text":"y"}`), `text: "x" → "y"`, "echo y"} {
		if !strings.Contains(text, want) {
			t.Errorf("result of the edited call %q lacks %q", text, want)
		}
	}
	if !strings.HasSuffix(text, "\necho y") {
		t.Errorf("result of the edited call %q does not end with the outcome", text)
	}
	// The outbox tells the chat of the edit and asks again.
	if got, want := kinds(h.mem, id), []string{"request " + old.ApprovalID, "decided " + old.ApprovalID,
		"request " + req.ApprovalID, "decided " + req.ApprovalID, "answer "}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
}

func TestAnEditedCallMayBeEditedAgain(t *testing.T) {
	h := newHarness(t, opts{tools: grantTools(t, &callLog{})},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	id := h.create("go")
	first := h.request()
	h.edit(first.ApprovalID, `{"text":"y"}`)
	second := h.editedRequest(first, `{"text":"y"}`)
	h.edit(second.ApprovalID, `{"text":"z"}`)
	third := h.editedRequest(second, `{"text":"z"}`)
	h.approve(third.ApprovalID)
	p := h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:z"}) {
		t.Fatalf("ran %v", got)
	}
	// The model is told against its own arguments.
	if text := lastToolResults(t, h.script)["c1"]; !strings.Contains(text, `text: "x" → "z"`) {
		t.Fatalf("result %q", text)
	}
	if c := callOf(t, p, "c1"); c.Edit.ApprovalID != second.ApprovalID {
		t.Fatalf("edit = %+v, want the latest", c.Edit)
	}
}

func TestARefusedEditLeavesTheRequestAsItWas(t *testing.T) {
	for _, tc := range []struct {
		name, tool, args, reason string
	}{
		{"invalid JSON", "test.gated", `{"text":`, "not valid JSON"},
		{"empty", "test.gated", ``, "invalid arguments"},
		{"not an object", "test.gated", `["y"]`, "invalid arguments"},
		{"unknown field", "test.gated", `{"text":"y","extra":1}`, "invalid arguments"},
		{"wrong type", "test.gated", `{"text":5}`, "invalid arguments"},
		{"missing field", "test.gated", `{}`, "invalid arguments"},
		{"duplicate keys", "test.gated", `{"text":"y","text":"z"}`, "duplicate key"},
		{"unchanged", "test.gated", `{"text":"x"}`, "nothing changed"},
		{"unchanged but for white space", "test.gated", "{\n  \"text\" : \"x\"\n}", "nothing changed"},
		{"the gate refuses it", "test.picky", `{"text":"bad"}`, "bad is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, opts{tools: grantTools(t, &callLog{})},
				prompttest.Calls(call("c1", tc.tool, "x")), prompttest.Answer("done"))
			ctx := context.Background()
			id := h.create("go")
			req := h.request()
			h.idle(id)
			before := h.stored(id)
			err := h.svc.Edit(ctx, req.ApprovalID, tc.args, "bob")
			var ee *prompt.EditError
			if !errors.As(err, &ee) || !strings.Contains(ee.Reason, tc.reason) {
				t.Fatalf("edit = %v, want an EditError saying %q", err, tc.reason)
			}
			if after := h.stored(id); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused edit changed the prompt:\n%+v\n%+v", before, after)
			}
			if ref, _ := h.svc.LookupApproval(ctx, req.ApprovalID); ref.Status != prompt.ApprovalPending {
				t.Fatalf("approval after a refused edit: %+v", ref)
			}
			nothingOn(t, h.reqs, "a refused edit asked again")
			h.approve(req.ApprovalID)
			h.endAs(id, prompt.StateCompleted)
			if got := h.rec.got(); len(got) != 1 || !strings.HasSuffix(got[0], ":x") {
				t.Fatalf("ran %v, want the input as asked", got)
			}
		})
	}
}

func TestEditOfADecidedOrUnknownRequest(t *testing.T) {
	h := newHarness(t, opts{tools: grantTools(t, &callLog{})},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	ctx := context.Background()
	id := h.create("go")
	req := h.request()
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if err := h.svc.Edit(ctx, req.ApprovalID, `{"text":"y"}`, "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("edit a decided request: %v, want ErrNotPending", err)
	}
	if err := h.svc.Edit(ctx, "aaaaaaaaaaaaaaaa", `{"text":"y"}`, "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("edit an unknown request: %v, want ErrNotFound", err)
	}
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) {
		t.Fatalf("ran %v", got)
	}
}

// What a person wrote is approved on its own: neither a grant that covers
// it nor a gate that would let it pass runs it unasked.
func TestAnEditedCallIsNeverRunWithoutAsking(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.gated", "y")), prompttest.Answer("one"),
		prompttest.Calls(call("c2", "test.gated", "x")), prompttest.Answer("two"),
		prompttest.Calls(call("c3", "test.picky", "x")), prompttest.Answer("three"),
	)
	ctx := context.Background()
	first := h.create("first")
	_, g := h.approveAlways(prompt.GrantSpec{AllChats: true})
	h.endAs(first, prompt.StateCompleted)

	second := h.create("second")
	req := h.request()
	h.edit(req.ApprovalID, `{"text":"y"}`) // what the grant covers
	again := h.editedRequest(req, `{"text":"y"}`)
	h.approve(again.ApprovalID)
	p := h.endAs(second, prompt.StateCompleted)
	if c := callOf(t, p, "c2"); c.Grant != nil || c.Approval.ID != again.ApprovalID {
		t.Fatalf("the edited call ran through grant %+v (covering %s)", c.Grant, g.Scope)
	}
	if ns := grantedNotices(h.mem); len(ns) != 0 {
		t.Fatalf("granted notices: %+v", ns)
	}

	third := h.create("third")
	req = h.request()
	h.edit(req.ApprovalID, `{"text":"okay"}`) // the gate would let it pass
	again = h.editedRequest(req, `{"text":"okay"}`)
	if !strings.Contains(again.Reason, "edited") {
		t.Fatalf("reason of the edited call's request: %q", again.Reason)
	}
	if err := h.svc.Reject(ctx, again.ApprovalID, "no", "alice"); err != nil {
		t.Fatal(err)
	}
	h.endAs(third, prompt.StateCompleted)
	if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:y", "test.gated:y"}) {
		t.Fatalf("ran %v", got)
	}
}

func TestRejectingAnEditedCallTellsTheModelBoth(t *testing.T) {
	h := newHarness(t, opts{tools: grantTools(t, &callLog{})},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	ctx := context.Background()
	id := h.create("go")
	req := h.request()
	h.edit(req.ApprovalID, `{"text":"y"}`)
	again := h.editedRequest(req, `{"text":"y"}`)
	if err := h.svc.Reject(ctx, again.ApprovalID, "not that either", "alice"); err != nil {
		t.Fatal(err)
	}
	p := h.endAs(id, prompt.StateCompleted)
	if len(h.rec.got()) != 0 {
		t.Fatalf("ran %v", h.rec.got())
	}
	if c := callOf(t, p, "c1"); c.Status != prompt.CallRejected || c.Edit == nil {
		t.Fatalf("call: %+v", c)
	}
	text := lastToolResults(t, h.script)["c1"]
	for _, want := range []string{`{"text":"y"}`, `text: "x" → "y"`, prompt.RejectedPrefix + ": not that either"} {
		if !strings.Contains(text, want) {
			t.Errorf("result %q lacks %q", text, want)
		}
	}
}

// Between the step that takes up an edit and the one that asks again
// (the gate runs in between, and may be slow), the old request still
// reads as it was shown, not with the edited input under its ID.
func TestTheEditedRequestReadsAsShownWhileTheEditedCallIsChecked(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var checksOfY atomic.Int32
	tools := func(r *recorder) []*prompt.Tool {
		tool := r.tool(t, "test.slow", func(_ context.Context, in echoIn) (prompt.Requirement, error) {
			// The first check of "y" is Edit's own; the second, the
			// worker's, is held.
			if in.Text == "y" && checksOfY.Add(1) == 2 {
				entered <- struct{}{}
				<-release
			}
			return prompt.Requirement{Required: true, Reason: "slow"}, nil
		})
		return []*prompt.Tool{tool}
	}
	h := newHarness(t, opts{tools: tools}, prompttest.Calls(call("c1", "test.slow", "x")), prompttest.Answer("done"))
	ctx := context.Background()
	id := h.create("go")
	old := h.request()
	h.idle(id)
	if err := h.svc.Edit(ctx, old.ApprovalID, `{"text":"y"}`, "bob"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, entered)
	was, ref, err := h.svc.Request(ctx, old.ApprovalID)
	close(release)
	if err != nil || ref.Status != prompt.ApprovalEdited || string(was.Input) != `{"text":"x"}` ||
		was.InputHash != old.InputHash || was.Edit != nil {
		t.Fatalf("the edited request while the edited call is checked: %s, %+v, %v", fmtRequest(was), ref, err)
	}
	h.approve(h.editedRequest(old, `{"text":"y"}`).ApprovalID)
	h.endAs(id, prompt.StateCompleted)
}

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"one field", `{"url":"a"}`, `{"url":"b"}`, `url: "a" → "b"`},
		{"added", `{"url":"a"}`, `{"url":"a","depth":2}`, `added depth: 2`},
		{"removed", `{"url":"a","x":true}`, `{"url":"a"}`, `removed x`},
		{"sorted by field", `{"z":1,"a":1,"m":1}`, `{"a":2,"n":1,"z":1}`, `a: 1 → 2; removed m; added n: 1`},
		{"nested, compared compactly", `{"o":{"a": [1, 2]}}`, `{"o":{"a":[1,2]}}`, `no change`},
		{"nested change shown compactly", `{"o":{"a": [1, 2]}}`, `{"o": {"a": [1, 3]}}`, `o: {"a":[1,2]} → {"a":[1,3]}`},
		{"white space only", `{ "url" : "a" }`, `{"url":"a"}`, `no change`},
		{"keys reordered", `{"a":1,"b":2}`, `{"b":2,"a":1}`, `no change`},
		{"type change", `{"n":"1"}`, `{"n":1}`, `n: "1" → 1`},
		{"null", `{"n":null}`, `{"n":0}`, `n: null → 0`},
		{"arrays", `[1, 2]`, `[1,2]`, `no change`},
		{"arrays differ", `[1]`, `[2]`, `changed whole`},
		{"object to array", `{"a":1}`, `[1]`, `changed whole`},
		{"not JSON", `{"a":`, `{"a":1}`, `changed whole`},
		{"same non-JSON", `nope`, `nope`, `no change`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := prompt.Changes(tc.before, tc.after); got != tc.want {
				t.Fatalf("Changes(%s, %s) = %q, want %q", tc.before, tc.after, got, tc.want)
			}
		})
	}
}

// An EditError reads as a refusal.
func TestEditErrorSaysWhy(t *testing.T) {
	err := error(&prompt.EditError{Reason: "nothing changed"})
	if err.Error() != "edit refused: nothing changed" {
		t.Fatal(err)
	}
}
