package bot

import (
	"sync"
	"testing"
	"time"
)

func TestLimiterTurnsABurstIntoAQueue(t *testing.T) {
	l := newLimiter(Limits{PerChat: time.Second, Global: 10 * time.Millisecond})
	// 100 requests re-sent at start, to 50 chats: the global slots are
	// spaced, and a chat's second message waits a full second.
	var mu sync.Mutex
	var global []time.Duration
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			d := l.reserveGlobal()
			mu.Lock()
			global = append(global, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	var latest time.Duration
	for _, d := range global {
		latest = max(latest, d)
	}
	if latest < 980*time.Millisecond {
		t.Errorf("100 calls at 10ms spacing end after %v, want about 990ms", latest)
	}
	if d := l.reserveChat(7); d > 0 {
		t.Errorf("first message to a chat waits %v", d)
	}
	if d := l.reserveChat(7); d < 990*time.Millisecond {
		t.Errorf("second message to a chat waits %v, want about 1s", d)
	}
	if d := l.reserveChat(8); d > 0 {
		t.Errorf("another chat waits %v for chat 7", d)
	}
	l.hold(8, 3*time.Second)
	if d := l.reserveChat(8); d < 2900*time.Millisecond {
		t.Errorf("after a 429 with retry_after 3, the chat waits %v", d)
	}
}
