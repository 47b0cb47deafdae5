package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"tollgate/migrations"
	"tollgate/prompt"
	"tollgate/store"
)

// oldDatabase writes a database at schema version 2 as the version before
// durable steps left it: approvals copied into the item JSON, items with
// their own revision, approval rows that follow the call's status.
func oldDatabase(t *testing.T) string {
	t.Helper()
	path, raw := databaseAt(t, 2)
	const ts = "2026-11-20T10:00:00Z"
	for _, q := range []string{
		// Waiting on a pending approval.
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pw', 'tg:1', 'waiting_for_approval', 'fetch it', 1, 3, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body) VALUES ('pw', 0, 'tool', 1, 3,
		 '{"type":"tool","turn":1,"rev":3,"call":{"id":"c1","name":"web-fetch.fetch","arguments":"{\"url\":\"https://go.dev\"}","status":"pending","approval":{"id":"apprwaiting00001","reason":"not listed","requested_at":"` + ts + `"},"result":{"type":"pending","reason":"not listed"}}}')`,
		`INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at, created_at, updated_at)
		 VALUES ('apprwaiting00001', 'pw', 'c1', 'web-fetch.fetch', '{}', 'not listed', 'pending', '` + ts + `', '` + ts + `', '` + ts + `')`,
		// Ended: one call approved and run, one that ended undecided.
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pd', 'tg:2', 'completed', 'do it', 2, 9, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body) VALUES ('pd', 0, 'tool', 1, 5,
		 '{"type":"tool","turn":1,"rev":5,"call":{"id":"c1","name":"shell.run","arguments":"{}","status":"done","approval":{"id":"apprdone00000001","reason":"runs","requested_at":"` + ts + `","decided_by":"Alice (1)","decided_at":"` + ts + `"},"result":{"type":"success","output":"ok"}}}')`,
		`INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at, decided_by, decided_at, created_at, updated_at)
		 VALUES ('apprdone00000001', 'pd', 'c1', 'shell.run', '{}', 'runs', 'done', '` + ts + `', 'Alice (1)', '` + ts + `', '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body) VALUES ('pd', 1, 'tool', 1, 9,
		 '{"type":"tool","turn":1,"rev":9,"call":{"id":"c2","name":"shell.run","arguments":"{}","status":"done","approval":{"id":"apprundecided001","reason":"runs","requested_at":"` + ts + `","note":"not run: cancelled"},"result":{"type":"error","error":"not run: cancelled"}}}')`,
		`INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at, note, created_at, updated_at)
		 VALUES ('apprundecided001', 'pd', 'c2', 'shell.run', '{}', 'runs', 'done', '` + ts + `', 'not run: cancelled', '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body) VALUES ('pd', 2, 'text', 2, 9, '{"type":"text","turn":2,"rev":9,"text":"all done"}')`,
		// Two unfinished prompts in one chat, which the old code never made
		// but an upgrade must survive.
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pold', 'tg:3', 'running', 'first', 0, 1, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pnew', 'tg:3', 'running', 'second', 0, 1, '` + ts + `', '` + ts + `')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%v in %s", err, q)
		}
	}
	return path
}

func TestUpgradeKeepsWaitingRequestsDecidable(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, oldDatabase(t))
	if err != nil {
		t.Fatalf("open an old database: %v", err)
	}
	defer db.Close()

	p, err := db.LoadPrompt(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	req, ok := p.PendingRequest()
	if !ok || req.ApprovalID != "apprwaiting00001" || req.ToolName != "web-fetch.fetch" {
		t.Fatalf("waiting prompt after the upgrade: %+v, %v", req, ok)
	}
	if p.Rev != 3 {
		t.Fatalf("rev = %d", p.Rev)
	}
	ref, err := db.Decide(ctx, "apprwaiting00001", prompt.Decision{Status: prompt.ApprovalApproved, By: "Bob (2)", At: time.Now()})
	if err != nil || ref.PromptID != "pw" {
		t.Fatalf("decide an upgraded request: %+v, %v", ref, err)
	}

	done, err := db.LoadPrompt(ctx, "pd")
	if err != nil {
		t.Fatal(err)
	}
	if a := done.Output[0].Call.Approval; a == nil || a.Status != prompt.ApprovalApproved || a.DecidedBy != "Alice (1)" {
		t.Fatalf("approved and run: %+v", a)
	}
	if a := done.Output[1].Call.Approval; a == nil || a.Status != prompt.ApprovalExpired || a.Note != "not run: cancelled" {
		t.Fatalf("ended undecided: %+v", a)
	}
	if done.FinalText() != "all done" {
		t.Fatalf("final text %q", done.FinalText())
	}
	// Its answer was never marked delivered, and the superseded prompt's
	// end is news to its chat too: the outbox sends both.
	due, err := db.DueNotices(ctx, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, e := range due {
		if e.Kind == prompt.NoticeAnswer {
			answers = append(answers, e.PromptID)
		}
	}
	if !reflect.DeepEqual(answers, []string{"pd", "pold"}) {
		t.Fatalf("answers in the outbox after the upgrade: %v, want pd's and pold's", answers)
	}

	active, err := db.ActivePrompt(ctx, "tg:3")
	if err != nil || active.ID != "pnew" {
		t.Fatalf("active of a chat with two unfinished prompts: %+v, %v; want the newer", active, err)
	}
	old, err := db.LoadPrompt(ctx, "pold")
	if err != nil || old.State != prompt.StateFailed || !strings.Contains(old.Error, "Superseded") {
		t.Fatalf("older unfinished prompt: %+v, %v", old, err)
	}
	if err := db.CreatePrompt(ctx, &prompt.Prompt{ID: "p3", ConversationID: "tg:3", State: prompt.StateRunning, Rev: 1,
		CreatedAt: t0, UpdatedAt: t0}); !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("create beside an upgraded unfinished prompt: %v", err)
	}
}

// TestUpgradeDropsTheOldOperatorEntries: earlier versions wrote the
// operator's list into domains as added_by 'config' and never removed an
// entry, so a host taken off WEBFETCH_ALLOWED_DOMAINS stayed allowed.
// The upgrade drops those rows and keeps what humans added.
func TestUpgradeDropsTheOldOperatorEntries(t *testing.T) {
	ctx := context.Background()
	path, raw := databaseAt(t, 5)
	for _, row := range [][2]string{
		{"example.com", "config"},
		{"removed.example.net", "config"},
		{"golang.org", "Alice (111)"},
		{"docs.example.org", "prompt p1 call c1"},
	} {
		if _, err := raw.Exec(`INSERT INTO domains (domain, added_by, added_at) VALUES (?, ?, '2026-11-20T10:00:00Z')`, row[0], row[1]); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"golang.org": "Alice (111)", "docs.example.org": "prompt p1 call c1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("entries after the upgrade %v; want %v", got, want)
	}
}

// databaseAt creates a database in a temporary folder with the schema at
// migration version, as an older Tollgate left it, and returns its path and
// a raw handle to fill it (closed at the end of the test; close it before
// store.Open).
func databaseAt(t *testing.T, version int64) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return path, raw
}
