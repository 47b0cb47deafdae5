package prompt_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// kinds lists the outbox of a prompt as "kind approval" strings, in order.
func kinds(mem *prompttest.Store, promptID string) []string {
	var out []string
	for _, e := range mem.Outbox() {
		if e.PromptID == promptID {
			out = append(out, string(e.Kind)+" "+e.ApprovalID)
		}
	}
	return out
}

// Every change that obliges Tollgate to tell the chat records a notice with
// it, in the order the changes happened.
func TestChangesRecordTheirNoticesInOrder(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	outboxWoken := make(chan struct{}, 10)
	h.svc.OnOutbox(func() { outboxWoken <- struct{}{} })
	id := h.create("go")
	req := h.request()
	waitFor(t, outboxWoken)
	if got, want := kinds(h.mem, id), []string{"request " + req.ApprovalID}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the pause: %v, want %v", got, want)
	}
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	want := []string{"request " + req.ApprovalID, "decided " + req.ApprovalID, "answer "}
	if got := kinds(h.mem, id); !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	for _, e := range h.mem.Outbox() {
		if e.Resend || e.ConversationID != "conv-1" {
			t.Fatalf("entry %+v", e)
		}
	}
}

func TestCancelWhileWaitingRecordsTheDecisionAndTheAnswer(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	req := h.request()
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	h.endAs(id, prompt.StateFailed)
	want := []string{"request " + req.ApprovalID, "decided " + req.ApprovalID, "answer "}
	if got := kinds(h.mem, id); !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
}

// A failed model turn tells the user why, through the outbox like an answer.
func TestAFailureIsAnAnswerInTheOutbox(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Step{Err: context.DeadlineExceeded})
	id := h.create("go")
	h.endAs(id, prompt.StateFailed)
	if got := kinds(h.mem, id); !reflect.DeepEqual(got, []string{"answer "}) {
		t.Fatalf("outbox %v", got)
	}
}

// A sender rebuilds what it tells from the store: the request as asked,
// after its decision too, and the answer once the prompt ended.
func TestRequestAndAnswerAreReadBackFromTheStore(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x"), call("c2", "test.free", "y")), prompttest.Answer("done"))
	id := h.create("go")
	asked := h.request()
	ctx := context.Background()
	if _, err := h.svc.Answer(ctx, id); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("answer of a waiting prompt: %v", err)
	}
	got, ref, err := h.svc.Request(ctx, asked.ApprovalID)
	if err != nil || !reflect.DeepEqual(got, asked) || ref.Status != prompt.ApprovalPending {
		t.Fatalf("request = %+v (%s), %v; want %+v, pending", got, ref.Status, err, asked)
	}
	h.approve(asked.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if got, ref, err := h.svc.Request(ctx, asked.ApprovalID); err != nil || got.ToolName != "test.gated" ||
		string(got.Input) != string(asked.Input) || ref.Status != prompt.ApprovalApproved || ref.DecidedBy == "" {
		t.Fatalf("request after the decision = %+v (%+v), %v", got, ref, err)
	}
	a, err := h.svc.Answer(ctx, id)
	if err != nil || a.State != prompt.StateCompleted || a.Text != "done" || a.ConversationID != "conv-1" {
		t.Fatalf("answer = %+v, %v", a, err)
	}
	if _, _, err := h.svc.Request(ctx, "nope"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown request: %v", err)
	}
	if _, err := h.svc.Answer(ctx, "nope"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown answer: %v", err)
	}
}
