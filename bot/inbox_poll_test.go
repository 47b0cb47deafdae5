package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt/prompttest"
)

// returned lists the update IDs a getUpdates call answered with.
func returned(c telegramtest.Call) []int64 {
	var ups []struct {
		ID int64 `json:"update_id"`
	}
	_ = json.Unmarshal(c.Result, &ups)
	var ids []int64
	for _, u := range ups {
		ids = append(ids, u.ID)
	}
	return ids
}

// returns matches a getUpdates call that answered with update id.
func returns(id int64) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool { return slices.Contains(returned(c), id) }
}

// offsetAbove matches a getUpdates call that confirms update id.
func offsetAbove(id int64) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool { return c.Int("offset") > id }
}

// recordTimes notes when each update was recorded, just before
// RecordUpdates returns.
type recordTimes struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func watchRecords(s *memStore) *recordTimes {
	r := &recordTimes{at: map[int64]time.Time{}}
	s.afterRecord = func(fresh []int64) {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, id := range fresh {
			r.at[id] = now
		}
	}
	return r
}

func (r *recordTimes) get(id int64) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[id]
	return t, ok
}

// confirmed waits until Telegram was told update id arrived.
func confirmed(t *testing.T, srv *telegramtest.Server, id int64) {
	t.Helper()
	if !srv.AwaitConfirmed(wait, id) {
		t.Fatalf("update %d never confirmed", id)
	}
}

// checkOffsets fails the test if any getUpdates moved the offset past an
// update before that update was recorded. Call it once h stopped: a long
// poll is recorded when it returns.
func checkOffsets(t *testing.T, srv *telegramtest.Server, rec *recordTimes, ids []int64) {
	t.Helper()
	srv.WaitCall(t, wait, telegramtest.Method("getUpdates", offsetAbove(slices.Max(ids))))
	for _, c := range srv.Calls(telegramtest.Method("getUpdates")) {
		for _, id := range ids {
			if c.Int("offset") <= id {
				continue
			}
			at, ok := rec.get(id)
			if !ok || !at.Before(c.Time) {
				t.Errorf("getUpdates with offset %d (confirming update %d) sent at %v, update recorded: %v at %v",
					c.Int("offset"), id, c.Time.Format(time.StampMicro), ok, at.Format(time.StampMicro))
			}
		}
	}
}

func TestPolledUpdateIsRecordedBeforeTheOffsetPassesIt(t *testing.T) {
	h := newHarness(t, nil)
	rec := watchRecords(h.store)
	// Recording is slowed by a window in which a poller that moves the
	// offset before (or while) it records is caught doing so; the
	// library's poller was, within milliseconds.
	h.store.recordHook = func(_ context.Context, ups []json.RawMessage) error {
		for _, u := range ups {
			var head struct {
				ID int64 `json:"update_id"`
			}
			if err := json.Unmarshal(u, &head); err != nil {
				t.Error(err)
			}
			if h.srv.AwaitConfirmed(100*time.Millisecond, head.ID) {
				t.Errorf("update %d confirmed to Telegram while being recorded", head.ID)
			}
		}
		return nil
	}
	h.start()
	var ids []int64
	for i := range 4 {
		from := []models.User{alice, bob}[i%2]
		h.srv.UserMessage(from.ID, from, "/help")
		// One at a time, so that each is its own batch and its own offset.
		q := h.srv.Queued()
		ids = append(ids, q[len(q)-1].ID)
		confirmed(t, h.srv, ids[len(ids)-1])
	}
	h.srv.WaitCalls(t, wait, 4, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
	h.stop()
	checkOffsets(t, h.srv, rec, ids)
	for _, id := range ids {
		if recorded, handled, n := h.store.updateState(id); !recorded || !handled || n != 1 {
			t.Errorf("update %d: recorded %v, handled %v, %d times", id, recorded, handled, n)
		}
	}
	// The request is what Telegram documents, as the library sends it.
	c := h.srv.Calls(telegramtest.Method("getUpdates"))[0]
	if c.Param("allowed_updates") != `["message","callback_query"]` || c.Int("timeout") != 5 || c.Int("limit") != 100 {
		t.Errorf("getUpdates params %v", c.Params)
	}
}

func TestBatchNotRecordedIsAskedForAgain(t *testing.T) {
	h := newHarness(t, nil)
	rec := watchRecords(h.store)
	var mu sync.Mutex
	failures := 2
	h.store.recordHook = func(context.Context, []json.RawMessage) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errors.New("disk full")
		}
		return nil
	}
	h.srv.UserMessage(alice.ID, alice, "/help")
	id := h.srv.Queued()[0].ID
	h.start()
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
	confirmed(t, h.srv, id)
	h.stop()
	checkOffsets(t, h.srv, rec, []int64{id})
	// Telegram gave it three times: twice it could not be recorded, so
	// the offset stayed, and Telegram sent it again.
	if n := len(h.srv.Calls(telegramtest.Method("getUpdates", returns(id)))); n != 3 {
		t.Errorf("update returned by %d getUpdates, want 3", n)
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", textHas("Commands:")))); n != 1 {
		t.Errorf("handled %d times, want once", n)
	}
	if !strings.Contains(h.logs.String(), "updates not recorded; asking Telegram for them again") {
		t.Errorf("no error logged:\n%s", h.logs.String())
	}
}

// A bot that recorded an update and stopped before its next getUpdates
// left it unconfirmed: Telegram delivers it again to the next process,
// which handles it from its inbox, once.
func TestUpdateDeliveredAgainAfterARestartIsHandledOnce(t *testing.T) {
	first := newHarness(t, nil)
	recorded, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first.store.afterRecord = func([]int64) {
		once.Do(func() {
			close(recorded)
			<-release
		})
	}
	first.start()
	first.srv.UserMessage(alice.ID, alice, "hi")
	id := first.srv.Queued()[0].ID
	select {
	case <-recorded:
	case <-time.After(wait):
		t.Fatal("update never recorded")
	}
	first.cancel() // stops updates while the batch is being recorded
	close(release)

	second := first.restart([]prompttest.Step{prompttest.Answer("hello back")})
	second.store.afterRecord = nil
	if recorded, handled, _ := second.store.updateState(id); !recorded || handled {
		t.Fatalf("after the first process: recorded %v, handled %v; want recorded, not handled", recorded, handled)
	}
	if q := second.srv.Queued(); len(q) != 1 || q[0].ID != id {
		t.Fatalf("Telegram still holds %+v, want update %d, never confirmed", q, id)
	}
	second.start()
	second.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("hello back")))
	// Delivered again, recognised, and confirmed.
	second.srv.WaitCall(t, wait, telegramtest.Method("getUpdates", returns(id)))
	confirmed(t, second.srv, id)
	second.stop()
	if n := len(second.model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want once", n)
	}
	if n := countCalls(second.calls, "create tg:111"); n != 1 {
		t.Errorf("%d prompts created, want 1", n)
	}
	if _, handled, n := second.store.updateState(id); !handled || n != 1 {
		t.Errorf("handled %v, %d times", handled, n)
	}
	if !strings.Contains(second.logs.String(), "update delivered again") {
		t.Errorf("redelivery not logged:\n%s", second.logs.String())
	}
}

func countCalls(l *callLog, call string) int {
	n := 0
	for _, c := range l.list() {
		if c == call {
			n++
		}
	}
	return n
}

// twoMessages makes alice send "first" then "second"; handled in order,
// the first starts a prompt that waits for approval, and the second finds
// the chat busy. Handled the other way round, "second" would start it.
func twoMessages(t *testing.T, h *harness) (first, second models.Message) {
	t.Helper()
	return h.srv.UserMessage(alice.ID, alice, "first"), h.srv.UserMessage(alice.ID, alice, "second")
}

func checkHandledInOrder(t *testing.T, h *harness, second models.Message) {
	t.Helper()
	h.approvalMessage(1)
	busy := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("still working on your previous message")))
	var rp struct {
		MessageID int `json:"message_id"`
	}
	if err := busy.Decode("reply_parameters", &rp); err != nil || rp.MessageID != second.ID {
		t.Errorf("busy note replies to %+v (%v), want the second message %d", rp, err, second.ID)
	}
	reqs := h.model.Requests()
	if len(reqs) == 0 {
		t.Fatal("model never asked")
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if last.Text != "first" {
		t.Errorf("prompt started from %q, want the first message", last.Text)
	}
}

func TestUpdatesOfOneChatAreHandledInOrder(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	// Both arrive in one batch.
	_, second := twoMessages(t, h)
	h.start()
	checkHandledInOrder(t, h, second)
}

func TestUpdatesAStartFindsUnhandledAreHandledFirst(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	// A crash recorded both and handled neither, nor confirmed them; one
	// before them was handled.
	_, second := twoMessages(t, h)
	h.srv.UserMessage(alice.ID, alice, "/help")
	q := h.srv.Queued()
	for _, u := range q[:2] {
		body, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		h.store.putUpdate(u.ID, body, time.Time{})
	}
	old := q[0].ID - 1
	h.store.putUpdate(old, json.RawMessage(`{"update_id":1,"message":{"message_id":99,"date":1,"chat":{"id":111,"type":"private"},"from":{"id":111,"first_name":"Alice"},"text":"old"}}`),
		time.Now().Add(-time.Hour))
	h.start()
	checkHandledInOrder(t, h, second)
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
	confirmed(t, h.srv, q[2].ID)
	h.stop()
	for _, u := range q {
		if _, handled, n := h.store.updateState(u.ID); !handled || n != 1 {
			t.Errorf("update %d: handled %v, %d times", u.ID, handled, n)
		}
	}
	if _, _, n := h.store.updateState(old); n != 0 {
		t.Errorf("an update handled before the restart was handled again")
	}
	if !strings.Contains(h.logs.String(), "handling updates a crash left unhandled") {
		t.Errorf("not logged:\n%s", h.logs.String())
	}
}

func TestStartPrunesOldHandledUpdates(t *testing.T) {
	h := newHarness(t, nil)
	body := func(id string) json.RawMessage { return json.RawMessage(`{"update_id":` + id + `}`) }
	h.store.putUpdate(1, body("1"), time.Now().Add(-49*time.Hour)) // handled long ago
	h.store.putUpdate(2, body("2"), time.Now().Add(-time.Hour))    // handled lately: Telegram may still send it
	h.store.putUpdate(3, body("3"), time.Time{})                   // left unhandled: handled at start
	h.start()
	if !h.calls.wait(wait, "prune updates") {
		t.Fatal("no pruning at start")
	}
	for id, want := range map[int64]bool{1: false, 2: true, 3: true} {
		if recorded, _, _ := h.store.updateState(id); recorded != want {
			t.Errorf("update %d kept: %v, want %v", id, recorded, want)
		}
	}
}

func TestPollErrorsAreLoggedAndBackedOff(t *testing.T) {
	for name, tc := range map[string]struct {
		fault telegramtest.Fault
		log   string
	}{
		"conflict": {telegramtest.Fault{Code: http.StatusConflict,
			Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"},
			"another process is taking this bot's updates"},
		"unauthorized": {telegramtest.Fault{Code: http.StatusUnauthorized, Description: "Unauthorized"},
			"Telegram no longer accepts the bot token"},
		"server error": {telegramtest.ServerError(), "getUpdates failed; retrying"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.srv.Fail("getUpdates", 3, tc.fault)
			h.srv.UserMessage(alice.ID, alice, "/help")
			h.start()
			h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
			calls := h.srv.Calls(telegramtest.Method("getUpdates"))
			if len(calls) < 4 || calls[3].Status != http.StatusOK {
				t.Fatalf("getUpdates: %d calls", len(calls))
			}
			// Backoff 10ms in the harness, doubling.
			for i, want := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
				if gap := calls[i+1].Time.Sub(calls[i].Time); gap < want {
					t.Errorf("wait %d after a failure: %v, want at least %v", i+1, gap, want)
				}
			}
			if logs := h.logs.String(); strings.Count(logs, tc.log) != 3 || strings.Contains(logs, token) {
				t.Errorf("want %q logged 3 times, without the token; logs:\n%s", tc.log, logs)
			}
		})
	}
}

func TestPollRespectsRetryAfter(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("getUpdates", 1, telegramtest.TooManyRequests(1))
	h.srv.UserMessage(alice.ID, alice, "/help")
	h.start()
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Commands:")))
	calls := h.srv.Calls(telegramtest.Method("getUpdates"))
	if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second {
		t.Errorf("asked again %v after a 429 with retry_after 1", gap)
	}
}
