package bot

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
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

func TestEditNotModifiedIsSuccess(t *testing.T) {
	srv := telegramtest.NewServer(t, "1:t")
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Token: "1:t", APIURL: srv.URL(), Service: svc, Store: nopStore{}, Limits: Limits{PerChat: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.UserMessage(5, models.User{ID: 5, FirstName: "U"}, "hi")
	id, err := b.send(ctx, message{chat: 5, html: "<b>request</b>"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.edit(ctx, 5, id, "request <i>approved</i>"); err != nil {
			t.Fatalf("edit: %v", err)
		}
	}
	calls := srv.Calls(telegramtest.Method("editMessageText"))
	if len(calls) != 2 || !calls[0].OK() || !strings.Contains(calls[1].Description, "not modified") {
		t.Errorf("edits: %+v", calls)
	}
	if err := b.edit(ctx, 5, 99, "x"); err == nil {
		t.Error("editing a missing message succeeded")
	}
}

type nopStore struct{}

func (nopStore) SaveChat(context.Context, string, int64) error { return nil }
func (nopStore) ChatOf(context.Context, string) (int64, error) { return 0, prompt.ErrNotFound }
func (nopStore) AddApprovalMessage(context.Context, string, int64, int) error {
	return nil
}
func (nopStore) ApprovalMessages(context.Context, string) (int64, []int, error) {
	return 0, nil, prompt.ErrNotFound
}
func (nopStore) ApprovalByMessage(context.Context, int64, int) (string, error) {
	return "", prompt.ErrNotFound
}
func (nopStore) DueNotices(context.Context, time.Time, int) ([]prompt.OutboxEntry, error) {
	return nil, nil
}
func (nopStore) NextNoticeAt(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}
func (nopStore) MarkNotice(context.Context, int64, string) error            { return nil }
func (nopStore) HoldNotice(context.Context, int64, time.Time, string) error { return nil }
