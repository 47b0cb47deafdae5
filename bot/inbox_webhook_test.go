package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt/prompttest"
)

const hookSecret = "s3cret-token"

// webhookHarness is a harness in webhook mode, behind a front server the
// fake Telegram delivers to.
func webhookHarness(t *testing.T, steps []prompttest.Step) (*harness, http.Handler) {
	t.Helper()
	var hook http.Handler
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hook.ServeHTTP(w, r) }))
	t.Cleanup(front.Close)
	h := newHarness(t, steps, func(c *config) {
		c.Webhook = bot.Webhook{URL: front.URL + "/telegram", Secret: hookSecret}
	})
	hook = h.bot.WebhookHandler()
	return h, hook
}

// watchedWriter notes when the handler answers.
type watchedWriter struct {
	*httptest.ResponseRecorder
	answered atomic.Bool
}

func (w *watchedWriter) WriteHeader(code int) {
	w.answered.Store(true)
	w.ResponseRecorder.WriteHeader(code)
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.answered.Store(true)
	return w.ResponseRecorder.Write(p)
}

func TestWebhookAnswersOnlyAfterTheUpdateIsRecorded(t *testing.T) {
	h, hook := webhookHarness(t, nil)
	h.knownChat(alice)
	w := &watchedWriter{ResponseRecorder: httptest.NewRecorder()}
	var answeredFirst atomic.Bool
	var recorded atomic.Bool
	h.store.afterRecord = func([]int64) {
		// Still inside RecordUpdates: nothing must have been answered.
		answeredFirst.Store(w.answered.Load())
		recorded.Store(true)
	}
	h.start()
	body := `{"update_id":77,"message":{"message_id":1,"date":1,"chat":{"id":111,"type":"private"},"from":{"id":111,"first_name":"Alice"},"text":"/help","entities":[{"type":"bot_command","offset":0,"length":5}]}}`
	req := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(body))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", hookSecret)
	hook.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !recorded.Load() || answeredFirst.Load() {
		t.Fatalf("answered %d; recorded %v, answered before the record %v", w.Code, recorded.Load(), answeredFirst.Load())
	}
	if rec, _, _ := h.store.updateState(77); !rec {
		t.Fatal("answered 200 for an update not recorded")
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
}

func TestWebhookAnswers500WhenTheUpdateIsNotRecorded(t *testing.T) {
	h, _ := webhookHarness(t, nil)
	var mu sync.Mutex
	failures := 1
	h.store.recordHook = func(context.Context, []json.RawMessage) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errors.New("disk I/O error")
		}
		return nil
	}
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/help")
	id := h.srv.Queued()[0].ID
	// Telegram retries a delivery that was not answered 2xx.
	ds, ok := h.srv.AwaitDeliveries(wait, 2, func(d telegramtest.Delivery) bool { return d.UpdateID == id })
	if !ok || ds[0].Status != http.StatusInternalServerError || ds[1].Status != http.StatusOK {
		t.Fatalf("deliveries %+v, want 500 then 200", ds)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
	h.stop()
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", textHas("Commands:")))); n != 1 {
		t.Errorf("handled %d times, want once", n)
	}
	if !strings.Contains(h.logs.String(), "update not recorded; Telegram delivers it again") {
		t.Errorf("failure not logged:\n%s", h.logs.String())
	}
}

func TestWebhookReplayedDeliveryIsHandledOnce(t *testing.T) {
	h, _ := webhookHarness(t, []prompttest.Step{prompttest.Answer("hello back")})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "hi")
	id := h.srv.Queued()[0].ID
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("hello back")))
	ofID := func(d telegramtest.Delivery) bool { return d.UpdateID == id }
	if _, ok := h.srv.AwaitDeliveries(wait, 1, ofID); !ok {
		t.Fatal("first delivery never done")
	}
	// Telegram did not get the answer (say) and delivers it again.
	if !h.srv.Replay(id) {
		t.Fatal("replay")
	}
	ds, ok := h.srv.AwaitDeliveries(wait, 2, func(d telegramtest.Delivery) bool { return d.UpdateID == id })
	if !ok || ds[1].Status != http.StatusOK {
		t.Fatalf("deliveries %+v, want the replay answered 200", ds)
	}
	h.stop()
	if n := len(h.model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want once", n)
	}
	if n := countCalls(h.calls, "create tg:111"); n != 1 {
		t.Errorf("%d prompts created, want 1", n)
	}
	if _, handled, n := h.store.updateState(id); !handled || n != 1 {
		t.Errorf("handled %v, %d times", handled, n)
	}
}
