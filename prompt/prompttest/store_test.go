package prompttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// The core's tests run on this store, so it must refuse what the SQLite
// store refuses; otherwise a core bug it forgives would pass them.

func waiting(id, conv, aid string) *prompt.Prompt {
	return &prompt.Prompt{ID: id, ConversationID: conv, State: prompt.StateWaiting, Rev: 1, Turns: 1,
		Output: []prompt.Item{{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
			ID: "c1", Name: "t", Arguments: "{}", Status: prompt.CallPending,
			Approval: &prompt.Approval{ID: aid, Status: prompt.ApprovalPending},
		}}}}
}

func TestSaveIsACompareAndSetOnTheRevision(t *testing.T) {
	ctx := context.Background()
	m := prompttest.NewStore()
	p := &prompt.Prompt{ID: "p1", ConversationID: "c", State: prompt.StateRunning, Rev: 1}
	if err := m.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{1, 3} {
		q := p.Clone()
		q.Rev, q.Input = rev, "overwritten"
		if err := m.SavePrompt(ctx, q, nil); !errors.Is(err, prompt.ErrConflict) {
			t.Errorf("rev %d over rev 1 = %v, want ErrConflict", rev, err)
		}
	}
	if got, _ := m.Prompt("p1"); got.Input != "" || got.Rev != 1 {
		t.Fatalf("stored %+v", got)
	}
	q := p.Clone()
	q.Rev, q.Input = 2, "next"
	if err := m.SavePrompt(ctx, q, nil); err != nil {
		t.Fatal(err)
	}
	q.Input = "kept?" // the store keeps no reference to what it was given
	if got, _ := m.Prompt("p1"); got.Input != "next" || got.Rev != 2 {
		t.Fatalf("stored %+v", got)
	}
}

func TestOneUnfinishedPromptPerConversation(t *testing.T) {
	ctx := context.Background()
	m := prompttest.NewStore()
	if err := m.CreatePrompt(ctx, waiting("p1", "c", "aaaaaaaaaaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	if err := m.CreatePrompt(ctx, &prompt.Prompt{ID: "p2", ConversationID: "c", State: prompt.StateRunning, Rev: 1}); !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("second prompt = %v, want ErrBusy", err)
	}
}

func TestDecideIsACompareAndSetThatWakesThePrompt(t *testing.T) {
	ctx := context.Background()
	m := prompttest.NewStore()
	if err := m.CreatePrompt(ctx, waiting("p1", "c", "aaaaaaaaaaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ref, err := m.Decide(ctx, "aaaaaaaaaaaaaaaa", prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: at})
	if err != nil || ref.PromptID != "p1" || ref.CallID != "c1" || ref.Status != prompt.ApprovalApproved || ref.DecidedBy != "alice" {
		t.Fatalf("decide = %+v, %v", ref, err)
	}
	p, _ := m.Prompt("p1")
	if p.State != prompt.StateRunning || p.Rev != 2 || p.Output[0].Call.Approval.Status != prompt.ApprovalApproved {
		t.Fatalf("after decide %s rev %d, approval %+v", p.State, p.Rev, p.Output[0].Call.Approval)
	}
	if _, err := m.Decide(ctx, "aaaaaaaaaaaaaaaa", prompt.Decision{Status: prompt.ApprovalRejected, By: "bob", At: at}); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("second decide = %v, want ErrNotPending", err)
	}
	if _, err := m.Decide(ctx, "bbbbbbbbbbbbbbbb", prompt.Decision{Status: prompt.ApprovalApproved}); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown = %v, want ErrNotFound", err)
	}
	// A save never undoes a decision.
	p.Output[0].Call.Approval.Status = prompt.ApprovalPending
	p.Rev++
	if err := m.SavePrompt(ctx, p, []int{0}); err != nil {
		t.Fatal(err)
	}
	if ref, _ := m.FindApproval(ctx, "aaaaaaaaaaaaaaaa"); ref.Status != prompt.ApprovalApproved {
		t.Fatalf("approval after a save = %+v", ref)
	}
}

func TestCancelRejectsThePendingApproval(t *testing.T) {
	ctx := context.Background()
	m := prompttest.NewStore()
	if err := m.CreatePrompt(ctx, waiting("p1", "c", "aaaaaaaaaaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	if err := m.CancelPrompt(ctx, "p1", "alice", time.Now()); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Prompt("p1")
	a := p.Output[0].Call.Approval
	if p.State != prompt.StateRunning || p.CancelledBy != "alice" || p.Rev != 2 || a.Status != prompt.ApprovalRejected || a.Note != "cancelled" {
		t.Fatalf("after cancel %s %q rev %d, approval %+v", p.State, p.CancelledBy, p.Rev, a)
	}
	p.State, p.Rev = prompt.StateFailed, 3
	if err := m.SavePrompt(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.CancelPrompt(ctx, "p1", "alice", time.Now()); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("cancel ended = %v, want ErrNotPending", err)
	}
	if err := m.CancelPrompt(ctx, "nope", "alice", time.Now()); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("cancel unknown = %v, want ErrNotFound", err)
	}
}
