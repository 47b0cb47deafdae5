package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

const auditApprovalID = "appr0000000000001"

// auditedPrompt is gatedPrompt with the hash its request showed, created.
func auditedPrompt(t *testing.T, db *store.DB, id, conv, approvalID string) *prompt.Prompt {
	t.Helper()
	p := gatedPrompt(id, conv, approvalID)
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
func ruled(rl prompt.Ruling) func(*testing.T, *store.DB, *prompt.Prompt) {
	return func(t *testing.T, db *store.DB, p *prompt.Prompt) {
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

func decided(d prompt.Decision) func(*testing.T, *store.DB, *prompt.Prompt) {
	return func(t *testing.T, db *store.DB, _ *prompt.Prompt) {
		if _, err := db.Decide(context.Background(), auditApprovalID, d); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEveryDecisionIsAuditedOnceWithItsSource: each place a decision is
// written records exactly one entry, naming what decided.
func TestEveryDecisionIsAuditedOnceWithItsSource(t *testing.T) {
	at := t0.Add(time.Minute)
	grant := prompt.Grant{ID: "gabc", Tool: "shell.run", Scope: "input:x", Label: "exactly this input",
		ConversationID: "c", By: "Alice (111)", CreatedAt: at, ApprovalID: auditApprovalID}
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *store.DB, *prompt.Prompt)
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
		{"cancel", func(t *testing.T, db *store.DB, _ *prompt.Prompt) {
			if err := db.CancelPrompt(context.Background(), "p1", "Alice (111)", at); err != nil {
				t.Fatal(err)
			}
		}, prompt.AuditEntry{CallID: "c1", Outcome: prompt.OutcomeCancelled, SourceKind: prompt.SourcePerson, Source: "Alice (111)"}},
		{"prompt ended undecided", func(t *testing.T, db *store.DB, p *prompt.Prompt) {
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
			db, _ := openTemp(t)
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

// TestALostDecisionIsNotAudited: the press that loses the compare-and-set
// records nothing, nor does the end of a prompt whose request a deadline
// expired already.
func TestALostDecisionIsNotAudited(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := auditedPrompt(t, db, "p1", "c", auditApprovalID)
	if _, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalExpired, At: t0, Note: "no decision within 30m"}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalApproved, By: "Bob (2)", At: t0})
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

// TestSavingARuledCallAgainAuditsItOnce: the call's ruling stays in its
// item through executing and done; each save of it is not a new decision.
func TestSavingARuledCallAgainAuditsItOnce(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := auditedPrompt(t, db, "p1", "c", auditApprovalID)
	q := next(p)
	q.Output[2].Call.Status = prompt.CallExecuting
	q.Output[2].Call.Ruling = &prompt.Ruling{Allowed: true, Kind: "rule", By: "rules.yaml:1", At: t0}
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

// TestAuditFiltersByConversationSinceAndLimitNewestFirst.
func TestAuditFiltersByConversationSinceAndLimitNewestFirst(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	// Three prompts, each decided a minute after the last: a, b, a.
	for i, conv := range []string{"a", "b", "a"} {
		id := string(rune('1' + i))
		p := auditedPrompt(t, db, "p"+id, conv, "appr000000000000"+id)
		if _, err := db.Decide(ctx, p.Output[1].Call.Approval.ID, prompt.Decision{Status: prompt.ApprovalApproved,
			By: "Alice (111)", At: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
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
		{"since", prompt.AuditQuery{Since: t0.Add(time.Minute)}, []string{"p3", "p2"}},
		{"since in a chat", prompt.AuditQuery{ConversationID: "a", Since: t0.Add(30 * time.Second)}, []string{"p3"}},
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

// TestUpgradeAuditsTheDecisionsMadeBefore: a version 9 database keeps its
// history: every decided approval, and every ruled call, becomes an entry;
// a pending one does not.
func TestUpgradeAuditsTheDecisionsMadeBefore(t *testing.T) {
	path, raw := databaseAt(t, 9)
	const ts = "2026-11-20T10:00:00Z"
	approval := func(id, call, status, by, at, note string) string {
		decidedAt := "NULL"
		if at != "" {
			decidedAt = "'" + at + "'"
		}
		return `INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
			decided_by, decided_at, note, created_at, updated_at, input_hash)
			VALUES ('` + id + `', 'p1', '` + call + `', 'shell.run', '{}', 'runs', '` + status + `', '` + ts + `', '` + by + `', ` +
			decidedAt + `, '` + note + `', '` + ts + `', '` + ts + `', 'h` + id + `')`
	}
	for _, q := range []string{
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('p1', 'tg:1', 'completed', 'do it', 2, 9, '` + ts + `', '` + ts + `')`,
		approval("a1", "c1", "approved", "Alice (1)", "2026-11-20T10:01:00.5Z", ""),
		approval("a2", "c2", "rejected", "Bob (2)", "2026-11-20T10:02:00Z", "too risky"),
		approval("a3", "c3", "rejected", "Alice (1)", "2026-11-20T10:03:00Z", "cancelled"),
		approval("a4", "c4", "expired", "", "2026-11-20T10:04:00Z", "no decision within 30m"),
		approval("a5", "c5", "expired", "", "", "not run: cancelled"),
		approval("a6", "c6", "pending", "", "", ""),
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body) VALUES ('p1', 0, 'tool', 1, 'c7',
		 '{"type":"tool","turn":1,"call":{"id":"c7","name":"web.fetch","arguments":"{}","status":"done","ruling":{"allowed":false,"kind":"rule","by":"rules.yaml:4","why":"no","at":"2026-11-20T11:05:00.25+01:00"}}}')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%v in %s", err, q)
		}
	}
	raw.Close()
	db := reopen(t, path)
	es := auditAll(t, db)
	type row struct {
		at, approval, outcome, kind, source, feedback string
	}
	var got []row
	for _, e := range es {
		got = append(got, row{e.At.Format(time.RFC3339Nano), e.ApprovalID, string(e.Outcome), string(e.SourceKind), e.Source, e.Feedback})
	}
	want := []row{
		{"2026-11-20T10:05:00.25Z", "", "denied", "rule", "rules.yaml:4", "no"},
		{"2026-11-20T10:04:00Z", "a4", "expired", "timeout", "no decision within 30m", ""},
		{"2026-11-20T10:03:00Z", "a3", "cancelled", "person", "Alice (1)", "cancelled"},
		{"2026-11-20T10:02:00Z", "a2", "rejected", "person", "Bob (2)", "too risky"},
		{"2026-11-20T10:01:00.5Z", "a1", "approved", "person", "Alice (1)", ""},
		{"2026-11-20T10:00:00Z", "a5", "expired", "system", "prompt ended", "not run: cancelled"},
	}
	if len(got) != len(want) {
		t.Fatalf("entries\n got %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	if es[len(es)-2].InputHash != "ha1" || es[len(es)-2].Tool != "shell.run" || es[0].Tool != "web.fetch" {
		t.Errorf("carried-over entries lost their tool or hash: %+v", es)
	}
}

// TestReadOnlyReadsTheAuditWhileTheBotHoldsTheDatabase: an operator's
// command reads beside store.Open's lock, and sees what commits after it
// opened.
func TestReadOnlyReadsTheAuditWhileTheBotHoldsTheDatabase(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	auditedPrompt(t, db, "p1", "c", auditApprovalID)
	ro, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("open read-only beside the bot: %v", err)
	}
	defer ro.Close()
	if es := auditAll(t, ro); len(es) != 0 {
		t.Fatalf("entries before any decision: %+v", es)
	}
	if _, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalApproved, By: "Alice (111)", At: t0}); err != nil {
		t.Fatal(err)
	}
	es := auditAll(t, ro)
	if len(es) != 1 || es[0].Source != "Alice (111)" {
		t.Fatalf("read-only entries after a decision: %+v", es)
	}
	// The bot still writes: the reader took no lock of its own.
	if err := db.CancelPrompt(ctx, "p1", "Alice (111)", t0); err != nil {
		t.Fatalf("write beside the reader: %v", err)
	}
}

// TestReadOnlyReadsAClosedDatabase: with no bot running, SQLite may have
// removed the WAL files; reading still works and writes nothing.
func TestReadOnlyReadsAClosedDatabase(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	auditedPrompt(t, db, "p1", "c", auditApprovalID)
	if _, err := db.Decide(ctx, auditApprovalID, prompt.Decision{Status: prompt.ApprovalApproved, By: "Alice (111)", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if es := auditAll(t, ro); len(es) != 1 {
		t.Fatalf("entries %+v, want 1", es)
	}
}

// TestReadOnlyRefusesWhatItCannotRead: an old schema names the fix; a
// missing file is not created.
func TestReadOnlyRefusesWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	old, raw := databaseAt(t, 9)
	raw.Close()
	missing := filepath.Join(t.TempDir(), "none.db")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"before the audit", old, "run the bot once to upgrade it"},
		{"no file", missing, "no database there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro, err := store.OpenReadOnly(ctx, tc.path)
			if err == nil {
				ro.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
	if m, _ := filepath.Glob(missing + "*"); len(m) != 0 {
		t.Fatalf("read-only open created %v", m)
	}
}
