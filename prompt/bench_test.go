package prompt_test

import (
	"context"
	"strconv"
	"testing"

	"tollgate/prompt"
)

// BenchmarkRoundTrip measures create → pause → approve → completed with
// the in-memory store and a scripted model: the core's own overhead.
func BenchmarkRoundTrip(b *testing.B) {
	rec := &recorder{}
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		if len(req.Messages) == 1 {
			return prompt.Response{ToolCalls: []prompt.ToolCall{call("c1", "test.gated", "x")}}, nil
		}
		return prompt.Response{Text: "done"}, nil
	})
	svc, err := prompt.NewService(prompt.Config{
		Model: model, Store: prompt.NewMemStore(), Tools: defaultTools(b)(rec), HistoryLimit: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	ids := make(chan string, 1)
	svc.OnApprovalRequested(func(_ context.Context, _ *prompt.Completion, req prompt.ApprovalRequest) { ids <- req.ApprovalID })
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A fresh conversation each time keeps history from growing.
		c, err := svc.Create(ctx, "conv-"+strconv.Itoa(i), "go")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if err := svc.Approve(ctx, <-ids, "alice"); err != nil {
			b.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if c.Prompt().State != prompt.StateCompleted {
			b.Fatal("not completed")
		}
	}
}
