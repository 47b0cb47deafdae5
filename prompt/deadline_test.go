package prompt_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// manualClock is a clock a test moves by hand; a nil one is the real
// clock.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
}

func (c *manualClock) nowFunc() func() time.Time {
	if c == nil {
		return nil
	}
	return func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	}
}

func (c *manualClock) afterFunc() func(time.Duration, func()) func() bool {
	if c == nil {
		return nil
	}
	return func(d time.Duration, f func()) func() bool {
		c.mu.Lock()
		t := &manualTimer{at: c.now.Add(d), f: f}
		due := d <= 0
		if !due {
			c.timers = append(c.timers, t)
		}
		c.mu.Unlock()
		if due {
			go f()
		}
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			was := !t.stopped
			t.stopped = true
			return was
		}
	}
}

// advance moves the clock by d and fires the timers that fall due.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

func TestARequestNotDecidedInTimeExpires(t *testing.T) {
	clock := newManualClock()
	h := newHarness(t, opts{timeout: 30 * time.Minute, clock: clock},
		prompttest.Calls(call("c1", "test.gated", "x")),
		prompttest.Step{Text: "I will not do it, then.", Check: func(req prompt.Request) error {
			if last := req.Messages[len(req.Messages)-1]; last.Text != "Error: no decision within 30m: not run" {
				return errors.New("the model was shown " + last.Text)
			}
			return nil
		}})
	id := h.create("go")
	req := h.request()
	clock.advance(29 * time.Minute)
	nothingOn(t, h.ended, "the request expired early")
	clock.advance(time.Minute)
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.State != prompt.StateCompleted {
		t.Fatalf("ended %+v", a)
	}
	ref, err := h.svc.LookupApproval(context.Background(), req.ApprovalID)
	if err != nil || ref.Status != prompt.ApprovalExpired || ref.Note != "no decision within 30m" || ref.DecidedBy != "" {
		t.Fatalf("approval after expiry: %+v, %v", ref, err)
	}
	if err := h.svc.Approve(context.Background(), req.ApprovalID, "alice"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("a press after expiry: %v, want ErrNotPending", err)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("the expired call ran")
	}
	if got := kinds(h.mem, id); len(got) != 3 || got[1] != "decided "+req.ApprovalID {
		t.Fatalf("outbox %v: want the request, its expiry for every copy, the answer", got)
	}
}

func TestADeadlineThatPassedWhileDownExpiresAtStart(t *testing.T) {
	clock := newManualClock()
	mem := prompttest.NewStore()
	first := newHarness(t, opts{mem: mem, timeout: time.Hour, clock: clock, noClose: true},
		prompttest.Calls(call("c1", "test.gated", "x")))
	id := first.create("go")
	req := first.request()
	if err := first.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Hour) // nobody ran meanwhile
	next := newHarness(t, opts{mem: mem, timeout: time.Hour, clock: clock}, prompttest.Answer("ok, not then"))
	if _, err := next.svc.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	next.endAs(id, prompt.StateCompleted)
	if ref, _ := next.svc.LookupApproval(context.Background(), req.ApprovalID); ref.Status != prompt.ApprovalExpired {
		t.Fatalf("approval = %+v", ref)
	}
}

func TestAReminderShowsAWaitingRequestOnce(t *testing.T) {
	clock := newManualClock()
	h := newHarness(t, opts{remind: 10 * time.Minute, clock: clock}, prompttest.Calls(call("c1", "test.gated", "x")))
	h.create("go")
	req := h.request()
	resends := func() int {
		n := 0
		for _, e := range h.mem.Outbox() {
			if e.Resend && e.ApprovalID == req.ApprovalID {
				n++
			}
		}
		return n
	}
	outbox := make(chan struct{}, 100)
	h.svc.OnOutbox(func() { outbox <- struct{}{} })
	clock.advance(10 * time.Minute)
	for resends() == 0 {
		waitFor(t, outbox) // fails the test if no reminder comes
	}
	// Once sent, the reminder is cleared in the row: nothing is left to
	// fire again, however far the clock moves.
	if a := callOf(t, h.stored(req.PromptID), "c1").Approval; !a.RemindAt.IsZero() {
		t.Fatalf("remind_at still %v after the reminder", a.RemindAt)
	}
	clock.advance(time.Hour)
	if n := resends(); n != 1 {
		t.Fatalf("%d reminders, want one", n)
	}
	if ref, _ := h.svc.LookupApproval(context.Background(), req.ApprovalID); ref.Status != prompt.ApprovalPending {
		t.Fatalf("a reminder changed the approval: %+v", ref)
	}
}
