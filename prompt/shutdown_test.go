package prompt_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// expired is a context whose deadline has passed: Close with it cancels
// whatever is under way at once.
func expired(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return ctx
}

// closing reports whether svc has begun to close, without side effects:
// conv is busy, so Create fails either way, with ErrClosed once closing.
func closing(t testing.TB, svc *prompt.Service, conv string) bool {
	_, err := svc.Create(context.Background(), conv, "probe")
	if err != nil && !errors.Is(err, prompt.ErrClosed) && !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("probe: %v", err)
	}
	return errors.Is(err, prompt.ErrClosed)
}

func TestCloseWaitsForARunningToolToFinish(t *testing.T) {
	rec := newRecorder()
	rec.block = make(chan struct{})
	h := newHarness(t, opts{rec: rec, noClose: true}, prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done"))
	id := h.create("go")
	waitFor(t, rec.started)
	closed := make(chan error, 1)
	go func() { closed <- h.svc.Close(context.Background()) }()
	until(t, "Close began", func() bool { return closing(t, h.svc, "conv-1") })
	nothingOn(t, closed, "Close returned while a tool ran")
	close(rec.block)
	if err := waitFor(t, closed); err != nil {
		t.Fatalf("close = %v", err)
	}
	// The pass went on to its end before Close returned.
	if p := h.stored(id); p.State != prompt.StateCompleted || callOf(t, p, "c1").Result.Output != "echo x" {
		t.Fatalf("stored after Close = %s %+v", p.State, callOf(t, p, "c1").Result)
	}
	if _, err := h.svc.Create(context.Background(), "conv-2", "x"); !errors.Is(err, prompt.ErrClosed) {
		t.Fatalf("create after close = %v, want ErrClosed", err)
	}
	if p, err := h.mem.ActivePrompt(context.Background(), "conv-2"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("a refused Create saved %+v", p)
	}
}

func TestCloseDeadlineLeavesAToolExecutingForTheNextStart(t *testing.T) {
	mem := prompttest.NewStore()
	rec := newRecorder()
	rec.block = make(chan struct{}) // only the shutdown ends the tool
	h := newHarness(t, opts{mem: mem, rec: rec, noClose: true}, prompttest.Calls(call("c1", "test.free", "x")))
	id := h.create("go")
	waitFor(t, rec.started)
	if err := h.svc.Close(expired(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close = %v, want deadline exceeded", err)
	}
	h.idle(id)
	p := h.stored(id)
	if c := callOf(t, p, "c1"); p.State != prompt.StateRunning || c.Status != prompt.CallExecuting || c.Result != nil {
		t.Fatalf("stored after the cut = %s / %+v, want running / executing", p.State, c)
	}
	nothingOn(t, h.ended, "a prompt cut by shutdown was reported ended")

	next := newHarness(t, opts{mem: mem}, prompttest.Answer("I could not tell"))
	if w := recoverNow(t, next); w.Resumed != 1 {
		t.Fatalf("resumed %d", w.Resumed)
	}
	p = next.endAs(id, prompt.StateCompleted)
	if c := callOf(t, p, "c1"); c.Status != prompt.CallInterrupted || c.Result.Error != prompt.InterruptedError {
		t.Fatalf("call = %+v %+v", c, c.Result)
	}
	if len(next.rec.got()) != 0 || len(rec.got()) != 1 {
		t.Fatalf("ran again: %v", next.rec.got())
	}
}

func TestCancelAfterADeadlineCutToolSaysOutcomeUnknown(t *testing.T) {
	// The tool cut by shutdown may have had its effect; a Cancel that ends
	// the prompt before any restart must not record it as not run.
	rec := newRecorder()
	rec.block = make(chan struct{})
	h := newHarness(t, opts{rec: rec, noClose: true}, prompttest.Calls(call("c1", "test.free", "x")))
	id := h.create("go")
	waitFor(t, rec.started)
	if err := h.svc.Close(expired(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close = %v", err)
	}
	// Closing again waits for the workers to let go: a Cancel that found
	// the worker still holding the prompt would leave its end to the next
	// start, as shutdown leaves every kick.
	if err := h.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	p := h.stored(id)
	if c := callOf(t, p, "c1"); p.State != prompt.StateFailed || p.Error != "Cancelled by alice." ||
		c.Status != prompt.CallInterrupted || c.Result.Error != prompt.InterruptedError {
		t.Fatalf("stored %s %q, call %s %+v", p.State, p.Error, c.Status, c.Result)
	}
}

func TestCloseDeadlineRedoesAModelTurn(t *testing.T) {
	mem := prompttest.NewStore()
	m := newBlockingModel()
	h := newHarness(t, opts{mem: mem, model: m, noClose: true})
	id := h.create("slow")
	waitFor(t, m.started)
	if err := h.svc.Close(expired(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close = %v", err)
	}
	h.idle(id)
	if p := h.stored(id); p.State != prompt.StateRunning || p.Turns != 0 || len(p.Output) != 0 {
		t.Fatalf("stored after the cut = %+v", p)
	}
	nothingOn(t, h.ended, "a cut model turn ended the prompt")

	next := newHarness(t, opts{mem: mem}, prompttest.Answer("done at last"))
	if w := recoverNow(t, next); w.Resumed != 1 {
		t.Fatalf("resumed %d", w.Resumed)
	}
	p := next.endAs(id, prompt.StateCompleted)
	if p.FinalText() != "done at last" || p.Turns != 1 {
		t.Fatalf("after restart: %q in %d turns", p.FinalText(), p.Turns)
	}
}

func TestADecisionDuringShutdownRunsOnceAtTheNextStart(t *testing.T) {
	mem := prompttest.NewStore()
	h := newHarness(t, opts{mem: mem, noClose: true}, prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	aid := h.request().ApprovalID
	h.idle(id)
	if err := h.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The press is saved, but nothing runs while shutting down.
	h.approve(aid)
	p := h.stored(id)
	if c := callOf(t, p, "c1"); p.State != prompt.StateRunning || c.Approval.Status != prompt.ApprovalApproved {
		t.Fatalf("stored = %s / %+v", p.State, c.Approval)
	}

	next := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
	if rec := recoverNow(t, next); rec.Resumed != 1 || rec.Resent != 0 {
		t.Fatalf("recovered %+v, want 1 resumed and nothing re-sent", rec)
	}
	next.endAs(id, prompt.StateCompleted)
	if got := next.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) || len(h.rec.got()) != 0 {
		t.Fatalf("ran %v here and %v before the restart", got, h.rec.got())
	}
}

func TestCancelAfterADecisionDuringShutdownEndsThePrompt(t *testing.T) {
	h := newHarness(t, opts{noClose: true}, prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	aid := h.request().ApprovalID
	h.idle(id)
	if err := h.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.approve(aid)
	// Running with no worker: the Cancel must not be a silent no-op.
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	// No worker had it: ended before Cancel returned.
	p := h.stored(id)
	if p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("stored = %s %q", p.State, p.Error)
	}
	if a := waitFor(t, h.ended); a.PromptID != id || a.State != prompt.StateFailed {
		t.Fatalf("ended = %+v", a)
	}
	// The approval is the audit trail: "approved by alice, done" must not
	// read as if the tool ran.
	if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result.Error != "not run: Cancelled by alice." ||
		c.Approval.DecidedBy != "alice" || c.Approval.Note != "not run: Cancelled by alice." {
		t.Fatalf("call = %+v %+v, approval %+v", c, c.Result, c.Approval)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

// closeOnSave shuts the service down, its deadline already passed, just
// as a pass saves a call in status: the save itself must still land.
type closeOnSave struct {
	prompt.Store
	svc    func() *prompt.Service
	status prompt.CallStatus
	done   atomic.Bool
}

func (s *closeOnSave) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	for _, it := range p.Output {
		if it.Call != nil && it.Call.Status == s.status && s.done.CompareAndSwap(false, true) {
			expired, cancel := context.WithCancel(context.Background())
			cancel()
			_ = s.svc().Close(expired)
		}
	}
	return s.Store.SavePrompt(ctx, p, changed, notices...)
}

func TestShutdownDuringASaveLeavesThePromptForTheNextStart(t *testing.T) {
	for _, status := range []prompt.CallStatus{prompt.CallQueued, prompt.CallExecuting} {
		t.Run(string(status), func(t *testing.T) {
			mem := prompttest.NewStore()
			var h *harness
			st := &closeOnSave{svc: func() *prompt.Service { return h.svc }, status: status}
			h = newHarness(t, opts{mem: mem, noClose: true, wrap: func(s prompt.Store) prompt.Store { st.Store = s; return st }},
				prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done"))
			id := h.create("go")
			h.idle(id)
			p := h.stored(id)
			nothingOn(t, h.ended, "a prompt cut by shutdown ended")
			// The tool never started: the next start may run it, so it must
			// not be stored as "may have run".
			if c := callOf(t, p, "c1"); p.State != prompt.StateRunning || c.Status != prompt.CallQueued || len(h.rec.got()) != 0 {
				t.Fatalf("stored %s, call %s, ran %v", p.State, c.Status, h.rec.got())
			}
			next := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
			recoverNow(t, next)
			next.endAs(id, prompt.StateCompleted)
			if got := next.rec.got(); !reflect.DeepEqual(got, []string{"test.free:x"}) {
				t.Fatalf("ran %v at the next start", got)
			}
		})
	}
}
