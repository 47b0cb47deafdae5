package prompt

import (
	"context"
	"fmt"
)

// CreateOption sets something of a prompt Create or CreateOnce saves.
type CreateOption func(*Prompt)

// WithAuthor records who started the prompt (a stable ID, such as a
// Telegram user ID), so that a front end can keep that person from
// approving its requests alone.
func WithAuthor(id string) CreateOption {
	return func(p *Prompt) { p.Author = id }
}

// Tally is where the approvals of a request stand.
type Tally struct {
	// By names who approved so far, in order.
	By []string
	// Needed is the quorum: how many different people must approve.
	Needed int
}

// Decided reports whether the approvals reached the quorum, so the
// request was approved.
func (t Tally) Decided() bool { return len(t.By) >= t.Needed }

// Vote records that the person voterID (shown as by, "Alice (111)")
// approves the call of approval approvalID. With a quorum of one that is
// Approve. Under a larger quorum each person counts once, keyed by
// voterID rather than by the name, which can change; when the approvals
// reach the quorum the request is approved and its prompt queued, in the
// same transaction as the last vote, so two votes at once decide it once.
// Below it every copy of the request is re-rendered (through the outbox)
// to show who approved so far. One rejection (Reject, Stop) still rejects.
//
// Who may vote is not checked here: the core knows no list of
// approvers, the front end does.
//
// Returns ErrAlreadyVoted if that person approved it already,
// ErrNotPending if it was decided already, ErrNotFound if there is no such
// approval.
func (s *Service) Vote(ctx context.Context, approvalID, voterID, by string) (Tally, error) {
	if voterID == "" {
		return Tally{}, fmt.Errorf("vote on approval %s: no voter ID", approvalID)
	}
	if s.quorum <= 1 {
		if err := s.decide(ctx, approvalID, Decision{Status: ApprovalApproved, By: by, At: s.now()}); err != nil {
			return Tally{}, err
		}
		return Tally{By: []string{by}, Needed: 1}, nil
	}
	ref, err := s.store.Vote(ctx, approvalID, voterID, by, s.now(), s.quorum)
	if err != nil {
		return Tally{}, fmt.Errorf("vote on approval %s: %w", approvalID, err)
	}
	t := Tally{By: ref.Votes, Needed: s.quorum}
	s.log.Info("approval vote", "prompt", ref.PromptID, "approval", approvalID, "by", by,
		"votes", len(t.By), "quorum", s.quorum, "status", ref.Status)
	s.onOutbox.emit(ctx, struct{}{})
	if ref.Status == ApprovalApproved {
		s.kick(ref.PromptID)
	}
	return t, nil
}
