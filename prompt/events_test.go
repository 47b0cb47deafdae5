package prompt_test

import (
	"context"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestActivityTellsWhenAPassRuns(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	id := h.create("go")
	want := func(working bool) {
		t.Helper()
		a := waitFor(t, h.activity)
		if a != (prompt.Activity{PromptID: id, ConversationID: "conv-1", Working: working}) {
			t.Fatalf("activity = %+v, want working %v", a, working)
		}
	}
	want(true)
	aid := h.request().ApprovalID
	want(false) // paused
	h.approve(aid)
	want(true)
	h.endAs(id, prompt.StateCompleted)
	want(false) // ended
	nothingOn(t, h.activity, "activity after the end")
}

func TestApprovalRequestedAfterThePendingStateIsSaved(t *testing.T) {
	mem := prompttest.NewStore()
	seen := make(chan *prompt.Prompt, 1)
	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	h.svc.OnApprovalRequested(func(ctx context.Context, req prompt.ApprovalRequest) {
		p, err := mem.Prompt(req.PromptID)
		if err != nil {
			t.Error(err)
		}
		ref, err := h.svc.LookupApproval(ctx, req.ApprovalID)
		if err != nil || ref.Status != prompt.ApprovalPending || ref.CallID != req.ToolCallID {
			t.Errorf("approval as the listener finds it: %+v, %v", ref, err)
		}
		seen <- p
	})
	id := h.create("go")
	p := waitFor(t, seen)
	if p.ID != id || p.State != prompt.StateWaiting || callOf(t, p, "c1").Status != prompt.CallPending ||
		callOf(t, p, "c1").Approval.Status != prompt.ApprovalPending {
		t.Fatalf("listener read %s / %+v", p.State, callOf(t, p, "c1"))
	}
}

func TestEndedAfterTheFinalSave(t *testing.T) {
	mem := prompttest.NewStore()
	seen := make(chan *prompt.Prompt, 1)
	h := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
	h.svc.OnEnded(func(ctx context.Context, a prompt.Answer) {
		if ctx.Err() != nil {
			t.Errorf("ended listener got a dead context: %v", ctx.Err())
		}
		p, err := mem.Prompt(a.PromptID)
		if err != nil {
			t.Error(err)
		}
		seen <- p
	})
	id := h.create("go")
	if p := waitFor(t, seen); p.ID != id || p.State != prompt.StateCompleted || p.FinalText() != "done" {
		t.Fatalf("listener read %+v", p)
	}
	// The conversation is free when the listener hears of the end.
	if _, err := h.svc.Create(context.Background(), "conv-1", "next"); err != nil {
		t.Fatalf("create after the end: %v", err)
	}
}

func TestAListenerMayDecideAndCancelOnTheWorkersGoroutine(t *testing.T) {
	// An auto-approving policy or a /cancel typed very fast both call back
	// into the service from a listener; neither may deadlock.
	h := newHarness(t, opts{workers: 1},
		prompttest.Calls(call("a", "test.gated", "1")),
		prompttest.Calls(call("b", "test.gated", "2")),
		prompttest.Answer("never"))
	n := 0
	h.svc.OnApprovalRequested(func(ctx context.Context, req prompt.ApprovalRequest) {
		n++ // listeners of one prompt run on its worker, one at a time
		if n == 1 {
			if err := h.svc.Approve(ctx, req.ApprovalID, "policy"); err != nil {
				t.Errorf("approve from a listener: %v", err)
			}
			return
		}
		if err := h.svc.Cancel(ctx, req.PromptID, "alice"); err != nil {
			t.Errorf("cancel from a listener: %v", err)
		}
	})
	id := h.create("go")
	p := h.endAs(id, prompt.StateFailed)
	if p.Error != "Cancelled by alice." {
		t.Fatalf("error %q", p.Error)
	}
	if got := h.rec.got(); len(got) != 1 || got[0] != "test.gated:1" {
		t.Fatalf("ran %v", got)
	}
	if c := callOf(t, p, "b"); c.Status != prompt.CallRejected || c.Approval.Note != "cancelled" {
		t.Fatalf("call b = %+v %+v", c, c.Approval)
	}
}
