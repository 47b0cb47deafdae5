package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"tollgate/migrations"
	"tollgate/prompt"
	"tollgate/store"
)

// endedPrompt is a prompt that ended, built by hand at revision 1 so
// CreatePrompt can insert it.
func endedPrompt(id, conv string, state prompt.State, text string) *prompt.Prompt {
	p := &prompt.Prompt{
		ID: id, ConversationID: conv, State: state, Input: "question " + id, Turns: 1, Rev: 1,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		Output: []prompt.Item{{Type: prompt.ItemText, Turn: 1, Text: text}},
	}
	if state == prompt.StateFailed {
		p.Error = "The model failed: " + id
	}
	return p
}

func TestUnansweredPromptsAreTheEndedOnesNotMarked(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	for _, p := range []*prompt.Prompt{
		endedPrompt("p1", "tg:1", prompt.StateCompleted, "answer one"),
		gatedPrompt("p2", "tg:2", "appr0000000000002"), // still waiting: not an answer yet
		endedPrompt("p3", "tg:3", prompt.StateFailed, ""),
		endedPrompt("p4", "tg:1", prompt.StateCompleted, "answer four"),
	} {
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.UnansweredPrompts(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := promptIDs(got); len(ids) != 3 || ids[0] != "p1" || ids[1] != "p3" || ids[2] != "p4" {
		t.Fatalf("unanswered = %v, want [p1 p3 p4]", ids)
	}
	if got[0].Text != "answer one" || got[0].State != prompt.StateCompleted || got[0].ConversationID != "tg:1" {
		t.Fatalf("answer not read whole: %+v", got[0])
	}
	if got[1].State != prompt.StateFailed || got[1].Error != "The model failed: p3" {
		t.Fatalf("failed prompt listed as %+v", got[1])
	}
	if got, _ := db.UnansweredPrompts(ctx, 2); len(got) != 2 {
		t.Fatalf("limit 2 gave %d", len(got))
	}

	if err := db.MarkAnswered(ctx, "p1", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkAnswered(ctx, "p1", "again"); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	if err := db.MarkAnswered(ctx, "p3", "chat blocked the bot"); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkAnswered(ctx, "nope", ""); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown prompt: %v", err)
	}
	got, err = db.UnansweredPrompts(ctx, 10)
	if ids := promptIDs(got); err != nil || len(ids) != 1 || ids[0] != "p4" {
		t.Fatalf("after marking: %v, %v", ids, err)
	}
}

func TestUpgradeCountsOldAnswersAsDelivered(t *testing.T) {
	ctx := context.Background()
	// A database at schema 1, before answers were tracked, with an answer
	// long delivered; the upgrade must not send it again.
	path := filepath.Join(t.TempDir(), "tollgate.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const ts = "2026-11-20T10:00:00Z"
	for _, q := range []string{
		`INSERT INTO prompts (id, conversation_id, state, input, turns, rev, created_at, updated_at)
		 VALUES ('old', 'tg:1', 'completed', 'q', 1, 2, '` + ts + `', '` + ts + `')`,
		`INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body)
		 VALUES ('old', 0, 'text', 1, 2, '{"type":"text","turn":1,"rev":2,"text":"long ago"}')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%v in %s", err, q)
		}
	}
	raw.Close()
	db := reopen(t, path)
	got, err := db.UnansweredPrompts(ctx, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("after the upgrade: %v, %v; old answers must not be sent again", promptIDs(got), err)
	}
}

func promptIDs(as []prompt.Answer) []string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.PromptID)
	}
	return ids
}

func reopen(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
