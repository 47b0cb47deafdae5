package bot

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Clock tells the time and waits. The bot paces its calls to Telegram,
// and waits between retries and between "typing…" renewals, on it, so
// that tests can inject a fake one (telegramtest.Clock) and step through
// seconds of waiting without sleeping. The default is real time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, as time.AfterFunc does, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// sleepOn waits d on clock c, or until ctx ends.
func sleepOn(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	fired := make(chan struct{})
	stop := c.AfterFunc(d, func() { close(fired) })
	defer stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-fired:
		return nil
	}
}

// sleep waits d on the bot's clock, or until ctx ends.
func (b *Bot) sleep(ctx context.Context, d time.Duration) error {
	return sleepOn(ctx, b.cfg.Clock, d)
}

// pace says which limits a call counts against.
type pace int

const (
	// paceChat is a message (sent or edited): paced per chat and overall,
	// and held by a 429 for its chat or for the whole bot.
	paceChat pace = iota
	// paceGlobal is anything else (callback answers, chat actions, getMe,
	// setup calls): Telegram does not count it as a message, so it is not
	// paced and a press is answered at once; only a 429 for the whole bot
	// holds it.
	paceGlobal
)

// minSweep is the number of chats the limiter keeps before it first looks
// for idle ones to forget.
const minSweep = 1024

// limiter paces messages as Telegram limits them: token buckets per chat
// (private chats and groups have their own rate and burst) and one over
// all chats. A quiet chat's next few messages go at once, which is what
// keeps a press's edit and the answer after it from waiting a second
// each; a backlog settles at the sustained rate instead of drawing 429s.
// A 429 holds its chat, or everything, for retry_after.
type limiter struct {
	clock      Clock
	chatRate   rate.Limit
	chatBurst  int
	groupRate  rate.Limit
	groupBurst int
	global     *rate.Limiter // messages to all chats together

	mu      sync.Mutex
	heldTil time.Time // no call before this: a 429 for the whole bot
	chats   map[int64]*chatPace
	sweepAt int // look for idle chats once this many are kept
}

// chatPace is one chat's bucket and hold.
type chatPace struct {
	bucket *rate.Limiter
	hold   time.Time // no message before this: a 429 for this chat
}

func newLimiter(l Limits, c Clock) *limiter {
	return &limiter{
		clock:    c,
		chatRate: l.ChatRate, chatBurst: l.ChatBurst,
		groupRate: l.GroupRate, groupBurst: l.GroupBurst,
		global: rate.NewLimiter(l.GlobalRate, l.GlobalBurst),
		chats:  map[int64]*chatPace{},
		// Sweeping only when the map has doubled since the last sweep
		// keeps its cost constant per new chat.
		sweepAt: minSweep,
	}
}

// chatLocked returns chat chatID's state, creating it. A negative ID is a
// group, supergroup or channel, which Telegram holds to 20 a minute.
func (l *limiter) chatLocked(chatID int64, now time.Time) *chatPace {
	c := l.chats[chatID]
	if c != nil {
		return c
	}
	if len(l.chats) >= l.sweepAt {
		l.sweepLocked(now)
	}
	r, burst := l.chatRate, l.chatBurst
	if chatID < 0 {
		r, burst = l.groupRate, l.groupBurst
	}
	c = &chatPace{bucket: rate.NewLimiter(r, burst)}
	l.chats[chatID] = c
	return c
}

// sweepLocked forgets the chats whose state is that of a new one: bucket
// full again and no hold. Nothing is lost (a full bucket has no
// reservation outstanding), and the map stays within twice the chats
// that are busy.
func (l *limiter) sweepLocked(now time.Time) {
	for id, c := range l.chats {
		full := c.bucket.Limit() == rate.Inf || c.bucket.TokensAt(now) >= float64(c.bucket.Burst())
		if full && !c.hold.After(now) {
			delete(l.chats, id)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.chats))
}

// reserveChat takes the next place in chat chatID's bucket and returns
// it with how long to wait for it.
func (l *limiter) reserveChat(chatID int64) (*rate.Reservation, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	r := l.chatLocked(chatID, now).bucket.ReserveN(now, 1)
	return r, r.DelayFrom(now)
}

// reserveGlobal takes the next place in the bucket over all chats.
func (l *limiter) reserveGlobal() (*rate.Reservation, time.Duration) {
	// Under the lock, so that reservations are made in the order of the
	// times they are made at.
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	r := l.global.ReserveN(now, 1)
	return r, r.DelayFrom(now)
}

// hold keeps a chat (or, for chat 0, everything) quiet for d, as a 429
// asks.
func (l *limiter) hold(chatID int64, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	until := now.Add(d)
	if chatID == 0 {
		if until.After(l.heldTil) {
			l.heldTil = until
		}
		return
	}
	if c := l.chatLocked(chatID, now); until.After(c.hold) {
		c.hold = until
	}
}

// heldFor returns how long a call of pace p to chatID must still wait for
// a 429's hold.
func (l *limiter) heldFor(chatID int64, p pace) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := l.heldTil
	if c := l.chats[chatID]; p == paceChat && c != nil && c.hold.After(until) {
		until = c.hold
	}
	return until.Sub(l.clock.Now())
}

// awaitHold waits out any hold on the call, however often it is extended.
func (l *limiter) awaitHold(ctx context.Context, chatID int64, p pace) error {
	for {
		d := l.heldFor(chatID, p)
		if d <= 0 {
			return ctx.Err()
		}
		if err := sleepOn(ctx, l.clock, d); err != nil {
			return err
		}
	}
}

// wait returns when a call of pace p to chatID may be made: after any
// hold and, for a message, once its chat and the bot have a place free.
// A wait cut short by ctx gives its place back.
func (l *limiter) wait(ctx context.Context, chatID int64, p pace) error {
	if err := l.awaitHold(ctx, chatID, p); err != nil {
		return err
	}
	if p != paceChat {
		return nil
	}
	// The chat first, then the bot: a message that waits a second for its
	// chat would waste a global place if it took one now.
	for _, reserve := range []func() (*rate.Reservation, time.Duration){
		func() (*rate.Reservation, time.Duration) { return l.reserveChat(chatID) },
		l.reserveGlobal,
	} {
		r, d := reserve()
		if err := sleepOn(ctx, l.clock, d); err != nil {
			r.CancelAt(l.clock.Now())
			return err
		}
	}
	// A 429 may have come for this chat while the message waited.
	return l.awaitHold(ctx, chatID, p)
}
