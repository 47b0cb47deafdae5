package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// benchPrompt is a waiting prompt of n output items, half assistant text
// and half finished tool calls, the last one pending.
func benchPrompt(id, conv string, n int) *prompt.Prompt {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	p := &prompt.Prompt{ID: id, ConversationID: conv, State: prompt.StateWaiting, Input: "clean up the server",
		Turns: n, Rev: 1, CreatedAt: now, UpdatedAt: now}
	for i := range n {
		it := prompt.Item{Type: prompt.ItemText, Turn: i + 1, Rev: 1, Text: "Looking at the next folder, then I will decide."}
		if i%2 == 1 || i == n-1 {
			it = prompt.Item{Type: prompt.ItemTool, Turn: i + 1, Rev: 1, Call: &prompt.Call{
				ID: fmt.Sprint("call", i), Name: "shell.run", Arguments: `{"cmd":"du -sh /var/log"}`,
				Status: prompt.CallDone,
				Approval: &prompt.Approval{ID: fmt.Sprintf("%.10s%06d", id+"xxxxxxxxxx", i), Reason: "runs a command",
					RequestedAt: now, DecidedBy: "alice", DecidedAt: now},
				Result: &prompt.Result{Type: prompt.ResultSuccess, Output: "1.2G\t/var/log"},
			}}
		}
		p.Output = append(p.Output, it)
	}
	last := p.Output[n-1].Call
	last.Status = prompt.CallPending
	last.Approval.DecidedBy, last.Approval.DecidedAt = "", time.Time{}
	last.Result = &prompt.Result{Type: prompt.ResultPending, Reason: "runs a command"}
	return p
}

// BenchmarkSavePrompt measures the save after one item of a long prompt
// changed, as the service makes it: the cost must not grow with length.
func BenchmarkSavePrompt(b *testing.B) {
	for _, n := range []int{1, 50, 200} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			p := benchPrompt("p_bench", "conv", n)
			if err := db.SavePrompt(ctx, p); err != nil {
				b.Fatal(err)
			}
			call := p.Output[n-1].Call
			for b.Loop() {
				p.Rev++
				p.UpdatedAt = p.UpdatedAt.Add(time.Second)
				p.Output[n-1].Rev = p.Rev
				if call.Status == prompt.CallPending {
					call.Status = prompt.CallExecuting
				} else {
					call.Status = prompt.CallPending
				}
				if err := db.SavePrompt(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecover measures a start-up that finds 10,000 prompts waiting
// for approval, each in its own conversation, with none or two finished
// prompts before it that the service loads as history: load, rebuild,
// register and re-emit every request.
func BenchmarkRecover(b *testing.B) {
	for _, history := range []int{0, 2} {
		b.Run(fmt.Sprintf("waiting=10000/history=%d", history), func(b *testing.B) {
			benchmarkRecover(b, 10000, history)
		})
	}
}

func benchmarkRecover(b *testing.B, waiting, history int) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	// One transaction for the set-up: 30,000 synced commits would take minutes.
	err = db.write(ctx, func(tx *sql.Tx) error {
		for i := range waiting {
			conv := fmt.Sprint("conv", i)
			for j := range history {
				old := benchPrompt(fmt.Sprintf("p%05dold%d", i, j), conv, 4)
				old.State = prompt.StateCompleted
				old.Output[3].Call.Status = prompt.CallDone
				old.Output[3].Call.Result = &prompt.Result{Type: prompt.ResultSuccess, Output: "ok"}
				if err := db.savePrompt(ctx, tx, old); err != nil {
					return err
				}
			}
			if err := db.savePrompt(ctx, tx, benchPrompt(fmt.Sprintf("p%05dnew", i), conv, 4)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	type input struct {
		Cmd string `json:"cmd"`
	}
	tool, err := prompt.NewTool("shell.run", "runs a command", prompt.AlwaysFor[input]("runs a command"),
		func(ctx context.Context, in input) (string, error) { return "", nil })
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: db, Tools: []*prompt.Tool{tool}})
		if err != nil {
			b.Fatal(err)
		}
		requests := 0
		svc.OnApprovalRequested(func(context.Context, *prompt.Completion, prompt.ApprovalRequest) { requests++ })
		n, err := svc.Recover(ctx)
		if err != nil || n != waiting || requests != waiting {
			b.Fatalf("recovered %d, %d requests, %v", n, requests, err)
		}
		if err := svc.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
