package prompt_test

import (
	"context"
	"strconv"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// BenchmarkRoundTrip measures create → pause → approve → completed with
// the in-memory store and a scripted model: the core's own overhead.
func BenchmarkRoundTrip(b *testing.B) {
	rec := newRecorder()
	rec.started = make(chan string, 1)
	go func() {
		for range rec.started { // nobody waits on the tool here
		}
	}()
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		if len(req.Messages) == 1 {
			return prompt.Response{ToolCalls: []prompt.ToolCall{call("c1", "test.gated", "x")}}, nil
		}
		return prompt.Response{Text: "done"}, nil
	})
	svc, err := prompt.NewService(prompt.Config{
		Model: model, Store: prompttest.NewStore(), Tools: defaultTools(b)(rec), HistoryLimit: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer func() {
		if err := svc.Close(ctx); err != nil {
			b.Error(err)
		}
		close(rec.started)
	}()
	ids := make(chan string, 1)
	ended := make(chan prompt.Answer, 1)
	svc.OnApprovalRequested(func(_ context.Context, req prompt.ApprovalRequest) { ids <- req.ApprovalID })
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A fresh conversation each time keeps history from growing.
		c, err := svc.Create(ctx, "conv-"+strconv.Itoa(i), "go")
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.Approve(ctx, waitFor(b, ids), "alice"); err != nil {
			b.Fatal(err)
		}
		if a := waitFor(b, ended); a.PromptID != c.PromptID || a.State != prompt.StateCompleted {
			b.Fatalf("ended %+v", a)
		}
	}
}
