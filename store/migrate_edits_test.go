package store_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"tollgate/migrations"
	"tollgate/prompt"
	"tollgate/store"
)

// version8Database writes a database at schema version 8, as the version
// before grants and edits left it: a waiting prompt with a pending
// request shown in two messages, an ended prompt with a decided request,
// and their outbox rows, some delivered.
func version8Database(t *testing.T) string {
	t.Helper()
	path, raw := databaseAt(t, 8)
	const ts = "2026-11-20T10:00:00Z"
	for _, q := range []string{
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pw', 'tg:1', 'waiting_for_approval', 'fetch it', 1, 3, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body) VALUES ('pw', 0, 'tool', 1, 'c1',
		 '{"type":"tool","turn":1,"call":{"id":"c1","name":"web-fetch.fetch","arguments":"{\"url\":\"https://go.dev\"}","status":"pending","result":{"type":"pending","reason":"not listed"}}}')`,
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('pd', 'tg:2', 'completed', 'do it', 2, 9, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body) VALUES ('pd', 0, 'tool', 1, 'c1',
		 '{"type":"tool","turn":1,"call":{"id":"c1","name":"shell.run","arguments":"{}","status":"done","result":{"type":"success","output":"ok"}}}')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body) VALUES ('pd', 1, 'text', 2, NULL,
		 '{"type":"text","turn":2,"text":"all done"}')`,
		// Inserted in an order that differs from the IDs' order, so the
		// rebuilt table must keep rowid order, not sort by ID.
		`INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
		 decided_by, decided_at, note, created_at, updated_at, input_hash)
		 VALUES ('zzdone0000000001', 'pd', 'c1', 'shell.run', '{}', 'runs', 'approved', '` + ts + `',
		 'Alice (1)', '` + ts + `', '', '` + ts + `', '` + ts + `', 'hash-done')`,
		`INSERT INTO approvals (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
		 created_at, updated_at, expires_at, remind_at, input_hash)
		 VALUES ('aawaiting0000001', 'pw', 'c1', 'web-fetch.fetch', '{"url":"https://go.dev"}', 'not listed', 'pending',
		 '` + ts + `', '` + ts + `', '` + ts + `', 1795000000000, 1794000000000, 'hash-waiting')`,
		`INSERT INTO approval_messages (approval_id, chat_id, message_id, created_at) VALUES ('aawaiting0000001', 11, 100, '` + ts + `')`,
		`INSERT INTO approval_messages (approval_id, chat_id, message_id, created_at) VALUES ('zzdone0000000001', 22, 200, '` + ts + `')`,
		`INSERT INTO approval_messages (approval_id, chat_id, message_id, created_at) VALUES ('aawaiting0000001', 11, 101, '` + ts + `')`,
		`INSERT INTO outbox (seq, conversation_id, kind, prompt_id, approval_id, created_at, done_at)
		 VALUES (5, 'tg:2', 'decided', 'pd', 'zzdone0000000001', '` + ts + `', '` + ts + `')`,
		`INSERT INTO outbox (seq, conversation_id, kind, prompt_id, approval_id, attempts, created_at)
		 VALUES (7, 'tg:1', 'request', 'pw', 'aawaiting0000001', 2, '` + ts + `')`,
		`INSERT INTO outbox (seq, conversation_id, kind, prompt_id, created_at)
		 VALUES (9, 'tg:2', 'answer', 'pd', '` + ts + `')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%v in %s", err, q)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMigration9KeepsApprovalsMessagesAndOutbox upgrades a version 8
// database with rows in every table the migration rebuilds or alters.
func TestMigration9KeepsApprovalsMessagesAndOutbox(t *testing.T) {
	ctx := context.Background()
	path := version8Database(t)
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version 8 database: %v", err)
	}
	defer db.Close()

	ref, err := db.FindApproval(ctx, "aawaiting0000001")
	if err != nil {
		t.Fatal(err)
	}
	if ref.PromptID != "pw" || ref.CallID != "c1" || ref.Status != prompt.ApprovalPending || ref.ToolName != "web-fetch.fetch" ||
		ref.Input != `{"url":"https://go.dev"}` || ref.InputHash != "hash-waiting" || ref.Reason != "not listed" {
		t.Fatalf("waiting approval after the upgrade: %+v", ref)
	}
	done, err := db.FindApproval(ctx, "zzdone0000000001")
	if err != nil || done.Status != prompt.ApprovalApproved || done.DecidedBy != "Alice (1)" || done.InputHash != "hash-done" {
		t.Fatalf("decided approval after the upgrade: %+v, %v", done, err)
	}
	p, err := db.LoadPrompt(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	a := p.Output[0].Call.Approval
	if a == nil || a.ID != "aawaiting0000001" || a.Status != prompt.ApprovalPending ||
		a.ExpiresAt.UnixMilli() != 1795000000000 || a.RemindAt.UnixMilli() != 1794000000000 {
		t.Fatalf("loaded approval after the upgrade: %+v", a)
	}

	// seq follows the old rowid order.
	raw := rawDB(t, path)
	var seqs []string
	rows, err := raw.Query(`SELECT id FROM approvals ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, id)
	}
	rows.Close()
	if want := []string{"zzdone0000000001", "aawaiting0000001"}; !reflect.DeepEqual(seqs, want) {
		t.Fatalf("approvals by seq %v, want %v", seqs, want)
	}
	integrityOK(t, raw)
	var fkProblems int
	if err := raw.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fkProblems); err != nil || fkProblems != 0 {
		t.Fatalf("foreign key check after the upgrade: %d problems, %v", fkProblems, err)
	}

	copies, err := db.ApprovalMessages(ctx, "aawaiting0000001")
	if want := []prompt.ApprovalCopy{{ChatID: 11, MessageID: 100}, {ChatID: 11, MessageID: 101}}; err != nil || !reflect.DeepEqual(copies, want) {
		t.Fatalf("messages of the waiting approval: %v %v", copies, err)
	}
	if got, err := db.ApprovalByMessage(ctx, 22, 200); err != nil || got != "zzdone0000000001" {
		t.Fatalf("approval of message 200: %q, %v", got, err)
	}

	due, err := db.DueNotices(ctx, time.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []prompt.OutboxEntry{
		{Notice: prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: "tg:1", PromptID: "pw", ApprovalID: "aawaiting0000001"}, Seq: 7, Attempts: 2},
		{Notice: prompt.Notice{Kind: prompt.NoticeAnswer, ConversationID: "tg:2", PromptID: "pd"}, Seq: 9},
	}
	if !reflect.DeepEqual(due, want) {
		t.Fatalf("due after the upgrade:\n%+v\nwant\n%+v", due, want)
	}

	// The upgraded request can be edited and asked again.
	if _, err := db.Decide(ctx, "aawaiting0000001", prompt.Decision{Status: prompt.ApprovalEdited, By: "Bob (2)",
		At: time.Now(), Input: `{"url":"https://go.dev/doc"}`}); err != nil {
		t.Fatalf("edit an upgraded request: %v", err)
	}
}

// TestMigration9DownKeepsTheLiveApprovals goes back to version 8 with
// edited approvals, their messages, grants and a 'granted' notice in the
// database, with foreign keys enforced as the store enforces them: the
// live approval of each call stays, with its messages, and the new rows
// go; going up again works.
func TestMigration9DownKeepsTheLiveApprovals(t *testing.T) {
	ctx := context.Background()
	path := version8Database(t)
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// Edit the waiting request, ask again, and record messages of both.
	if _, err := db.Decide(ctx, "aawaiting0000001", prompt.Decision{Status: prompt.ApprovalEdited, By: "Bob (2)",
		At: time.Now(), Input: `{"url":"https://go.dev/doc"}`}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddEditMessage(ctx, "aawaiting0000001", 11, 102); err != nil {
		t.Fatal(err)
	}
	p, err := db.LoadPrompt(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Output[0].Call
	c.Edit = &prompt.Edit{Arguments: `{"url":"https://go.dev/doc"}`, By: "Bob (2)", At: t0, ApprovalID: "aawaiting0000001"}
	c.Approval = &prompt.Approval{ID: "aanew00000000001", Status: prompt.ApprovalPending, Reason: "edited", RequestedAt: t0}
	p.State, p.Rev = prompt.StateWaiting, p.Rev+1
	if err := db.SavePrompt(ctx, p, []int{0}, prompt.Notice{Kind: prompt.NoticeGranted, ConversationID: "tg:1",
		PromptID: "pw", CallID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddApprovalMessage(ctx, "aanew00000000001", 11, 103); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	raw, err := sql.Open("sqlite", path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	prov, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.DownTo(ctx, 8); err != nil {
		t.Fatalf("down to 8: %v", err)
	}
	var ids []string
	rows, err := raw.Query(`SELECT id FROM approvals ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if want := []string{"zzdone0000000001", "aanew00000000001"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("approvals after going down %v, want %v", ids, want)
	}
	var msgs, granted, fkProblems int
	if err := raw.QueryRow(`SELECT count(*) FROM approval_messages WHERE approval_id = 'aanew00000000001'`).Scan(&msgs); err != nil || msgs != 1 {
		t.Fatalf("messages of the live approval after going down: %d, %v", msgs, err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM outbox WHERE kind NOT IN ('request', 'decided', 'answer')`).Scan(&granted); err != nil || granted != 0 {
		t.Fatalf("new outbox kinds after going down: %d, %v", granted, err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fkProblems); err != nil || fkProblems != 0 {
		t.Fatalf("foreign key check after going down: %d problems, %v", fkProblems, err)
	}
	integrityOK(t, raw)
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db = reopen(t, path)
	ref, err := db.FindApproval(ctx, "aanew00000000001")
	if err != nil || ref.Status != prompt.ApprovalPending {
		t.Fatalf("live approval after going down and up: %+v, %v", ref, err)
	}
	if _, err := db.FindApproval(ctx, "aawaiting0000001"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("edited approval after going down and up: %v, want it gone", err)
	}
}
