package store_test

import (
	"context"
	"testing"
	"time"

	"tollgate/prompt"
)

// A user's Cancel cancels the loop's context; on SQLite, which honours a
// cancelled context, the tool's result and the end must still be saved,
// and the prompt must read as cancelled, not as a storage failure.
func TestCancelWhileAToolRunsIsSavedAsCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, _ := openTemp(t)
	started := make(chan struct{})
	tool, err := prompt.NewTool("test.slow", "waits", nil, func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	model := prompt.ModelFunc(func(context.Context, prompt.Request) (prompt.Response, error) {
		turns++
		return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "test.slow", Arguments: `{}`}}}, nil
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db, Tools: []*prompt.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	c, err := svc.Create(ctx, "conv", "go")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.Cancel(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := db.History(ctx, "conv", "", 1)
	if err != nil || len(ps) != 1 {
		t.Fatalf("history = %v, %v", ps, err)
	}
	p := ps[0]
	if p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("stored %s %q, want failed as cancelled", p.State, p.Error)
	}
	if len(p.Output) != 1 || p.Output[0].Call.Status != prompt.CallDone || p.Output[0].Call.Result == nil {
		t.Fatalf("stored call = %+v: its result was lost", p.Output[0].Call)
	}
	if turns != 1 {
		t.Fatalf("model turns = %d", turns)
	}
}
