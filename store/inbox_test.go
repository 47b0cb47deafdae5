package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

func update(id int64, text string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"},"text":%q}}`, id, text))
}

func updateIDs(t *testing.T, bodies []json.RawMessage) []int64 {
	t.Helper()
	var ids []int64
	for _, b := range bodies {
		var u struct {
			ID int64 `json:"update_id"`
		}
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	return ids
}

func TestInboxMigrationOnAnExistingDatabase(t *testing.T) {
	ctx := context.Background()
	// A database at the schema before the inbox, with a chat in it.
	path, raw := databaseAt(t, 3)
	if _, err := raw.Exec(`INSERT INTO chats (conversation_id, chat_id, created_at, updated_at)
		VALUES ('tg:7', 7, '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`SELECT 1 FROM inbox`); err == nil {
		t.Fatal("the inbox exists before its migration")
	}
	raw.Close()

	db := reopen(t, path)
	if chat, err := db.ChatOf(ctx, "tg:7"); err != nil || chat != 7 {
		t.Fatalf("chat after the upgrade: %d, %v", chat, err)
	}
	fresh, err := db.RecordUpdates(ctx, []json.RawMessage{update(1, "hello")})
	if err != nil || !slices.Equal(fresh, []int64{1}) {
		t.Fatalf("record after the upgrade: %v, %v", fresh, err)
	}
	got, err := db.UnhandledUpdates(ctx, 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("unhandled after the upgrade: %d, %v", len(got), err)
	}
}
