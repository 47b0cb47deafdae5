package store_test

import (
	"context"
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
