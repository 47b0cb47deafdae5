package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

func endedPrompt(id, conv string, state prompt.State, text string) *prompt.Prompt {
	return &prompt.Prompt{
		ID: id, ConversationID: conv, State: state, Input: "question " + id, Turns: 1, Rev: 2,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		Output: []prompt.Item{{Type: prompt.ItemText, Turn: 1, Rev: 2, Text: text}},
	}
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
		if err := db.SavePrompt(ctx, p); err != nil {
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
	if got[0].FinalText() != "answer one" {
		t.Fatalf("prompt not loaded whole: %+v", got[0])
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
	db, path := openTemp(t)
	if err := db.SavePrompt(ctx, endedPrompt("old", "tg:1", prompt.StateCompleted, "long ago")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema before answers were tracked, then up again.
	raw := rawDB(t, path)
	for _, q := range []string{`DROP TABLE answers`, `DELETE FROM goose_db_version WHERE version_id = 2`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db2 := reopen(t, path)
	got, err := db2.UnansweredPrompts(ctx, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("after the upgrade: %v, %v; old answers must not be sent again", promptIDs(got), err)
	}
}

func promptIDs(ps []*prompt.Prompt) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
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
