package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
)

// A user's Cancel cuts the step's context; on SQLite, which honours a
// cancelled context, the tool's result and the end must still be saved,
// and the prompt must read as cancelled, not as a storage failure.
func TestCancelWhileAToolRunsIsSavedAsCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "tollgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	started := make(chan struct{})
	tool, err := prompt.NewTool("test.slow", "waits", nil, func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	model := prompt.ModelFunc(func(context.Context, prompt.Request) (prompt.Response, error) {
		return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "test.slow", Arguments: `{}`}}}, nil
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db, Tools: []*prompt.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	ended := make(chan prompt.Answer, 1)
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	c, err := svc.Create(ctx, "conv", "go")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := svc.Cancel(ctx, c.PromptID, "alice"); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ended:
		if a.State != prompt.StateFailed || a.Error != "Cancelled by alice." {
			t.Fatalf("ended %s %q, want failed as cancelled", a.State, a.Error)
		}
	case <-ctx.Done():
		t.Fatal("the cancelled prompt did not end")
	}
	p, err := db.LoadPrompt(ctx, c.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("stored %s %q, want failed as cancelled", p.State, p.Error)
	}
	if len(p.Output) != 1 || p.Output[0].Call.Status != prompt.CallDone || p.Output[0].Call.Result == nil ||
		!strings.Contains(p.Output[0].Call.Result.Error, "canceled") {
		t.Fatalf("stored call = %+v: its result was lost", p.Output[0].Call)
	}
}

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
	p := &prompt.Prompt{ID: "p1", ConversationID: "c1", State: prompt.StateRunning, Input: "hi", Rev: 1,
		CreatedAt: now, UpdatedAt: now}
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	before, err := db.LoadPrompt(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}

	free := limitPages(t, db)
	big := p.Clone()
	big.Rev = 2
	var changed []int
	for i := range 50 {
		big.Output = append(big.Output, prompt.Item{Type: prompt.ItemText, Turn: 1, Text: strings.Repeat(fmt.Sprint(i), 4000)})
		changed = append(changed, i)
	}
	err = db.SavePrompt(ctx, big, changed)
	if err == nil || !strings.Contains(err.Error(), "save prompt p1") || !strings.Contains(err.Error(), "full") {
		t.Fatalf("save on a full disk: %v; want a clear error", err)
	}
	if errors.Is(err, prompt.ErrConflict) {
		t.Fatalf("a full disk reads as a conflict: %v", err)
	}
	after, err := db.LoadPrompt(ctx, "p1")
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("after the failed save: %+v, %v; want %+v", after, err, before)
	}

	free()
	if err := db.SavePrompt(ctx, big, changed); err != nil {
		t.Fatalf("save once space is free: %v", err)
	}
	var res string
	if err := db.reader.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity: %s, %v", res, err)
	}
}

// Through the service, the user whose prompt could not be saved is told so
// and the store agrees; once there is space again the chat works.
func TestFullDiskFailsOnlyThatPrompt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "tollgate.db"))
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
	defer svc.Close(ctx)
	ended := make(chan prompt.Answer, 2)
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	c, err := svc.Create(ctx, "conv", "tell me everything")
	if err != nil {
		t.Fatal(err)
	}
	free := limitPages(t, db)
	proceed <- struct{}{}
	select {
	case a := <-ended:
		if a.State != prompt.StateFailed || !strings.Contains(a.Error, "could not save") {
			t.Fatalf("prompt ended %s: %q; want failed with a clear error", a.State, a.Error)
		}
	case <-ctx.Done():
		t.Fatal("the prompt did not end")
	}
	stored, err := db.LoadPrompt(ctx, c.PromptID)
	if err != nil || stored.State != prompt.StateFailed || len(stored.Output) != 0 {
		t.Fatalf("stored: %+v, %v; want failed, without the answer that could not be saved", stored, err)
	}

	free()
	if _, err := svc.Create(ctx, "conv", "try again"); err != nil {
		t.Fatalf("a new message after space came back: %v", err)
	}
	close(proceed)
	select {
	case a := <-ended:
		if a.State != prompt.StateCompleted || a.Text != long {
			t.Fatalf("after space came back: %s %q", a.State, a.Error)
		}
	case <-ctx.Done():
		t.Fatal("the new prompt did not complete")
	}
}
