package bot_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// memLeases is prompt.Leases in memory, as the database's table keeps
// them; it logs each take or renewal ("sender B true") so that a test can
// wait for one.
type memLeases struct {
	mu      sync.Mutex
	held    map[string]claim
	log     []string
	changed chan struct{}
}

func newMemLeases() *memLeases {
	return &memLeases{held: map[string]claim{}, changed: make(chan struct{})}
}

func (l *memLeases) Lease(_ context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.held[name]
	got := !ok || c.holder == holder || !c.until.After(now)
	if got {
		l.held[name] = claim{holder, now.Add(ttl)}
	}
	l.log = append(l.log, fmt.Sprintf("%s %s %v", name, holder, got))
	close(l.changed)
	l.changed = make(chan struct{})
	return got, nil
}

func (l *memLeases) Release(_ context.Context, name, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name].holder == holder {
		delete(l.held, name)
	}
	return nil
}

func (l *memLeases) LeaseHolder(_ context.Context, name string, now time.Time) (string, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.held[name]; ok && c.until.After(now) {
		return c.holder, c.until, nil
	}
	return "", time.Time{}, nil
}

var _ prompt.Leases = (*memLeases)(nil)

// tries counts the takes and renewals of lease name by holder.
func (l *memLeases) tries(name, holder string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.log {
		if strings.HasPrefix(s, name+" "+holder+" ") {
			n++
		}
	}
	return n
}

// awaitTry waits until holder has tried for lease name more than n times,
// and returns whether the last try got it.
func (l *memLeases) awaitTry(t *testing.T, name, holder string, n int) bool {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		var mine []string
		for _, s := range l.log {
			if strings.HasPrefix(s, name+" "+holder+" ") {
				mine = append(mine, s)
			}
		}
		ch := l.changed
		l.mu.Unlock()
		if len(mine) > n {
			return strings.HasSuffix(mine[len(mine)-1], " true")
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%s never tried for lease %s a %d. time", holder, name, n+1)
		}
	}
}

// countingTransport counts the Bot API methods one replica calls.
type countingTransport struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// replica is one of several bots that share a store, each with its own
// clock and its own count of calls to Telegram.
type replica struct {
	*harness
	clk  *telegramtest.Clock
	sent *countingTransport
}

const leaseTTL = 15 * time.Second

func replicaOption(name string, leases prompt.Leases, clk *telegramtest.Clock, sent *countingTransport) option {
	return func(c *config) {
		c.Replica, c.Leases, c.LeaseTTL, c.Clock = name, leases, leaseTTL, clk
		c.HTTPClient = &http.Client{Transport: sent, Timeout: c.PollTimeout + 15*time.Second}
		// Unpaced: the clocks move only when the test moves them.
		c.Limits.ChatRate, c.Limits.GroupRate, c.Limits.GlobalRate = rate.Inf, rate.Inf, rate.Inf
	}
}

// newReplicas builds bots named names on one store, one Telegram and one
// set of leases; none is started.
func newReplicas(t *testing.T, leases prompt.Leases, steps map[string][]prompttest.Step, names ...string) []*replica {
	t.Helper()
	var out []*replica
	for i, name := range names {
		r := &replica{clk: telegramtest.NewClock(shownNow()), sent: &countingTransport{}}
		opt := replicaOption(name, leases, r.clk, r.sent)
		if i == 0 {
			r.harness = newHarness(t, steps[name], opt)
		} else {
			first := out[0].harness
			r.harness = build(t, first.srv, first.pstore, first.store, first.calls, steps[name], opt)
		}
		out = append(out, r)
	}
	return out
}

// eventually waits until cond holds; the bot's work is asynchronous.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two replicas on one database: one polls and sends; when it stops
// renewing its leases (stalled: its clock stands still) the other takes
// both over once they lapse, and the first, when it next tries to renew,
// stops. Every answer is sent once, by whichever replica held the sender's
// lease.
func TestOneReplicaSendsAndPollsAndAnotherTakesOverWhenItStopsRenewing(t *testing.T) {
	leases := newMemLeases()
	rs := newReplicas(t, leases, map[string][]prompttest.Step{
		"A": {prompttest.Answer("one")}, "B": {prompttest.Answer("two")}}, "A", "B")
	a, b := rs[0], rs[1]
	a.start()
	if !leases.awaitTry(t, "sender", "A", 0) || !leases.awaitTry(t, "poller", "A", 0) {
		t.Fatal("the first replica did not take the leases")
	}
	b.start()
	if leases.awaitTry(t, "sender", "B", 0) || leases.awaitTry(t, "poller", "B", 0) {
		t.Fatal("the second replica took a lease the first holds")
	}
	if r := b.bot.Role(); r.Sender || r.Poller || r.Replica != "B" {
		t.Fatalf("B's role %+v, want neither", r)
	}
	if r := a.bot.Role(); !r.Sender || !r.Poller || r.Replica != "A" {
		t.Fatalf("A's role %+v, want both", r)
	}

	a.srv.UserMessage(alice.ID, alice, "first")
	a.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("one")))
	if a.sent.count("sendMessage") != 1 || b.sent.count("sendMessage") != 0 || b.sent.count("getUpdates") != 0 {
		t.Fatalf("A sent %d, B sent %d and polled %d times; want A alone", a.sent.count("sendMessage"),
			b.sent.count("sendMessage"), b.sent.count("getUpdates"))
	}

	// A stalls. B tries every third of the TTL and gets the leases once A's
	// have lapsed, a full TTL after A last renewed them.
	for i := range 3 {
		nS, nP := leases.tries("sender", "B"), leases.tries("poller", "B")
		b.clk.Advance(leaseTTL / 3)
		gotS, gotP := leases.awaitTry(t, "sender", "B", nS), leases.awaitTry(t, "poller", "B", nP)
		if i < 2 && (gotS || gotP) {
			t.Fatalf("B took a lease %v after A renewed it", time.Duration(i+1)*leaseTTL/3)
		}
		if i == 2 && (!gotS || !gotP) {
			t.Fatal("B did not take over the lapsed leases")
		}
	}
	eventually(t, "B sends and polls", func() bool { r := b.bot.Role(); return r.Sender && r.Poller })

	// A wakes, fails to renew, and stops both.
	nS, nP := leases.tries("sender", "A"), leases.tries("poller", "A")
	a.clk.Advance(leaseTTL / 3)
	if leases.awaitTry(t, "sender", "A", nS) || leases.awaitTry(t, "poller", "A", nP) {
		t.Fatal("A renewed leases B holds")
	}
	eventually(t, "A stops", func() bool { r := a.bot.Role(); return !r.Sender && !r.Poller })
	polledA := a.sent.count("getUpdates")

	b.srv.UserMessage(alice.ID, alice, "second")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("B logs:\n%s\nA logs:\n%s", b.logs.String(), a.logs.String())
		}
	})
	b.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("two")))
	if a.sent.count("sendMessage") != 1 || b.sent.count("sendMessage") != 1 {
		t.Fatalf("A sent %d, B sent %d; want one each", a.sent.count("sendMessage"), b.sent.count("sendMessage"))
	}
	if n := a.sent.count("getUpdates"); n != polledA {
		t.Fatalf("A polled %d times after it lost the lease", n-polledA)
	}
	for _, text := range []string{"one", "two"} {
		if n := len(a.srv.Calls(telegramtest.Method("sendMessage", textHas(text)))); n != 1 {
			t.Errorf("%q sent %d times, want once", text, n)
		}
	}
}

// A sender that finds an entry claimed by another (an old sender still at
// work after a failover) leaves it, and sends it only once that claim has
// lapsed: the entry goes out once either way, and a dead claimer's entry
// is not lost.
func TestAnEntryClaimedByAnotherSenderIsLeftUntilTheClaimLapses(t *testing.T) {
	leases := newMemLeases()
	rs := newReplicas(t, leases, map[string][]prompttest.Step{"B": {prompttest.Answer("claimed")}}, "B")
	b := rs[0]
	// The first entry will be seq 1; the old sender claimed it.
	b.store.claims[1] = claim{"A", shownNow().Add(4 * leaseTTL)}
	b.start()
	b.srv.UserMessage(alice.ID, alice, "go")
	eventually(t, "the claim is refused", func() bool {
		return strings.Contains(b.logs.String(), "outbox entry claimed by another sender")
	})
	if n := b.sent.count("sendMessage"); n != 0 {
		t.Fatalf("B sent %d messages while A held the claim", n)
	}
	// B looks again every third of the TTL; the claim lapses at 4 TTLs.
	sent := func() bool {
		return len(b.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("claimed")))) > 0
	}
	for !sent() && b.clk.Now().Before(shownNow().Add(4*leaseTTL)) {
		b.clk.Advance(leaseTTL / 3)
		if sent() {
			t.Fatalf("sent at %v, before the claim lapsed", b.clk.Now().Sub(shownNow()))
		}
	}
	eventually(t, "the entry is sent once the claim lapsed", func() bool {
		b.clk.Advance(leaseTTL / 3)
		return sent()
	})
	if n := len(b.srv.Calls(telegramtest.Method("sendMessage"))); n != 1 {
		t.Fatalf("%d sendMessage calls, want 1", n)
	}
}

// Without Leases a bot is alone: it sends and polls, and says so.
func TestABotWithoutLeasesIsSenderAndPoller(t *testing.T) {
	h := newHarness(t, nil, func(c *config) { c.Replica = "solo" })
	h.start()
	eventually(t, "solo is sender and poller", func() bool {
		return h.bot.Role() == bot.Role{Replica: "solo", Sender: true, Poller: true}
	})
}
