package store

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
)

// limitPages makes the database "full" at its current size, as a full
// disk would: SQLite fails any write that needs another page with
// SQLITE_FULL. It returns a function that frees the space again.
func limitPages(t *testing.T, db *DB) (free func()) {
	t.Helper()
	var pages int
	if err := db.writer.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.writer.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := db.writer.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFullDiskFailsTheSaveAndKeepsWhatWasStored(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "tollgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	small := &prompt.Prompt{ID: "small", ConversationID: "c1", State: prompt.StateRunning, Input: "hi", Rev: 1,
		CreatedAt: now, UpdatedAt: now}
	if err := db.SavePrompt(ctx, small); err != nil {
		t.Fatal(err)
	}
	before, err := db.UnfinishedPrompts(ctx)
	if err != nil {
		t.Fatal(err)
	}

	free := limitPages(t, db)
	big := &prompt.Prompt{ID: "big", ConversationID: "c2", State: prompt.StateRunning, Input: "hi", Rev: 2,
		CreatedAt: now, UpdatedAt: now}
	for i := range 50 {
		big.Output = append(big.Output, prompt.Item{Type: prompt.ItemText, Turn: 1, Rev: 2,
			Text: strings.Repeat(fmt.Sprint(i), 4000)})
	}
	err = db.SavePrompt(ctx, big)
	if err == nil || !strings.Contains(err.Error(), "save prompt big") || !strings.Contains(err.Error(), "full") {
		t.Fatalf("save on a full disk: %v; want a clear error", err)
	}
	after, err := db.UnfinishedPrompts(ctx)
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("after the failed save: %+v, %v; want %+v", after, err, before)
	}

	free()
	if err := db.SavePrompt(ctx, big); err != nil {
		t.Fatalf("save once space is free: %v", err)
	}
	var res string
	if err := db.reader.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity: %s, %v", res, err)
	}
}

// Through the service, the user whose prompt could not be saved gets a
// clear error for that prompt; the stored prompt stays as last saved, and
// the next start resumes it.
func TestFullDiskFailsOnlyThatPrompt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	proceed := make(chan struct{})
	long := strings.Repeat("a very long answer ", 20000)
	model := prompt.ModelFunc(func(ctx context.Context, req prompt.Request) (prompt.Response, error) {
		select {
		case <-proceed:
		case <-ctx.Done():
			return prompt.Response{}, ctx.Err()
		}
		return prompt.Response{Text: long}, nil
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Create(ctx, "conv", "tell me everything")
	if err != nil {
		t.Fatal(err)
	}
	free := limitPages(t, db)
	close(proceed)
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if p := c.Prompt(); p.State != prompt.StateFailed || !strings.Contains(p.Error, "could not save") {
		t.Fatalf("prompt is %s: %q; want failed with a clear error", p.State, p.Error)
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := db.UnfinishedPrompts(ctx)
	if err != nil || len(stored) != 1 || stored[0].State != prompt.StateRunning || len(stored[0].Output) != 0 {
		t.Fatalf("stored: %+v, %v; want the prompt as first saved", stored, err)
	}

	free()
	svc2, err := prompt.NewService(prompt.Config{Model: model, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *prompt.Prompt, 1)
	svc2.OnCompleted(func(ctx context.Context, c *prompt.Completion) { done <- c.Prompt() })
	if n, err := svc2.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d, %v", n, err)
	}
	select {
	case p := <-done:
		if p.State != prompt.StateCompleted || p.FinalText() != long {
			t.Fatalf("after recovery: %s %q", p.State, p.Error)
		}
	case <-ctx.Done():
		t.Fatal("recovered prompt did not complete")
	}
	if err := svc2.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
