package prompt_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestRecoverLeavesPromptsAlreadyActiveAlone(t *testing.T) {
	// A prompt created in this process is "running" in the store too; a
	// Recover that picked it up would run a second loop on it.
	var turns atomic.Int32
	release := make(chan struct{})
	model := prompt.ModelFunc(func(ctx context.Context, _ prompt.Request) (prompt.Response, error) {
		turns.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return prompt.Response{}, ctx.Err()
		}
		return prompt.Response{Text: "done"}, nil
	})
	mem := prompt.NewMemStore()
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	c, err := svc.Create(context.Background(), "conv", "hi")
	if err != nil {
		t.Fatal(err)
	}
	n, err := svc.Recover(context.Background())
	if err != nil || n != 0 {
		t.Errorf("recover = %d, %v; want 0 (the only prompt is already active)", n, err)
	}
	if svc.GetActive(c.ID()) != c {
		t.Error("recover replaced the active completion")
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := turns.Load(); got != 1 {
		t.Fatalf("model turns = %d, want 1", got)
	}
}

// historyFails fails History for one prompt.
type historyFails struct {
	prompt.Store
	before string
}

func (s historyFails) History(ctx context.Context, conv, beforeID string, limit int) ([]*prompt.Prompt, error) {
	if beforeID == s.before {
		return nil, errors.New("disk read error")
	}
	return s.Store.History(ctx, conv, beforeID, limit)
}

func TestFailedRecoverRegistersNothingAndCanBeRetried(t *testing.T) {
	mem := prompt.NewMemStore()
	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("a", "test.gated", "1")), prompttest.Calls(call("b", "test.gated", "2")))
	h.create("one")
	c2, err := h.svc.Create(context.Background(), "conv-2", "two")
	if err != nil {
		t.Fatal(err)
	}
	h.wait(c2)

	var fail atomic.Bool
	fail.Store(true)
	h2 := newHarness(t, opts{mem: mem, store: func(m *prompt.MemStore) prompt.Store {
		return &switchable{Store: m, bad: historyFails{Store: m, before: c2.ID()}, fail: &fail}
	}}, prompttest.Answer("done"), prompttest.Answer("done"))
	if _, err := h2.svc.Recover(context.Background()); err == nil {
		t.Fatal("recover succeeded although a history read failed")
	}
	if c := h2.svc.ActiveIn("conv-1"); c != nil {
		t.Fatal("a failed Recover left a completion registered that nobody announced or runs")
	}
	fail.Store(false)
	n, err := h2.svc.Recover(context.Background())
	if err != nil || n != 2 || len(h2.approvals()) != 2 {
		t.Fatalf("retry = %d, %v, %d requests", n, err, len(h2.approvals()))
	}
}

type switchable struct {
	prompt.Store
	bad  prompt.Store
	fail *atomic.Bool
}

func (s *switchable) History(ctx context.Context, conv, beforeID string, limit int) ([]*prompt.Prompt, error) {
	if s.fail.Load() {
		return s.bad.History(ctx, conv, beforeID, limit)
	}
	return s.Store.History(ctx, conv, beforeID, limit)
}

func TestDecisionDuringShutdownRunsOnceAtTheNextStart(t *testing.T) {
	mem := prompt.NewMemStore()
	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The press is recorded, but no loop starts while shutting down.
	if err := h.svc.Approve(ctx, h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	if len(h.rec.got()) != 0 {
		t.Fatal("a tool ran during shutdown")
	}
	stored, _ := mem.Prompt(c.ID())
	if cl := callOf(t, stored, "c1"); stored.State != prompt.StateRunning || cl.Status != prompt.CallApproved {
		t.Fatalf("stored = %s / %s, want running / approved", stored.State, cl.Status)
	}

	h2 := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
	if n, err := h2.svc.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover = %d, %v", n, err)
	}
	if p := h2.waitEnded(c.ID()); p.State != prompt.StateCompleted {
		t.Fatalf("state = %s", p.State)
	}
	if got := h2.rec.got(); len(got) != 1 {
		t.Fatalf("ran %v", got)
	}
}

func TestCancelAfterADecisionDuringShutdownEndsThePrompt(t *testing.T) {
	mem := prompt.NewMemStore()
	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("c1", "test.gated", "x")))
	c := h.create("go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Approve(ctx, h.approvals()[0].ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	// Running with no loop: the Cancel must not be a silent no-op.
	if err := c.Cancel(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	stored, _ := mem.Prompt(c.ID())
	if stored.State != prompt.StateFailed || stored.Error != "Cancelled by alice." {
		t.Fatalf("stored = %s %q", stored.State, stored.Error)
	}
	if cl := callOf(t, stored, "c1"); cl.Status != prompt.CallDone || cl.Result.Type != prompt.ResultError {
		t.Fatalf("approved call = %+v", cl)
	}
	// The approval is the audit trail: "approved by alice, done" must not
	// read as if the tool ran.
	if cl := callOf(t, stored, "c1"); cl.Approval.DecidedBy != "alice" || cl.Approval.Note != "not run: Cancelled by alice." {
		t.Fatalf("approval = %+v", cl.Approval)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

// closeOnSave shuts the service down, its deadline already passed, just as
// the loop saves a call as status, then saves as a database would: with a
// context that is now cancelled.
type closeOnSave struct {
	prompt.Store
	svc    func() *prompt.Service
	status prompt.CallStatus
	done   atomic.Bool
}

func (s *closeOnSave) SavePrompt(ctx context.Context, p *prompt.Prompt) error {
	for _, it := range p.Output {
		if it.Call != nil && it.Call.Status == s.status && s.done.CompareAndSwap(false, true) {
			expired, cancel := context.WithCancel(context.Background())
			cancel()
			_ = s.svc().Close(expired)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.SavePrompt(ctx, p)
}

func TestShutdownDuringASaveLeavesThePromptForTheNextStart(t *testing.T) {
	for _, status := range []prompt.CallStatus{prompt.CallQueued, prompt.CallExecuting} {
		t.Run(string(status), func(t *testing.T) {
			mem := prompt.NewMemStore()
			var h *harness
			st := &closeOnSave{svc: func() *prompt.Service { return h.svc }, status: status}
			h = newHarness(t, opts{mem: mem, store: func(m *prompt.MemStore) prompt.Store { st.Store = m; return st }},
				prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done"))
			c := h.create("go")
			stored, _ := mem.Prompt(c.ID())
			h.mu.Lock()
			ended := len(h.done)
			h.mu.Unlock()
			if stored.State != prompt.StateRunning || ended != 0 {
				t.Fatalf("after a shutdown: stored %s %q, %d ended events; want running, for the next start",
					stored.State, stored.Error, ended)
			}
			// The tool never started: the next start may run it, so it
			// must not be stored as "may have run".
			if cl := callOf(t, stored, "c1"); cl.Status == prompt.CallExecuting || len(h.rec.got()) != 0 {
				t.Fatalf("call %s, tool runs %v", cl.Status, h.rec.got())
			}
		})
	}
}

func TestMemStoreRefusesAStaleRevisionAsADatabaseDoes(t *testing.T) {
	// Otherwise the core's tests, which run on MemStore, could not see a
	// change saved without a higher Rev, which store.DB refuses.
	ctx := context.Background()
	m := prompt.NewMemStore()
	p := &prompt.Prompt{ID: "p1", ConversationID: "c", State: prompt.StateRunning, Rev: 2}
	if err := m.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int64{2, 1} {
		q := p.Clone()
		q.Rev, q.Input = rev, "overwritten"
		if err := m.SavePrompt(ctx, q); err == nil {
			t.Errorf("rev %d saved over rev 2", rev)
		}
	}
	if got, _ := m.Prompt("p1"); got.Input != "" || got.Rev != 2 {
		t.Fatalf("stored %+v", got)
	}
	p.Rev = 3
	if err := m.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
}
