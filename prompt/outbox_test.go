package prompt_test

import (
	"context"
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
