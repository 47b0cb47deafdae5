package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
)

const auditApprovalID = "appr0000000000001"

// auditedPrompt is gatedPrompt with the hash its request showed, created.
func auditedPrompt(t *testing.T, db Backend, id, conv, approvalID string) *prompt.Prompt {
	t.Helper()
	p := GatedPrompt(id, conv, approvalID)
	c := p.Output[1].Call
	c.Approval.InputHash = prompt.InputHash(c.Arguments)
	if err := db.CreatePrompt(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// auditAll reads every entry, newest first.
func auditAll(t *testing.T, db interface {
	Audit(context.Context, prompt.AuditQuery) ([]prompt.AuditEntry, error)
}) []prompt.AuditEntry {
	t.Helper()
	es, err := db.Audit(context.Background(), prompt.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// ruled saves p's queued call c2 as decided by rl, at the next revision.
func ruled(rl prompt.Ruling) func(*testing.T, Backend, *prompt.Prompt) {
	return func(t *testing.T, db Backend, p *prompt.Prompt) {
		q := next(p)
		c := q.Output[2].Call
		c.Status, c.Ruling = prompt.CallExecuting, &rl
		if !rl.Allowed {
			c.Status, c.Result = prompt.CallDone, &prompt.Result{Type: prompt.ResultError, Error: "Denied by policy"}
		}
		if err := db.SavePrompt(context.Background(), q, []int{2}); err != nil {
			t.Fatal(err)
		}
	}
}

func decided(d prompt.Decision) func(*testing.T, Backend, *prompt.Prompt) {
	return func(t *testing.T, db Backend, _ *prompt.Prompt) {
		if _, err := db.Decide(context.Background(), auditApprovalID, d); err != nil {
			t.Fatal(err)
		}
	}
}

// testEveryDecisionIsAuditedOnceWithItsSource: each place a decision is
// written records exactly one entry, naming what decided.
func testEveryDecisionIsAuditedOnceWithItsSource(t *testing.T, open Opener) {
	at := T0.Add(time.Minute)
	grant := prompt.Grant{ID: "gabc", Tool: "shell.run", Scope: "input:x", Label: "exactly this input",
		ConversationID: "c", By: "Alice (111)", CreatedAt: at, ApprovalID: auditApprovalID}
	for _, tc := range []struct {
		name string
		do   func(*testing.T, Backend, *prompt.Prompt)
		want prompt.AuditEntry // the test fills in what the call gives
	}{
		{"person approves", decided(prompt.Decision{Status: prompt.ApprovalApproved, By: "Alice (111)", At: at}),
			prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeApproved, SourceKind: prompt.SourcePerson, Source: "Alice (111)"}},
		{"person rejects with a note", decided(prompt.Decision{Status: prompt.ApprovalRejected, By: "Alice (111)", At: at, Note: "too risky"}),
			prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeRejected, SourceKind: prompt.SourcePerson, Source: "Alice (111)", Feedback: "too risky"}},
		{"person edits", decided(prompt.Decision{Status: prompt.ApprovalEdited, By: "Alice (111)", At: at, Note: "edited", Input: `{"cmd":"ls"}`}),
			prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeEdited, SourceKind: prompt.SourcePerson, Source: "Alice (111)", Feedback: `{"cmd":"ls"}`}},
		{"person approves always", decided(prompt.Decision{Status: prompt.ApprovalApproved, By: "Alice (111)", At: at, Note: prompt.GrantNote(grant), Grant: &grant}),
			prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeApproved, SourceKind: prompt.SourcePerson, Source: "Alice (111)",
				Feedback: "and from now on: exactly this input, in this chat, until revoked"}},
		{"timeout", decided(prompt.Decision{Status: prompt.ApprovalExpired, At: at, Note: "no decision within 30m"}),
			prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeExpired, SourceKind: prompt.SourceTimeout, Source: "no decision within 30m"}},
		{"cancel", func(t *testing.T, db Backend, _ *prompt.Prompt) {
			if err := db.CancelPrompt(context.Background(), "p1", "Alice (111)", at); err != nil {
				t.Fatal(err)
			}
		}, prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeCancelled, SourceKind: prompt.SourcePerson, Source: "Alice (111)"}},
		{"prompt ended undecided", func(t *testing.T, db Backend, p *prompt.Prompt) {
			q := next(p)
			q.State, q.UpdatedAt = prompt.StateFailed, at
			q.Output[1].Call.Approval.Status, q.Output[1].Call.Approval.Note = prompt.ApprovalExpired, "not run: stopped"
			if err := db.SavePrompt(context.Background(), q, []int{1}); err != nil {
				t.Fatal(err)
			}
		}, prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeExpired, SourceKind: prompt.SourceSystem, Source: "prompt ended", Feedback: "not run: stopped"}},
		{"rule allows", ruled(prompt.Ruling{Allowed: true, Kind: "rule", By: "rules.yaml:12", Why: "example.com is fine", At: at}),
			prompt.AuditEntry{CallID: "c2", Outcome: prompt.OutcomeAllowed, SourceKind: prompt.SourceRule, Source: "rules.yaml:12", Feedback: "example.com is fine"}},
		{"rule denies", ruled(prompt.Ruling{Kind: "rule", By: "rules.yaml:3", Why: "no fetching", At: at}),
			prompt.AuditEntry{CallID: "c2", Outcome: prompt.OutcomeDenied, SourceKind: prompt.SourceRule, Source: "rules.yaml:3", Feedback: "no fetching"}},
		{"grant allows", ruled(prompt.Ruling{Allowed: true, Kind: "grant", By: "grant gabc of Alice (111)", Why: "fetches from example.com", At: at}),
			prompt.AuditEntry{CallID: "c2", Outcome: prompt.OutcomeAllowed, SourceKind: prompt.SourceGrant, Source: "grant gabc of Alice (111)", Feedback: "fetches from example.com"}},
		{"mode denies", ruled(prompt.Ruling{Kind: "mode", By: "APPROVAL_MODE=auto-deny", Why: "not listed", At: at}),
			prompt.AuditEntry{CallID: "c2", Outcome: prompt.OutcomeDenied, SourceKind: prompt.SourceMode, Source: "APPROVAL_MODE=auto-deny", Feedback: "not listed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t, nil)
			p := auditedPrompt(t, db, "p1", "c", auditApprovalID)
			tc.do(t, db, p)
			es := auditAll(t, db)
			if len(es) != 1 {
				t.Fatalf("%d entries, want 1: %+v", len(es), es)
			}
			want := tc.want
			want.Seq, want.At, want.ConversationID, want.PromptID = 1, at.UTC().Truncate(time.Millisecond), "c", "p1"
			if want.CallID == "c1" {
				want.ApprovalID, want.Tool, want.InputHash = auditApprovalID, "shell.run", prompt.InputHash(p.Output[1].Call.Arguments)
			} else {
				want.Tool, want.InputHash = "web.fetch", prompt.InputHash(p.Output[2].Call.Arguments)
			}
			if es[0] != want {
				t.Fatalf("entry\n got %+v\nwant %+v", es[0], want)
			}
		})
	}
}

// testALostDecisionIsNotAudited: the press that loses the compare-and-set
// records nothing, nor does the end of a prompt whose request a deadline
// expired already.
func testALostDecisionIsNotAudited(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := auditedPrompt(t, db, "p1", "c", auditApprovalID)
	if _, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalExpired, At: T0, Note: "no decision within 30m"}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalApproved, By: "Bob (2)", At: T0})
	if !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("second decision: %v", err)
	}
	q, err := db.LoadPrompt(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	q = next(q)
	q.State = prompt.StateCompleted
	q.Output[1].Call.Status = prompt.CallDone
	if err := db.SavePrompt(ctx, q, []int{1}); err != nil {
		t.Fatal(err)
	}
	es := auditAll(t, db)
	if len(es) != 1 || es[0].SourceKind != prompt.SourceTimeout {
		t.Fatalf("entries %+v; want the timeout alone", es)
	}
}

// testSavingARuledCallAgainAuditsItOnce: the call's ruling stays in its
// item through executing and done; each save of it is not a new decision.
func testSavingARuledCallAgainAuditsItOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := auditedPrompt(t, db, "p1", "c", auditApprovalID)
	q := next(p)
	q.Output[2].Call.Status = prompt.CallExecuting
	q.Output[2].Call.Ruling = &prompt.Ruling{Allowed: true, Kind: "rule", By: "rules.yaml:1", At: T0}
	if err := db.SavePrompt(ctx, q, []int{2}); err != nil {
		t.Fatal(err)
	}
	q = next(q)
	q.Output[2].Call.Status, q.Output[2].Call.Result = prompt.CallDone, &prompt.Result{Type: prompt.ResultSuccess, Output: "ok"}
	if err := db.SavePrompt(ctx, q, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if es := auditAll(t, db); len(es) != 1 {
		t.Fatalf("%d entries after saving the ruled call twice, want 1: %+v", len(es), es)
	}
}

// testAuditFiltersByConversationSinceAndLimitNewestFirst.
func testAuditFiltersByConversationSinceAndLimitNewestFirst(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	// Three prompts, each decided a minute after the last: a, b, a.
	for i, conv := range []string{"a", "b", "a"} {
		id := string(rune('1' + i))
		p := auditedPrompt(t, db, "p"+id, conv, "appr000000000000"+id)
		if _, err := db.Decide(ctx, p.Output[1].Call.Approval.ID, prompt.Decision{Status: prompt.ApprovalApproved,
			By: "Alice (111)", At: T0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		done := next(p)
		done.Rev, done.State = 3, prompt.StateCompleted
		done.Output[1].Call.Status = prompt.CallDone
		if err := db.SavePrompt(ctx, done, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		q    prompt.AuditQuery
		want []string // prompt IDs
	}{
		{"all", prompt.AuditQuery{}, []string{"p3", "p2", "p1"}},
		{"one chat", prompt.AuditQuery{ConversationID: "a"}, []string{"p3", "p1"}},
		{"limit", prompt.AuditQuery{Limit: 2}, []string{"p3", "p2"}},
		{"since", prompt.AuditQuery{Since: T0.Add(time.Minute)}, []string{"p3", "p2"}},
		{"since in a chat", prompt.AuditQuery{ConversationID: "a", Since: T0.Add(30 * time.Second)}, []string{"p3"}},
		{"unknown chat", prompt.AuditQuery{ConversationID: "z"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := db.Audit(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.PromptID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("prompts %v, want %v", got, tc.want)
			}
		})
	}
}
