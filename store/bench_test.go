package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"tollgate/prompt"
)

// benchPrompt is a waiting prompt of n output items, half assistant text
// and half finished tool calls, the last one pending.
func benchPrompt(id, conv string, n int) *prompt.Prompt {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	p := &prompt.Prompt{ID: id, ConversationID: conv, State: prompt.StateWaiting, Input: "clean up the server",
		Turns: n, Rev: 1, CreatedAt: now, UpdatedAt: now}
	for i := range n {
		it := prompt.Item{Type: prompt.ItemText, Turn: i + 1, Text: "Looking at the next folder, then I will decide."}
		if i%2 == 1 || i == n-1 {
			it = prompt.Item{Type: prompt.ItemTool, Turn: i + 1, Call: &prompt.Call{
				ID: fmt.Sprint("call", i), Name: "shell.run", Arguments: `{"cmd":"du -sh /var/log"}`,
				Status: prompt.CallDone,
				Result: &prompt.Result{Type: prompt.ResultSuccess, Output: "1.2G\t/var/log"},
			}}
		}
		p.Output = append(p.Output, it)
	}
	last := p.Output[n-1].Call
	last.Status = prompt.CallPending
	last.Approval = &prompt.Approval{ID: fmt.Sprintf("%.10s%06d", id+"xxxxxxxxxx", n-1), Status: prompt.ApprovalPending,
		Reason: "runs a command", RequestedAt: now}
	last.Result = &prompt.Result{Type: prompt.ResultPending, Reason: "runs a command"}
	return p
}

func benchDB(b *testing.B) *DB {
	b.Helper()
	db, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// fill inserts n prompts made by mk in one transaction: n synced commits
// would take minutes.
func fill(b *testing.B, db *DB, n int, mk func(i int) *prompt.Prompt) {
	b.Helper()
	ctx := context.Background()
	err := db.write(ctx, func(tx *sql.Tx) error {
		for i := range n {
			if err := db.createPrompt(ctx, tx, mk(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSavePrompt measures the save a step makes after one item of a
// long prompt changed: the cost must not grow with the prompt's length.
func BenchmarkSavePrompt(b *testing.B) {
	for _, n := range []int{1, 200} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := benchDB(b)
			p := benchPrompt("p_bench", "conv", n)
			if err := db.CreatePrompt(ctx, p); err != nil {
				b.Fatal(err)
			}
			last := []int{n - 1}
			call := p.Output[n-1].Call
			b.ReportAllocs()
			for b.Loop() {
				p.Rev++
				p.UpdatedAt = p.UpdatedAt.Add(time.Second)
				if call.Status == prompt.CallPending {
					call.Status = prompt.CallExecuting
				} else {
					call.Status = prompt.CallPending
				}
				if err := db.SavePrompt(ctx, p, last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecover measures a start that finds 100,000 prompts waiting for
// approval, each in its own conversation: until the service is ready to
// take presses (Recover returned, its first page of waiting requests
// read), and the heap it then holds per waiting prompt.
func BenchmarkRecover(b *testing.B) {
	const waiting = 100000
	b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
		ctx := context.Background()
		db := benchDB(b)
		fill(b, db, waiting, func(i int) *prompt.Prompt {
			return benchPrompt(fmt.Sprintf("p%06d", i), fmt.Sprint("conv", i), 4)
		})
		model := prompt.ModelFunc(func(context.Context, prompt.Request) (prompt.Response, error) {
			return prompt.Response{Text: "done"}, nil
		})
		var perWaiting float64
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			svc, err := prompt.NewService(prompt.Config{Model: model, Store: db})
			if err != nil {
				b.Fatal(err)
			}
			w, err := svc.Recover(ctx)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perWaiting = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / waiting
			runtime.KeepAlive(w)
			if err := svc.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(perWaiting, "B/waiting")
	})
}

// BenchmarkDecide measures decisions as compare-and-set writes on SQLite,
// each its own synced transaction, as a press makes them.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	db := benchDB(b)
	fill(b, db, b.N, func(i int) *prompt.Prompt {
		return benchPrompt(fmt.Sprintf("p%09d", i), fmt.Sprint("conv", i), 2)
	})
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("%.10s%06d", fmt.Sprintf("p%09d", i)+"xxxxxxxxxx", 1)
		if _, err := db.Decide(ctx, id, prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: now}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkRoundTrip measures create → pause → approve → completed through
// the service on SQLite on disk, every step a synced compare-and-set.
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	db := benchDB(b)
	tool, err := prompt.NewTool("test.gated", "asks first", prompt.AlwaysFor[struct{}]("risky"),
		func(context.Context, struct{}) (string, error) { return "ok", nil })
	if err != nil {
		b.Fatal(err)
	}
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		if len(req.Messages) == 1 {
			return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "test.gated", Arguments: `{}`}}}, nil
		}
		return prompt.Response{Text: "done"}, nil
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db, Tools: []*prompt.Tool{tool}, HistoryLimit: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(ctx)
	asked := make(chan string, 1)
	ended := make(chan prompt.Answer, 1)
	svc.OnApprovalRequested(func(_ context.Context, req prompt.ApprovalRequest) { asked <- req.ApprovalID })
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A fresh conversation each time keeps history from growing.
		if _, err := svc.Create(ctx, fmt.Sprint("conv", i), "go"); err != nil {
			b.Fatal(err)
		}
		if err := svc.Approve(ctx, <-asked, "alice"); err != nil {
			b.Fatal(err)
		}
		if a := <-ended; a.State != prompt.StateCompleted {
			b.Fatalf("ended %s: %s", a.State, a.Error)
		}
	}
}
