package prompt_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// stallingHandler holds up the log record with message msg until release
// is closed or a short while passed: a caller goroutine that is slow
// between two steps, made so on purpose.
type stallingHandler struct {
	slog.Handler
	msg     string
	release <-chan struct{}
}

func (stallingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h stallingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case <-h.release:
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func TestTheDecisionIsReportedBeforeTheResumedLoopActs(t *testing.T) {
	// Listeners are told of changes in the order they were saved: the
	// decision's update must reach them before anything the resumed loop
	// does, however slow the deciding goroutine is.
	rec := &recorder{}
	toolRan := make(chan struct{})
	var once sync.Once
	tool, err := prompt.NewTool("test.gated", "echoes", prompt.AlwaysFor[echoIn]("risky"),
		func(ctx context.Context, in echoIn) (string, error) {
			rec.record("test.gated", in.Text)
			once.Do(func() { close(toolRan) })
			return "ok", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	mem := prompt.NewMemStore()
	svc, err := prompt.NewService(prompt.Config{
		Model: prompttest.NewModel(prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done")),
		Store: mem, Tools: []*prompt.Tool{tool},
		Logger: slog.New(stallingHandler{Handler: slog.DiscardHandler, msg: "approval decided", release: toolRan}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer svc.Close(ctx)
	reqs := make(chan prompt.ApprovalRequest, 1)
	svc.OnApprovalRequested(func(_ context.Context, _ *prompt.Completion, r prompt.ApprovalRequest) { reqs <- r })
	c, err := svc.Create(ctx, "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	req := <-reqs
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []prompt.CallStatus
	c.OnUpdated(func(_ context.Context, c *prompt.Completion) {
		p := c.Prompt()
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, callOf(t, p, "c1").Status)
	})
	if err := svc.Approve(ctx, req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != prompt.CallApproved {
		t.Fatalf("updates seen %v: the decision was not reported first", seen)
	}
	if len(rec.got()) != 1 {
		t.Fatalf("ran %v", rec.got())
	}
}

func TestAListenerMayDecideAndCancelOnTheLoopsGoroutine(t *testing.T) {
	// An auto-approving policy or a /cancel typed very fast both call back
	// into the completion from a listener; neither may deadlock.
	h := newHarness(t, opts{},
		prompttest.Calls(call("a", "test.gated", "1")),
		prompttest.Calls(call("b", "test.gated", "2")),
		prompttest.Answer("never"))
	var n int
	h.svc.OnApprovalRequested(func(ctx context.Context, c *prompt.Completion, req prompt.ApprovalRequest) {
		n++
		if n == 1 {
			if err := c.Approve(ctx, req.ToolCallID, "policy"); err != nil {
				t.Errorf("approve from a listener: %v", err)
			}
			return
		}
		if err := c.Cancel(ctx, "alice"); err != nil {
			t.Errorf("cancel from a listener: %v", err)
		}
	})
	c, err := h.svc.Create(context.Background(), "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	p := h.waitEnded(c.ID())
	if p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("prompt = %s %q", p.State, p.Error)
	}
	if got := h.rec.got(); len(got) != 1 || got[0] != "test.gated:1" {
		t.Fatalf("ran %v", got)
	}
}

func TestCompletedListenersGetALiveContext(t *testing.T) {
	// A listener may do I/O with the ctx it is given (send the answer); a
	// prompt ended just after a Cancel must not hand it a cancelled one.
	started := make(chan struct{})
	tools := func(r *recorder) []*prompt.Tool {
		tool, err := prompt.NewTool("test.slow", "waits", nil, func(ctx context.Context, in echoIn) (string, error) {
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return []*prompt.Tool{tool}
	}
	h := newHarness(t, opts{tools: tools, store: func(m *prompt.MemStore) prompt.Store {
		return &failingStore{Store: m, fail: func(p *prompt.Prompt) error {
			for _, it := range p.Output {
				if it.Call != nil && it.Call.Status == prompt.CallDone {
					return errors.New("disk full")
				}
			}
			return nil
		}}
	}}, prompttest.Calls(call("c1", "test.slow", "x")))
	ctxErr := make(chan error, 1)
	h.svc.OnCompleted(func(ctx context.Context, _ *prompt.Completion) { ctxErr <- ctx.Err() })
	c, err := h.svc.Create(context.Background(), "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.Cancel(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	if err := <-ctxErr; err != nil {
		t.Fatalf("completed listener got a dead context: %v", err)
	}
}
