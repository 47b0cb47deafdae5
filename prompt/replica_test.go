package prompt_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

const ttl = 30 * time.Second

// logs is a slog handler that hands every record to a channel, so a test
// can wait for what a goroutine of the service did.
type logs chan slog.Record

func (l logs) Enabled(context.Context, slog.Level) bool { return true }
func (l logs) Handle(_ context.Context, r slog.Record) error {
	l <- r
	return nil
}
func (l logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logs) WithGroup(string) slog.Handler      { return l }

func newLogs() (logs, *slog.Logger) {
	l := make(logs, 10000)
	return l, slog.New(l)
}

// next waits for the next record with message msg and returns its
// attributes.
func (l logs) next(t testing.TB, msg string) map[string]any {
	t.Helper()
	for {
		r := waitFor(t, (<-chan slog.Record)(l))
		if r.Message != msg {
			continue
		}
		attrs := map[string]any{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.Any()
			return true
		})
		return attrs
	}
}

const lookedForTakeover = "looked for prompts to take over"

var errDead = errors.New("replica is dead")

// deadLeases are a replica's leases that fail once it is dead: a dead
// process renews nothing.
type deadLeases struct {
	prompt.Leases
	dead *atomic.Bool
}

func (d deadLeases) Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if d.dead.Load() {
		return false, errDead
	}
	return d.Leases.Lease(ctx, name, holder, now, ttl)
}

func (d deadLeases) Release(ctx context.Context, name, holder string) error {
	if d.dead.Load() {
		return errDead
	}
	return d.Leases.Release(ctx, name, holder)
}

func (d deadLeases) LeaseHolder(ctx context.Context, name string, now time.Time) (string, time.Time, error) {
	if d.dead.Load() {
		return "", time.Time{}, errDead
	}
	return d.Leases.LeaseHolder(ctx, name, now)
}

// mortal returns the options of replica name on mem and clock, and a
// switch that kills it: from then on it saves nothing and holds no lease,
// as a process that died. It is never closed.
func mortal(name string, mem *prompttest.Store, clock *manualClock, rec *recorder) (opts, *atomic.Bool) {
	dead := new(atomic.Bool)
	return opts{
		mem: mem, clock: clock, rec: rec, replica: name, ttl: ttl, noClose: true,
		leases: deadLeases{Leases: mem, dead: dead},
		save: func(*prompt.Prompt, []int) error {
			if dead.Load() {
				return errDead
			}
			return nil
		},
	}, dead
}

// holder returns who holds prompt id's lease now.
func holder(t testing.TB, mem *prompttest.Store, clock *manualClock, id string) string {
	t.Helper()
	h, _, err := mem.LeaseHolder(context.Background(), "prompt:"+id, clock.nowFunc()())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// oneCallThenAnswer is a model for prompts advanced anywhere: it asks for
// one free call, then answers once it has the result. It counts its turns.
func oneCallThenAnswer(turns *atomic.Int64) prompt.Model {
	return prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		turns.Add(1)
		if last := req.Messages[len(req.Messages)-1]; last.Role == prompt.RoleTool {
			return prompt.Response{Text: "done"}, nil
		}
		return prompt.Response{ToolCalls: []prompt.ToolCall{call("c1", "test.free", "x")}}, nil
	})
}

func TestEachPromptIsAdvancedByOneReplicaWhenBothAreKicked(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	var turns atomic.Int64
	// One worker on A: prompts wait in its line, where B may take them.
	a := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "a", ttl: ttl, workers: 1, model: oneCallThenAnswer(&turns)})
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl, model: oneCallThenAnswer(&turns)})
	const n = 20
	for i := range n {
		a.createIn("conv-"+string(rune('a'+i)), "go")
		// B resumes what it finds running, racing A's workers: a prompt
		// A's pass holds is left alone; one still in A's line may be
		// taken by B, and A's pass then finds it held.
		if _, err := b.svc.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		select {
		case <-a.ended:
		case <-b.ended:
		case <-time.After(waitTimeout):
			t.Fatal("not every prompt ended")
		}
	}
	if got := turns.Load(); got != 2*n {
		t.Fatalf("%d model turns, want %d: a prompt was advanced twice at once", got, 2*n)
	}
	if got := len(rec.got()); got != n {
		t.Fatalf("the tool ran %d times for %d prompts", got, n)
	}
}

func TestAReplicaLeavesAPromptAnotherAdvancesAlone(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	am := newBlockingModel()
	a := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "a", ttl: ttl, model: am})
	bl, blog := newLogs()
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl, logger: blog})
	id := a.create("go")
	waitFor(t, am.started)
	if got := recoverNow(t, b); got.Resumed != 0 {
		t.Fatalf("B resumed %d prompts A advances", got.Resumed)
	}
	// A live A renews its lease; B's takeover loop finds it held.
	for range 3 {
		clock.advance(ttl / 3)
	}
	if got := bl.next(t, lookedForTakeover); got["running"] != int64(1) || got["taken"] != int64(0) {
		t.Fatalf("B's takeover round: %v", got)
	}
	if h := holder(t, mem, clock, id); h != "a" {
		t.Fatalf("lease held by %q, want a", h)
	}
	am.release <- struct{}{}
	a.endAs(id, prompt.StateCompleted)
	if n := len(b.script.Requests()); n != 0 {
		t.Fatalf("B asked its model %d times", n)
	}
	until(t, "A released the lease", func() bool { return holder(t, mem, clock, id) == "" })
}

// startDying has replica A start prompt "go" whose free call blocks, and
// die while the call executes. It returns the prompt's ID.
func startDying(t *testing.T, mem *prompttest.Store, clock *manualClock, rec *recorder) (string, *atomic.Bool) {
	t.Helper()
	rec.block = make(chan struct{}) // never closed: only A's death ends it
	o, dead := mortal("a", mem, clock, rec)
	a := newHarness(t, o, prompttest.Calls(call("c1", "test.free", "x")))
	id := a.create("go")
	waitFor(t, rec.started)
	if c := callOf(t, a.stored(id), "c1"); c.Status != prompt.CallExecuting {
		t.Fatalf("call %s while its tool runs", c.Status)
	}
	return id, dead
}

// takenOver checks that B finished prompt id with the call A left
// executing as "outcome unknown", and that the tool ran only on A.
func takenOver(t *testing.T, b *harness, id string) {
	t.Helper()
	p := b.endAs(id, prompt.StateCompleted)
	if c := callOf(t, p, "c1"); c.Status != prompt.CallInterrupted || c.Result.Error != prompt.InterruptedError {
		t.Fatalf("call = %s %+v", c.Status, c.Result)
	}
	if got := lastToolResults(t, b.script)["c1"]; got != "Error: "+prompt.InterruptedError {
		t.Fatalf("B's model saw %q", got)
	}
	if got := b.rec.got(); !reflect.DeepEqual(got, []string{"test.free:x"}) {
		t.Fatalf("tool runs %v, want the one on A", got)
	}
}

func TestAnotherReplicaTakesOverAPromptOnceItsReplicaDied(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	bl, blog := newLogs()
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl, logger: blog},
		prompttest.Answer("I could not tell"))
	recoverNow(t, b) // B's start: nothing to resume yet
	id, dead := startDying(t, mem, clock, rec)
	dead.Store(true)
	clock.advance(ttl)
	takenOver(t, b, id)
	if got := bl.next(t, lookedForTakeover); got["taken"] != int64(1) {
		t.Fatalf("B's takeover round: %v", got)
	}
}

func TestNoReplicaTakesOverBeforeTheLeaseLapses(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	bl, blog := newLogs()
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl, logger: blog},
		prompttest.Answer("I could not tell"))
	recoverNow(t, b)
	id, dead := startDying(t, mem, clock, rec)
	clock.advance(ttl / 3) // A renews: its lease runs to 40s
	dead.Store(true)
	clock.advance(ttl / 3)
	clock.advance(ttl / 3) // 30s: B looks
	if got := bl.next(t, lookedForTakeover); got["taken"] != int64(0) {
		t.Fatalf("B's takeover round at 30s: %v", got)
	}
	if c := callOf(t, b.stored(id), "c1"); c.Status != prompt.CallExecuting {
		t.Fatalf("call %s while A's lease lasts", c.Status)
	}
	if n := len(b.script.Requests()); n != 0 {
		t.Fatalf("B asked its model %d times", n)
	}
	// Nor does a B that starts now resume it.
	c := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "c", ttl: ttl})
	if got := recoverNow(t, c); got.Resumed != 0 {
		t.Fatalf("C resumed %d prompts", got.Resumed)
	}
	if err := c.svc.Close(context.Background()); err != nil { // B alone takes it over below
		t.Fatal(err)
	}
	clock.advance(ttl) // 60s: lapsed at 40s
	takenOver(t, b, id)
}

func TestADecisionTakenThroughAnotherReplicaRunsThere(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	a := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "a", ttl: ttl},
		prompttest.Calls(call("c1", "test.gated", "x")))
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl},
		prompttest.Answer("done"))
	id := a.create("go")
	req := a.request()
	until(t, "A released the lease", func() bool { return holder(t, mem, clock, id) == "" })
	b.approve(req.ApprovalID)
	p := b.endAs(id, prompt.StateCompleted)
	if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result.Output != "echo x" {
		t.Fatalf("call = %s %+v", c.Status, c.Result)
	}
	if got := rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) {
		t.Fatalf("tool runs %v", got)
	}
	if n := len(a.script.Requests()); n != 1 {
		t.Fatalf("A asked its model %d times, want once", n)
	}
}

// slowRelease holds a replica's releases until let go.
type slowRelease struct {
	prompt.Leases
	releasing chan struct{}
	letGo     chan struct{}
}

func (s slowRelease) Release(ctx context.Context, name, holder string) error {
	s.releasing <- struct{}{}
	<-s.letGo
	return s.Leases.Release(ctx, name, holder)
}

func TestADecisionTakenWhileTheLeaseIsStillHeldRunsOnTheHolder(t *testing.T) {
	mem, clock, rec := prompttest.NewStore(), newManualClock(), newRecorder()
	slow := slowRelease{Leases: mem, releasing: make(chan struct{}, 10), letGo: make(chan struct{}, 10)}
	a := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "a", ttl: ttl, leases: slow},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	bl, blog := newLogs()
	b := newHarness(t, opts{mem: mem, clock: clock, rec: rec, replica: "b", ttl: ttl, logger: blog})
	id := a.create("go")
	req := a.request()
	waitFor(t, slow.releasing) // A paused, its lease not yet given up
	b.approve(req.ApprovalID)
	bl.next(t, "prompt advanced by another replica")
	slow.letGo <- struct{}{}
	slow.letGo <- struct{}{} // and the second pass's
	a.endAs(id, prompt.StateCompleted)
	if got := rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) {
		t.Fatalf("tool runs %v", got)
	}
	if n := len(b.script.Requests()); n != 0 {
		t.Fatalf("B asked its model %d times", n)
	}
}

func TestALostLeaseStopsThePass(t *testing.T) {
	ctx := context.Background()
	mem, clock := prompttest.NewStore(), newManualClock()
	am := newBlockingModel()
	a := newHarness(t, opts{mem: mem, clock: clock, replica: "a", ttl: ttl, model: am})
	id := a.create("go")
	waitFor(t, am.started)
	// Another replica took the prompt over: A was too slow to renew.
	if err := mem.Release(ctx, "prompt:"+id, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := mem.Lease(ctx, "prompt:"+id, "b", clock.nowFunc()(), ttl); !ok || err != nil {
		t.Fatalf("lease = %v, %v", ok, err)
	}
	clock.advance(ttl / 3)
	a.idle(id) // the model turn was cut; the pass ended
	p := a.stored(id)
	if p.State != prompt.StateRunning || p.Rev != 1 || len(p.Output) != 0 {
		t.Fatalf("A saved after losing the lease: %s rev %d %+v", p.State, p.Rev, p.Output)
	}
	if h := holder(t, mem, clock, id); h != "b" {
		t.Fatalf("lease held by %q, want b still", h)
	}
	nothingOn(t, am.started, "A asked the model again")
}

func TestNegativeLeaseTTLIsRefused(t *testing.T) {
	_, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(), LeaseTTL: -time.Second})
	if err == nil {
		t.Fatal("a negative lease TTL was accepted")
	}
}

// countingLeases is a store that counts the leases asked of it.
type countingLeases struct {
	*prompttest.Store
	n atomic.Int32
}

func (c *countingLeases) Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.Store.Lease(ctx, name, holder, now, ttl)
}

// TestAServiceWithoutLeasesTakesNone: a single process (SQLite) is not
// given Leases and takes none, even from a store that could give them:
// no extra writes on every pass.
func TestAServiceWithoutLeasesTakesNone(t *testing.T) {
	st := &countingLeases{Store: prompttest.NewStore()}
	rec := newRecorder()
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("done")),
		Store: st, Tools: defaultTools(t)(rec)})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan prompt.Answer, 1)
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	if _, err := svc.Create(context.Background(), "c", "go"); err != nil {
		t.Fatal(err)
	}
	if a := waitFor(t, ended); a.State != prompt.StateCompleted {
		t.Fatalf("ended %s", a.State)
	}
	if n := st.n.Load(); n != 0 {
		t.Fatalf("%d leases taken without Config.Leases", n)
	}
}
