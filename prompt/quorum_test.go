package prompt_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// TestQuorumRunsTheCallOnceEnoughPeopleApproved: under a quorum of two
// the request says so and offers no "always"; one vote runs nothing, the
// same person again is ErrAlreadyVoted, and a second person's vote
// (Approve counts as one, keyed by its by) runs the call once.
func TestQuorumRunsTheCallOnceEnoughPeopleApproved(t *testing.T) {
	h := newHarness(t, opts{quorum: 2}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	ctx := context.Background()
	c, err := h.svc.Create(ctx, "conv-1", "go", prompt.WithAuthor("111"))
	if err != nil {
		t.Fatal(err)
	}
	aid := h.request().ApprovalID
	req, _, err := h.svc.Request(ctx, aid)
	if err != nil {
		t.Fatal(err)
	}
	if req.Quorum != 2 || req.Scope != nil || req.Author != "111" || len(req.Votes) != 0 {
		t.Fatalf("request under a quorum: quorum %d, scope %v, author %q, votes %v", req.Quorum, req.Scope, req.Author, req.Votes)
	}
	if _, err := h.svc.ApproveAlways(ctx, aid, "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNoGrant) {
		t.Fatalf("always under a quorum = %v, want ErrNoGrant", err)
	}
	tally, err := h.svc.Vote(ctx, aid, "111", "Alice (111)")
	if err != nil || tally.Decided() || tally.Needed != 2 || !slices.Equal(tally.By, []string{"Alice (111)"}) {
		t.Fatalf("first vote = %+v, %v", tally, err)
	}
	if _, err := h.svc.Vote(ctx, aid, "111", "Alice (111)"); !errors.Is(err, prompt.ErrAlreadyVoted) {
		t.Fatalf("second vote by the same person = %v, want ErrAlreadyVoted", err)
	}
	if st, err := h.svc.Active(ctx, "conv-1"); err != nil || st.Pending == nil || !slices.Equal(st.Pending.Votes, []string{"Alice (111)"}) || st.Author != "111" {
		t.Fatalf("active after one vote = %+v, %v", st, err)
	}
	if got := h.rec.got(); len(got) != 0 {
		t.Fatalf("one vote of two ran %v", got)
	}
	if err := h.svc.Approve(ctx, aid, "Bob (222)"); err != nil {
		t.Fatal(err)
	}
	p := h.endAs(c.PromptID, prompt.StateCompleted)
	if got := h.rec.got(); len(got) != 1 {
		t.Fatalf("tool ran %v, want once", got)
	}
	if a := callOf(t, p, "c1").Approval; a.DecidedBy != "Alice (111), Bob (222)" {
		t.Fatalf("decided by %q, want both voters", a.DecidedBy)
	}
}

func TestNegativeQuorumIsRefused(t *testing.T) {
	_, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(), Quorum: -1})
	if err == nil {
		t.Fatal("quorum -1 accepted")
	}
}
