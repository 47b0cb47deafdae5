package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// voteStores are the store under test and the in-memory one other
// packages test with, which must agree on votes.
func voteStores(t *testing.T, open Opener) map[string]prompt.Store {
	db := open(t, nil)
	return map[string]prompt.Store{"sqlite": db, "memory": prompttest.NewStore()}
}

const voteID = "appr0000000000001"

// newVotePrompt stores a prompt waiting on approval voteID, started by
// author "111".
func newVotePrompt(t *testing.T, s prompt.Store) {
	t.Helper()
	p := GatedPrompt("p1", "c", voteID)
	p.Author = "111"
	if err := s.CreatePrompt(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// testVoteDecidesAtQuorumOnce: below the quorum a vote keeps the request
// pending and records a votes notice; the same person twice is
// ErrAlreadyVoted; the vote that reaches it approves as Decide would,
// naming every voter; a later vote is ErrNotPending.
func testVoteDecidesAtQuorumOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	at := T0.Add(time.Minute)
	for name, s := range voteStores(t, open) {
		t.Run(name, func(t *testing.T) {
			newVotePrompt(t, s)
			ref, err := s.Vote(ctx, voteID, "111", "Alice (111)", at, 2)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Status != prompt.ApprovalPending || !slices.Equal(ref.Votes, []string{"Alice (111)"}) || ref.Author != "111" {
				t.Fatalf("after one vote of two: %+v", ref)
			}
			if _, err := s.Vote(ctx, voteID, "111", "Alice renamed (111)", at, 2); !errors.Is(err, prompt.ErrAlreadyVoted) {
				t.Fatalf("second vote by the same person: %v, want ErrAlreadyVoted", err)
			}
			p, err := s.LoadPrompt(ctx, "p1")
			if err != nil {
				t.Fatal(err)
			}
			if p.State != prompt.StateWaiting || p.Rev != 1 || p.Author != "111" {
				t.Fatalf("a vote below the quorum moved the prompt: %s rev %d author %q", p.State, p.Rev, p.Author)
			}
			ref, err = s.Vote(ctx, voteID, "222", "Bob (222)", at, 2)
			if err != nil {
				t.Fatal(err)
			}
			if ref.Status != prompt.ApprovalApproved || ref.DecidedBy != "Alice (111), Bob (222)" || !ref.DecidedAt.Equal(at) ||
				!slices.Equal(ref.Votes, []string{"Alice (111)", "Bob (222)"}) {
				t.Fatalf("at the quorum: %+v", ref)
			}
			if p, _ = s.LoadPrompt(ctx, "p1"); p.State != prompt.StateRunning || p.Rev != 2 {
				t.Fatalf("decided by votes: prompt %s rev %d, want running at the next revision", p.State, p.Rev)
			}
			// The audit has one entry: the decision, by everyone who approved.
			entries, err := s.Audit(ctx, prompt.AuditQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].Outcome != prompt.OutcomeApproved || entries[0].Source != "Alice (111), Bob (222)" {
				t.Fatalf("audit after a quorum: %+v", entries)
			}
			if _, err := s.Vote(ctx, voteID, "333", "Carol (333)", at, 2); !errors.Is(err, prompt.ErrNotPending) {
				t.Fatalf("vote after the decision: %v, want ErrNotPending", err)
			}
			if _, err := s.Decide(ctx, voteID, prompt.Decision{Status: prompt.ApprovalRejected, By: "x", At: at}); !errors.Is(err, prompt.ErrNotPending) {
				t.Fatalf("reject after the decision: %v, want ErrNotPending", err)
			}
			if _, err := s.Vote(ctx, "nosuchapproval00", "111", "Alice (111)", at, 2); !errors.Is(err, prompt.ErrNotFound) {
				t.Fatalf("vote on no approval: %v, want ErrNotFound", err)
			}
			var kinds []prompt.NoticeKind
			for _, e := range outboxOf(t, s) {
				kinds = append(kinds, e.Kind)
			}
			if want := []prompt.NoticeKind{prompt.NoticeVotes, prompt.NoticeDecided}; !slices.Equal(kinds, want) {
				t.Fatalf("outbox %v, want %v", kinds, want)
			}
		})
	}
}

// testVoteAfterRejectionIsNotPending: one rejection rejects, whatever
// votes came before it.
func testVoteAfterRejectionIsNotPending(t *testing.T, open Opener) {
	ctx := context.Background()
	for name, s := range voteStores(t, open) {
		t.Run(name, func(t *testing.T) {
			newVotePrompt(t, s)
			if _, err := s.Vote(ctx, voteID, "111", "Alice (111)", T0, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, voteID, prompt.Decision{Status: prompt.ApprovalRejected, By: "Bob (222)", At: T0}); err != nil {
				t.Fatal(err)
			}
			ref, err := s.Vote(ctx, voteID, "333", "Carol (333)", T0, 2)
			if !errors.Is(err, prompt.ErrNotPending) || ref.Status != prompt.ApprovalRejected {
				t.Fatalf("vote after a rejection: %v, %+v", err, ref)
			}
		})
	}
}

// testConcurrentVotesDecideOnce: two people voting at the same moment
// on a quorum of two both count and the approval is decided by exactly
// one of them, once; with a quorum of one the loser is ErrNotPending.
func testConcurrentVotesDecideOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	for name, s := range voteStores(t, open) {
		t.Run(name, func(t *testing.T) {
			for round, quorum := range []int{2, 1} {
				id := []string{"appr0000000000001", "appr0000000000002"}[round]
				p := GatedPrompt([]string{"p1", "p2"}[round], []string{"c1", "c2"}[round], id)
				if err := s.CreatePrompt(ctx, p); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				refs := make([]prompt.ApprovalRef, 2)
				errs := make([]error, 2)
				for i, voter := range []string{"111", "222"} {
					wg.Go(func() { refs[i], errs[i] = s.Vote(ctx, id, voter, "user "+voter, T0, quorum) })
				}
				wg.Wait()
				decided, refused := 0, 0
				for i := range errs {
					switch {
					case errs[i] == nil && refs[i].Status == prompt.ApprovalApproved:
						decided++
					case errors.Is(errs[i], prompt.ErrNotPending):
						refused++
					case errs[i] != nil:
						t.Fatalf("quorum %d: vote %d: %v", quorum, i, errs[i])
					}
				}
				if decided != 1 || refused != 2-quorum {
					t.Fatalf("quorum %d: %d votes decided, %d refused; want 1 and %d", quorum, decided, refused, 2-quorum)
				}
				st, _ := s.LoadPrompt(ctx, p.ID)
				if st.Rev != 2 {
					t.Fatalf("quorum %d: prompt at rev %d, want 2: resumed once", quorum, st.Rev)
				}
			}
		})
	}
}

// outboxOf lists every notice a store recorded, oldest first.
func outboxOf(t *testing.T, s prompt.Store) []prompt.OutboxEntry {
	t.Helper()
	switch s := s.(type) {
	case *prompttest.Store:
		return s.Outbox()
	case Backend:
		es, err := s.DueNotices(context.Background(), T0.Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		// DueNotices shows each conversation's oldest; mark and read on.
		var all []prompt.OutboxEntry
		for len(es) > 0 {
			all = append(all, es...)
			for _, e := range es {
				if err := s.MarkNotice(context.Background(), e.Seq, ""); err != nil {
					t.Fatal(err)
				}
			}
			if es, err = s.DueNotices(context.Background(), T0.Add(time.Hour), 100); err != nil {
				t.Fatal(err)
			}
		}
		return all
	}
	t.Fatalf("no outbox reader for %T", s)
	return nil
}
