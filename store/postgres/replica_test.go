package postgres_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
	"tollgate/store/pgtest"
	"tollgate/store/postgres"
)

// clock is a clock the test moves; both replicas share it.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

type timer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// advance moves the clock by d and fires the timers that fall due.
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
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

var errDead = errors.New("replica is dead")

// mortalDB is a replica's handle on the database that fails, once the
// replica is dead, for everything a dead process would no longer do:
// save, and hold leases.
type mortalDB struct {
	*postgres.DB
	dead *atomic.Bool
}

func (m mortalDB) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	if m.dead.Load() {
		return errDead
	}
	return m.DB.SavePrompt(ctx, p, changed, notices...)
}

func (m mortalDB) Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if m.dead.Load() {
		return false, errDead
	}
	return m.DB.Lease(ctx, name, holder, now, ttl)
}

func (m mortalDB) Release(ctx context.Context, name, holder string) error {
	if m.dead.Load() {
		return errDead
	}
	return m.DB.Release(ctx, name, holder)
}

func (m mortalDB) LeaseHolder(ctx context.Context, name string, now time.Time) (string, time.Time, error) {
	if m.dead.Load() {
		return "", time.Time{}, errDead
	}
	return m.DB.LeaseHolder(ctx, name, now)
}

// TestAReplicaTakesOverAPromptWhoseReplicaDied: replica A dies while a
// call runs; once A's lease lapses, replica B, on its own connection to
// the same database, marks the call "outcome unknown" and finishes the
// prompt, and the tool has run once.
func TestAReplicaTakesOverAPromptWhoseReplicaDied(t *testing.T) {
	const ttl = 30 * time.Second
	ctx := context.Background()
	url := pgtest.URL(t)
	clk := &clock{now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}
	var runs atomic.Int64
	started := make(chan struct{}, 10)
	type input struct {
		N int `json:"n"`
	}
	tool, err := prompt.NewTool("test.run", "runs once", nil, func(ctx context.Context, _ input) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		<-ctx.Done() // only A's death ends it
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	service := func(name string, st prompt.Store, model prompt.Model) *prompt.Service {
		svc, err := prompt.NewService(prompt.Config{Model: model, Store: st, Leases: st.(prompt.Leases), Tools: []*prompt.Tool{tool},
			Replica: name, LeaseTTL: ttl, Now: clk.Now, AfterFunc: clk.AfterFunc})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}

	// Each replica has its own connections to the one database.
	handle := func() *postgres.DB {
		db, err := postgres.Open(ctx, url, postgres.WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	b := service("b", handle(), prompttest.NewModel(prompttest.Answer("I could not tell")))
	t.Cleanup(func() {
		if err := b.Close(ctx); err != nil {
			t.Errorf("close b: %v", err)
		}
	})
	ended := make(chan prompt.Answer, 1)
	b.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	if _, err := b.Recover(ctx); err != nil { // B's start: nothing to resume
		t.Fatal(err)
	}

	adb := handle()
	dead := new(atomic.Bool)
	// A is never closed: it dies.
	a := service("a", mortalDB{DB: adb, dead: dead},
		prompttest.NewModel(prompttest.Calls(prompttest.Call("c1", "test.run", `{"n":1}`))))
	c, err := a.Create(ctx, "conv-1", "go")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool did not start on A")
	}
	dead.Store(true)
	clk.advance(ttl)

	var ans prompt.Answer
	select {
	case ans = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("B did not take the prompt over")
	}
	if ans.PromptID != c.PromptID || ans.Text != "I could not tell" {
		t.Fatalf("answer = %+v", ans)
	}
	p, err := adb.LoadPrompt(ctx, c.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	call := p.Output[0].Call
	if call.Status != prompt.CallInterrupted || call.Result.Error != prompt.InterruptedError {
		t.Fatalf("call = %s %+v", call.Status, call.Result)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}
