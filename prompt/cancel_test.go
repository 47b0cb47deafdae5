package prompt_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// ctxStore refuses to write once ctx is done, as database/sql does: a store
// that ignores ctx (MemStore) hides every save made with a cancelled one.
type ctxStore struct{ prompt.Store }

func (s ctxStore) SavePrompt(ctx context.Context, p *prompt.Prompt) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.SavePrompt(ctx, p)
}

func (s ctxStore) DecideApproval(ctx context.Context, p *prompt.Prompt, callID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.DecideApproval(ctx, p, callID)
}

func TestCancelBeforeTheLoopStartsEndsThePrompt(t *testing.T) {
	// The bot's /cancel runs on its own goroutine and may land between
	// Create's save and the start of the loop; an OnCreated listener is
	// exactly there.
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done"))
	var cancelErr error
	h.svc.OnCreated(func(ctx context.Context, c *prompt.Completion) { cancelErr = c.Cancel(ctx, "alice") })
	c := h.create("go")
	if cancelErr != nil {
		t.Fatalf("cancel = %v", cancelErr)
	}
	p := wantState(t, c, prompt.StateFailed)
	if p.Error != "Cancelled by alice." {
		t.Fatalf("error = %q", p.Error)
	}
	if n := len(h.model.Requests()); n != 0 || len(h.rec.got()) != 0 {
		t.Fatalf("cancelled prompt ran: %d model turns, tools %v", n, h.rec.got())
	}
	if stored, _ := h.mem.Prompt(c.ID()); stored.State != prompt.StateFailed {
		t.Fatalf("stored state = %s", stored.State)
	}
	if h.svc.ActiveIn("conv-1") != nil {
		t.Fatal("cancelled prompt still active")
	}
}

func TestCancelWhileAToolRunsEndsAsCancelledWithADatabaseLikeStore(t *testing.T) {
	started := make(chan struct{})
	tools := func(r *recorder) []*prompt.Tool {
		tool, err := prompt.NewTool("test.slow", "waits", nil, func(ctx context.Context, in echoIn) (string, error) {
			r.record("test.slow", in.Text)
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return []*prompt.Tool{tool}
	}
	h := newHarness(t, opts{tools: tools, store: func(m *prompt.MemStore) prompt.Store { return ctxStore{m} }},
		prompttest.Calls(call("c1", "test.slow", "x")), prompttest.Answer("never"))
	c, err := h.svc.Create(context.Background(), "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.Cancel(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	stored, err := h.mem.Prompt(c.ID())
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != prompt.StateFailed || stored.Error != "Cancelled by alice." {
		t.Fatalf("stored = %s %q, want failed as cancelled (not a save failure)", stored.State, stored.Error)
	}
	if cl := callOf(t, stored, "c1"); cl.Status != prompt.CallDone || cl.Result == nil || cl.Result.Type != prompt.ResultError {
		t.Fatalf("call = %+v: the tool's result was not recorded", cl)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("model turns = %d, want 1", n)
	}
}

func TestCancelDuringTheGateNeverPauses(t *testing.T) {
	// The gate is where the loop is when Cancel lands; the gate ignores ctx
	// and says "required": the loop must end, not ask a human.
	inGate, release := make(chan struct{}), make(chan struct{})
	tools := func(r *recorder) []*prompt.Tool {
		return []*prompt.Tool{r.tool(t, "test.gated", func(context.Context, echoIn) (prompt.Requirement, error) {
			close(inGate)
			<-release
			return prompt.Requirement{Required: true, Reason: "risky"}, nil
		})}
	}
	h := newHarness(t, opts{tools: tools}, prompttest.Calls(call("c1", "test.gated", "x")))
	c, err := h.svc.Create(context.Background(), "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	<-inGate
	if err := c.Cancel(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.wait(c)
	p := wantState(t, c, prompt.StateFailed)
	if p.Error != "Cancelled by alice." || len(h.approvals()) != 0 {
		t.Fatalf("error %q, approvals %v", p.Error, h.approvals())
	}
}

func TestFailedCancelRacesNoReader(t *testing.T) {
	var failing atomic.Bool
	h := newHarness(t, opts{store: func(m *prompt.MemStore) prompt.Store {
		return &failingDecide{Store: m, fail: &failing}
	}}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	failing.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	reading := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			if i == 1 {
				close(reading)
			}
			select {
			case <-stop:
				return
			default:
			}
			// What listeners and the bot call without any lock of theirs.
			if c.ID() == "" || c.ConversationID() != "conv-1" {
				t.Error("identity changed")
				return
			}
		}
	}()
	<-reading
	for range 200 {
		if err := c.Cancel(context.Background(), "alice"); err == nil {
			t.Fatal("cancel succeeded although nothing was saved")
		}
	}
	close(stop)
	wg.Wait()
	wantState(t, c, prompt.StateWaiting)
}
