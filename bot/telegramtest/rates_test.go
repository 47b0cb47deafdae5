package telegramtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// post calls method with form params, as Telegram accepts them, and
// returns the status and decoded body.
func post(t *testing.T, s *telegramtest.Server, method string, params url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(s.URL()+"/bot"+token+"/"+method, params)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func sendTo(t *testing.T, s *telegramtest.Server, chat int64) (int, map[string]any) {
	t.Helper()
	return post(t, s, "sendMessage", url.Values{"chat_id": {fmt.Sprint(chat)}, "text": {"hi"}})
}

func enforced(t *testing.T) (*telegramtest.Server, *telegramtest.Clock) {
	s := telegramtest.NewServer(t, token)
	clk := telegramtest.NewClock(start)
	s.UseClock(clk)
	s.EnforceRates(telegramtest.Rates{})
	return s, clk
}

func TestRateEnforcerRefusesAFloodedChatLikeTelegram(t *testing.T) {
	s, clk := enforced(t)
	s.KnownChat(user.ID, user)
	s.KnownChat(8, user)
	for i := range 5 {
		if code, body := sendTo(t, s, user.ID); code != 200 {
			t.Fatalf("message %d of the burst refused: %v", i, body)
		}
	}
	code, body := sendTo(t, s, user.ID)
	want := map[string]any{"ok": false, "error_code": 429.0, "description": "Too Many Requests: retry after 1",
		"parameters": map[string]any{"retry_after": 1.0}}
	if code != 429 || fmt.Sprint(body) != fmt.Sprint(want) {
		t.Errorf("sixth message at once: %d %v, want 429 %v", code, body, want)
	}
	// Another chat, a chat action and a callback answer are not messages
	// of this chat: none is refused.
	if code, body := sendTo(t, s, 8); code != 200 {
		t.Errorf("another chat refused: %v", body)
	}
	if code, body := post(t, s, "sendChatAction", url.Values{"chat_id": {"7"}, "action": {"typing"}}); code != 200 {
		t.Errorf("chat action refused: %v", body)
	}
	id := s.Press(user.ID, user, 1, "x")
	if code, body := post(t, s, "answerCallbackQuery", url.Values{"callback_query_id": {id}}); code != 200 {
		t.Errorf("callback answer refused: %v", body)
	}
	// The refused message did not count: a second on, one more goes.
	clk.Advance(time.Second)
	if code, body := sendTo(t, s, user.ID); code != 200 {
		t.Errorf("message after retry_after refused: %v", body)
	}
	if code, _ := sendTo(t, s, user.ID); code != 429 {
		t.Errorf("second message in that second: %d, want 429", code)
	}
	// Edits count as messages.
	code, _ = post(t, s, "editMessageText", url.Values{"chat_id": {"7"}, "message_id": {"1"}, "text": {"x"}})
	if code != 429 {
		t.Errorf("edit in a flooded chat: %d, want 429", code)
	}
	if n := len(s.Calls(telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return c.Status == 429 }))); n != 2 {
		t.Errorf("%d refused calls recorded, want 2", n)
	}
}

func TestRateEnforcerHoldsGroupsAndTheBot(t *testing.T) {
	s, clk := enforced(t)
	s.KnownChat(-100, user)
	for range 5 {
		sendTo(t, s, -100)
	}
	if code, body := sendTo(t, s, -100); code != 429 || !strings.HasSuffix(body["description"].(string), "retry after 3") {
		t.Errorf("group past its burst: %d %v, want 429 retry after 3 (20 a minute)", code, body)
	}
	// 35 chats one message each use the global burst; a 36th chat, quiet
	// as it is, waits for the bot's next place.
	clk.Advance(time.Minute)
	for c := int64(1); c <= 35; c++ {
		s.KnownChat(c, user)
		if code, body := sendTo(t, s, c); code != 200 {
			t.Fatalf("chat %d within the global burst refused: %v", c, body)
		}
	}
	s.KnownChat(36, user)
	if code, _ := sendTo(t, s, 36); code != 429 {
		t.Errorf("36th message in an instant: %d, want 429", code)
	}
	clk.Advance(time.Second / 30)
	if code, body := sendTo(t, s, 36); code != 200 {
		t.Errorf("after 1/30s: %v", body)
	}
}

func TestWithoutEnforcerNothingIsRefused(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	s.KnownChat(user.ID, user)
	for range 50 {
		if code, body := sendTo(t, s, user.ID); code != 200 {
			t.Fatalf("refused without EnforceRates: %v", body)
		}
	}
}

func TestClockFiresTimersInOrderOnlyWhenAdvanced(t *testing.T) {
	clk := telegramtest.NewClock(start)
	var fired []string
	clk.AfterFunc(2*time.Second, func() { fired = append(fired, fmt.Sprint("b@", clk.Now().Sub(start))) })
	clk.AfterFunc(time.Second, func() { fired = append(fired, fmt.Sprint("a@", clk.Now().Sub(start))) })
	stop := clk.AfterFunc(1500*time.Millisecond, func() { fired = append(fired, "stopped") })
	if !stop() || stop() {
		t.Error("stop: want true once, then false")
	}
	if d, ok := clk.Next(); !ok || d != time.Second || clk.Pending() != 2 {
		t.Errorf("next %v %v, pending %d", d, ok, clk.Pending())
	}
	clk.Advance(999 * time.Millisecond)
	if len(fired) != 0 {
		t.Errorf("fired early: %v", fired)
	}
	clk.Advance(5 * time.Second)
	if fmt.Sprint(fired) != "[a@1s b@2s]" || clk.Now() != start.Add(5999*time.Millisecond) {
		t.Errorf("fired %v, now +%v", fired, clk.Now().Sub(start))
	}
	if _, ok := clk.AdvanceToNext(); ok {
		t.Error("AdvanceToNext with nothing pending")
	}
	// AwaitPending sees a timer set on another goroutine.
	go clk.AfterFunc(time.Minute, func() {})
	if !clk.AwaitPending(5*time.Second, 1) {
		t.Error("AwaitPending missed a timer")
	}
	if d, ok := clk.AdvanceToNext(); !ok || d != time.Minute {
		t.Errorf("AdvanceToNext moved %v %v, want 1m", d, ok)
	}
}
