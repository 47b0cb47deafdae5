package telegramtest

import (
	"slices"
	"sync"
	"time"
)

// Clock is a manual clock for tests: its time moves only when Advance or
// AdvanceToNext is called, so a test can step through waits of seconds or
// minutes without sleeping. It has the methods of bot.Clock (Now and
// AfterFunc), so it can pace a bot, and UseClock makes a Server record
// and rate-limit calls on it, so that the times a test reads are the times
// the bot waited for. Its methods are safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*clockTimer // pending, in no particular order
	seq     int           // orders timers due at the same instant by creation
	changed chan struct{} // closed and replaced when timers are added or removed
}

type clockTimer struct {
	when time.Time
	seq  int
	f    func()
}

// NewClock returns a Clock that reads start until advanced.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arranges for f to be called once the clock has been advanced
// by d or more, unless stop is called first; stop reports whether it
// prevented the call. f runs on the goroutine that advances the clock,
// after the clock has moved to the timer's time; with d ≤ 0 it runs at
// once in its own goroutine, as time.AfterFunc would.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	if d <= 0 {
		go f()
		return func() bool { return false }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &clockTimer{when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	c.notifyLocked()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.timers, t)
		if i < 0 {
			return false
		}
		c.timers = slices.Delete(c.timers, i, i+1)
		c.notifyLocked()
		return true
	}
}

func (c *Clock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Pending counts the timers waiting for the clock to advance.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns how far the earliest pending timer is from now, and false
// if none is pending.
func (c *Clock) Next() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.earliestLocked()
	if t == nil {
		return 0, false
	}
	return t.when.Sub(c.now), true
}

func (c *Clock) earliestLocked() *clockTimer {
	var first *clockTimer
	for _, t := range c.timers {
		if first == nil || t.when.Before(first.when) || (t.when.Equal(first.when) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

// Advance moves the clock on by d, firing the timers that fall due in
// deadline order, each with the clock set to its deadline.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(target)
}

// AdvanceToNext moves the clock to the earliest pending timer and fires
// it, with any others due at that instant; it returns how far the clock
// moved, or false if no timer was pending.
func (c *Clock) AdvanceToNext() (time.Duration, bool) {
	c.mu.Lock()
	t := c.earliestLocked()
	if t == nil {
		c.mu.Unlock()
		return 0, false
	}
	from, target := c.now, t.when
	c.mu.Unlock()
	c.advanceTo(target)
	return target.Sub(from), true
}

func (c *Clock) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		t := c.earliestLocked()
		if t == nil || t.when.After(target) {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		c.timers = slices.DeleteFunc(c.timers, func(x *clockTimer) bool { return x == t })
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.notifyLocked()
		c.mu.Unlock()
		// Outside the lock: f may read the clock or set another timer.
		t.f()
	}
}

// AwaitPending waits up to timeout (real time) until at least n timers
// are pending, and reports whether they are: it is how a test knows the
// code under test has started waiting, without sleeping. It may be called
// from any goroutine.
func (c *Clock) AwaitPending(timeout time.Duration, n int) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}
