package prompt_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestDecidingAnUnknownApprovalIsNotFound(t *testing.T) {
	h := newHarness(t, opts{})
	ctx := context.Background()
	if err := h.svc.Approve(ctx, "aaaaaaaaaaaaaaaa", "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("approve = %v, want ErrNotFound", err)
	}
	if err := h.svc.Reject(ctx, "aaaaaaaaaaaaaaaa", "no", "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("reject = %v, want ErrNotFound", err)
	}
	if _, err := h.svc.LookupApproval(ctx, "aaaaaaaaaaaaaaaa"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("lookup = %v, want ErrNotFound", err)
	}
}

func TestASecondDecisionIsNotPendingAndChangesNothing(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	id := h.create("go")
	aid := h.request().ApprovalID
	h.approve(aid)
	before := h.endAs(id, prompt.StateCompleted)
	ctx := context.Background()
	if err := h.svc.Reject(ctx, aid, "late", "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("late reject = %v, want ErrNotPending", err)
	}
	if err := h.svc.Approve(ctx, aid, "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("late approve = %v, want ErrNotPending", err)
	}
	if after := h.stored(id); !reflect.DeepEqual(before, after) || len(h.rec.got()) != 1 {
		t.Fatalf("prompt changed:\n%+v\n%+v", before, after)
	}
	ref, err := h.svc.LookupApproval(ctx, aid)
	if err != nil || ref.Status != prompt.ApprovalApproved || ref.DecidedBy != "alice" {
		t.Fatalf("lookup = %+v, %v", ref, err)
	}
	nothingOn(t, h.ended, "a late decision ended the prompt again")
}

func TestDecisionRaceHasOneWinnerAndRunsTheToolAtMostOnce(t *testing.T) {
	for round := range 5 {
		h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "once")), prompttest.Answer("done"))
		id := h.create("go")
		aid := h.request().ApprovalID
		var wg sync.WaitGroup
		var approved, rejected, notPending atomic.Int32
		start := make(chan struct{})
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					err = h.svc.Approve(context.Background(), aid, "alice")
				} else {
					err = h.svc.Reject(context.Background(), aid, "no", "bob")
				}
				switch {
				case err == nil && i%2 == 0:
					approved.Add(1)
				case err == nil:
					rejected.Add(1)
				case errors.Is(err, prompt.ErrNotPending):
					notPending.Add(1)
				default:
					t.Errorf("decide: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if approved.Load()+rejected.Load() != 1 || notPending.Load() != 99 {
			t.Fatalf("round %d: approved %d, rejected %d, not pending %d", round, approved.Load(), rejected.Load(), notPending.Load())
		}
		p := h.endAs(id, prompt.StateCompleted)
		cl := callOf(t, p, "c1")
		ran := len(h.rec.got())
		if approved.Load() == 1 {
			if ran != 1 || cl.Status != prompt.CallDone || cl.Approval.Status != prompt.ApprovalApproved || cl.Approval.DecidedBy != "alice" {
				t.Fatalf("round %d: approve won, ran %d, call %+v %+v", round, ran, cl, cl.Approval)
			}
		} else if ran != 0 || cl.Status != prompt.CallRejected || cl.Approval.DecidedBy != "bob" {
			t.Fatalf("round %d: reject won, ran %d, call %+v %+v", round, ran, cl, cl.Approval)
		}
		nothingOn(t, h.ended, "a second ended event")
	}
}

func TestADecisionNeedsNothingInMemory(t *testing.T) {
	// The press lands on a process that never saw the prompt and did not
	// Recover: the decision is in the store, and the kick starts a worker.
	mem := prompttest.NewStore()
	first := newHarness(t, opts{mem: mem, noClose: true}, prompttest.Calls(call("c1", "test.gated", "x")))
	id := first.create("go")
	aid := first.request().ApprovalID
	first.idle(id)
	if err := first.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
	second.approve(aid)
	p := second.endAs(id, prompt.StateCompleted)
	if got := second.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) || len(first.rec.got()) != 0 {
		t.Fatalf("second ran %v, first ran %v", got, first.rec.got())
	}
	if c := callOf(t, p, "c1"); c.Result.Output != "echo x" || p.FinalText() != "done" {
		t.Fatalf("call %+v, text %q", c, p.FinalText())
	}
}

// failingDecide fails Decide and CancelPrompt while fail is set.
type failingDecide struct {
	prompt.Store
	fail *atomic.Bool
}

func (f *failingDecide) Decide(ctx context.Context, id string, d prompt.Decision) (prompt.ApprovalRef, error) {
	if f.fail.Load() {
		return prompt.ApprovalRef{}, errors.New("database is locked")
	}
	return f.Store.Decide(ctx, id, d)
}

func (f *failingDecide) CancelPrompt(ctx context.Context, id, by string, at time.Time) error {
	if f.fail.Load() {
		return errors.New("database is locked")
	}
	return f.Store.CancelPrompt(ctx, id, by, at)
}

func TestADecisionThatCannotBeSavedChangesNothing(t *testing.T) {
	var failing atomic.Bool
	h := newHarness(t, opts{wrap: func(s prompt.Store) prompt.Store { return &failingDecide{Store: s, fail: &failing} }},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	id := h.create("go")
	aid := h.request().ApprovalID
	h.idle(id)
	before := h.stored(id)
	failing.Store(true)
	if err := h.svc.Approve(context.Background(), aid, "alice"); err == nil {
		t.Fatal("approve succeeded although nothing was saved")
	}
	if err := h.svc.Cancel(context.Background(), id, "alice"); err == nil {
		t.Fatal("cancel succeeded although nothing was saved")
	}
	if after := h.stored(id); !reflect.DeepEqual(before, after) || len(h.rec.got()) != 0 {
		t.Fatalf("a failed decision changed the prompt:\n%+v\n%+v", before, after)
	}
	failing.Store(false)
	h.approve(aid)
	h.endAs(id, prompt.StateCompleted)
}
