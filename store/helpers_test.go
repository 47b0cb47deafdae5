package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

// openTemp opens a fresh database in a temporary folder, closed at the
// end of the test.
func openTemp(t testing.TB) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "tollgate.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db, path
}

// rawDB opens path with the driver directly, for checks a test makes
// behind the store's back. The store must be closed first, or the raw
// handle only reads.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func integrityOK(t testing.TB, raw *sql.DB) {
	t.Helper()
	var res string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
		t.Fatalf("integrity check: %v", err)
	}
	if res != "ok" {
		t.Fatalf("integrity check: %s", res)
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))

// gatedPrompt is a prompt waiting on call "c1", built by hand as the
// service would leave it, at revision 1 so CreatePrompt can insert it.
func gatedPrompt(id, conv, approvalID string) *prompt.Prompt {
	return &prompt.Prompt{
		ID: id, ConversationID: conv, State: prompt.StateWaiting, Input: "delete the logs",
		Turns: 1, Rev: 1, CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		Output: []prompt.Item{
			{Type: prompt.ItemText, Turn: 1, Text: "I will delete them."},
			{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
				ID: "c1", Name: "shell.run", Arguments: `{"cmd": "rm -rf /var/log/x"}`,
				Status: prompt.CallPending,
				Approval: &prompt.Approval{ID: approvalID, Status: prompt.ApprovalPending, Reason: "runs a shell command",
					RequestedAt: t0.Add(time.Second)},
				Result: &prompt.Result{Type: prompt.ResultPending, Reason: "runs a shell command"},
			}},
			{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
				ID: "c2", Name: "web.fetch", Arguments: `{"url":"https://example.com"}`, Status: prompt.CallQueued,
			}},
		},
	}
}

// inUTC returns a copy of p with every time in UTC and without a
// monotonic reading, as the store returns them.
func inUTC(p *prompt.Prompt) *prompt.Prompt {
	q := p.Clone()
	if p.Output == nil {
		q.Output = nil // Clone makes an empty slice; the store returns none
	}
	q.CreatedAt, q.UpdatedAt = q.CreatedAt.UTC(), q.UpdatedAt.UTC()
	for _, it := range q.Output {
		if it.Call != nil && it.Call.Approval != nil {
			a := it.Call.Approval
			a.RequestedAt = a.RequestedAt.UTC()
			if !a.DecidedAt.IsZero() {
				a.DecidedAt = a.DecidedAt.UTC()
			}
		}
	}
	return q
}

// reopen opens the database at path again, closed at the end of the test.
func reopen(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
