package prompt

import (
	"context"
	"fmt"
	"time"
)

// Outcome is what a decision on a call was, as the audit records it.
type Outcome string

// The outcomes. A person's request ends approved, rejected, edited,
// cancelled (/cancel) or expired; a call decided without asking is allowed
// or denied.
const (
	OutcomeApproved  Outcome = "approved"
	OutcomeRejected  Outcome = "rejected"
	OutcomeExpired   Outcome = "expired"
	OutcomeEdited    Outcome = "edited"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeAllowed   Outcome = "allowed"
	OutcomeDenied    Outcome = "denied"
)

// SourceKind says what made a decision.
type SourceKind string

// The kinds of source. Rule, grant and mode are the Kind of a Ruling.
const (
	SourcePerson  SourceKind = "person"  // Source is who: "Alice (111)"
	SourceRule    SourceKind = "rule"    // Source is the rule's place: "rules.yaml:12"
	SourceGrant   SourceKind = "grant"   // Source is "grant g… of Alice (111)"
	SourceMode    SourceKind = "mode"    // Source is "APPROVAL_MODE=auto-deny"
	SourceTimeout SourceKind = "timeout" // Source is the note: "no decision within 30m"
	SourceSystem  SourceKind = "system"  // the prompt ended with the request undecided
)

// AuditEntry is one decision on a call, as recorded in the same
// transaction as the decision: the record an operator reads afterwards.
type AuditEntry struct {
	// Seq orders entries as they were recorded.
	Seq            int64
	At             time.Time
	ConversationID string
	PromptID       string
	CallID         string
	// ApprovalID is the request decided; empty for a call decided without
	// one (a rule, a grant, the mode).
	ApprovalID string
	Tool       string
	// InputHash is InputHash of the input decided on; empty for entries
	// carried over from before the audit for calls decided without a
	// request.
	InputHash  string
	Outcome    Outcome
	SourceKind SourceKind
	Source     string
	// Feedback is what came with the decision: a reject reason, the grant
	// chosen with an approval, the edited input, a rule's why, the note of
	// a request that ended undecided.
	Feedback string
}

// AuditQuery selects audit entries.
type AuditQuery struct {
	// ConversationID limits them to one chat; empty: every chat.
	ConversationID string
	// Since drops entries recorded before it; zero: no bound.
	Since time.Time
	// Limit is how many of the newest to return; zero or less: all.
	Limit int
}

// Audit returns the decisions q selects, newest first.
func (s *Service) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	es, err := s.store.Audit(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("audit of %q: %w", q.ConversationID, err)
	}
	return es, nil
}

// RulingOutcome is the outcome the audit records for a ruling.
func RulingOutcome(rl *Ruling) Outcome {
	if rl.Allowed {
		return OutcomeAllowed
	}
	return OutcomeDenied
}

// DecisionAudit says how the audit records decision d on an approval:
// its outcome, what made it, and its feedback. Stores call it so that
// every store records the same.
func DecisionAudit(d Decision) (Outcome, SourceKind, string, string) {
	kind, source := SourcePerson, d.By
	if d.By == "" {
		// Nobody decided: only a deadline decides without a person.
		kind, source = SourceTimeout, d.Note
	}
	feedback := d.Note
	switch {
	case d.Status == ApprovalEdited:
		feedback = d.Input
	case kind == SourceTimeout:
		feedback = ""
	}
	if d.Status == ApprovalRejected && d.Note == "cancelled" {
		// ⛔ Stop: a rejection that ends the prompt, as /cancel does.
		return OutcomeCancelled, kind, source, ""
	}
	return Outcome(d.Status), kind, source, feedback
}
