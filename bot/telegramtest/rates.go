package telegramtest

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Rates are the flood limits EnforceRates applies. Only messages count:
// sendMessage, sendDocument, editMessageText and editMessageReplyMarkup;
// callback answers, chat actions and the rest never do. Zero fields take
// the defaults, which are Telegram's figures with a little slack over the
// bot's own defaults (burst 3 a chat, 30 overall), so that a bot pacing
// itself as designed is not refused for a few milliseconds of network
// jitter while one that does not pace is.
type Rates struct {
	ChatRate    rate.Limit // messages a second to one private chat, sustained (default 1)
	ChatBurst   int        // messages a quiet private chat takes at once (default 5)
	GroupRate   rate.Limit // to one group or channel, chat ID < 0 (default 20 a minute)
	GroupBurst  int        // default 5
	GlobalRate  rate.Limit // to all chats together (default 30 a second)
	GlobalBurst int        // default 35
}

func (r Rates) withDefaults() Rates {
	if r.ChatRate <= 0 {
		r.ChatRate = 1
	}
	if r.ChatBurst <= 0 {
		r.ChatBurst = 5
	}
	if r.GroupRate <= 0 {
		r.GroupRate = rate.Every(3 * time.Second)
	}
	if r.GroupBurst <= 0 {
		r.GroupBurst = 5
	}
	if r.GlobalRate <= 0 {
		r.GlobalRate = 30
	}
	if r.GlobalBurst <= 0 {
		r.GlobalBurst = 35
	}
	return r
}

type rateEnforcer struct {
	rates  Rates
	global *rate.Limiter
	chats  map[int64]*rate.Limiter
}

// EnforceRates makes the server refuse messages beyond r as Telegram does:
// 429 "Too Many Requests: retry after N" with parameters.retry_after N,
// the whole seconds until the message would have been allowed (at least
// 1). A refused message does not count against the limits. The limits are
// token buckets on the server's clock (UseClock's, else real time) read
// when each request arrives. Call it before the bot sends; calling it
// again starts the counts afresh.
func (s *Server) EnforceRates(r Rates) {
	r = r.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rates = &rateEnforcer{rates: r, global: rate.NewLimiter(r.GlobalRate, r.GlobalBurst), chats: map[int64]*rate.Limiter{}}
}

// UseClock makes the server read time from c (a *Clock, say) instead of
// the real clock: for Call.Time and for EnforceRates. Call it before the
// bot sends.
func (s *Server) UseClock(c interface{ Now() time.Time }) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = c.Now
}

func (s *Server) clockNow() time.Time {
	s.mu.Lock()
	now := s.now
	s.mu.Unlock()
	return now()
}

// isMessage reports whether a method sends or changes a message, which is
// what Telegram's flood limits count.
func isMessage(method string) bool {
	switch strings.ToLower(method) {
	case "sendmessage", "senddocument", "editmessagetext", "editmessagereplymarkup":
		return true
	}
	return false
}

// enforceRates takes a message's place in its chat's and the global
// bucket, or refuses it with a 429 if either has none free at c.Time.
func (s *Server) enforceRates(c Call) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.rates
	if e == nil || !isMessage(c.Method) {
		return nil
	}
	chatID := c.Int("chat_id")
	chat := e.chats[chatID]
	if chat == nil {
		if chatID < 0 {
			chat = rate.NewLimiter(e.rates.GroupRate, e.rates.GroupBurst)
		} else {
			chat = rate.NewLimiter(e.rates.ChatRate, e.rates.ChatBurst)
		}
		e.chats[chatID] = chat
	}
	now := c.Time
	rc := chat.ReserveN(now, 1)
	rg := e.global.ReserveN(now, 1)
	wait := max(rc.DelayFrom(now), rg.DelayFrom(now))
	if wait == 0 {
		return nil
	}
	// Refused: give the places back, so that only messages served count.
	rc.CancelAt(now)
	rg.CancelAt(now)
	secs := max(1, int(math.Ceil(wait.Seconds())))
	return &apiError{code: http.StatusTooManyRequests, desc: fmt.Sprintf("Too Many Requests: retry after %d", secs), retryAfter: secs}
}
