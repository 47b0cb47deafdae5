package bot_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// hookStore is a memStore whose next AddApprovalMessage first runs a hook
// set by the test; the hook may drop the record, as a process that dies
// between sending a copy and recording it does.
type hookStore struct {
	*memStore
	mu   sync.Mutex
	hook func(ctx context.Context, approvalID string, chat int64, msg int) (drop bool)
}

// setHook arms f for the next AddApprovalMessage call only.
func (s *hookStore) setHook(f func(ctx context.Context, approvalID string, chat int64, msg int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = f
}

func (s *hookStore) AddApprovalMessage(ctx context.Context, id string, chat int64, msg int) error {
	s.mu.Lock()
	f := s.hook
	s.hook = nil
	s.mu.Unlock()
	if f != nil && f(ctx, id, chat, msg) {
		return nil
	}
	return s.memStore.AddApprovalMessage(ctx, id, chat, msg)
}

var _ bot.Store = (*hookStore)(nil)

// withHookStore makes the harness's bot use a hookStore over its memStore.
func withHookStore(hs *hookStore) option {
	return func(c *config) {
		hs.memStore = c.Store.(*memStore)
		c.Store = hs
	}
}

func messageID(id int) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool { return c.Int("message_id") == int64(id) }
}

// keyboardMessage waits for the n-th message with buttons without waiting
// for it to be recorded (the record may be meant to go missing).
func keyboardMessage(t *testing.T, srv *telegramtest.Server, n int) (models.Message, string) {
	t.Helper()
	calls := srv.WaitCalls(t, wait, n, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))
	m, err := calls[n-1].Message()
	if err != nil {
		t.Fatal(err)
	}
	var k kb
	if err := calls[n-1].Decode("reply_markup", &k); err != nil || len(k.InlineKeyboard) == 0 || len(k.InlineKeyboard[0]) == 0 {
		t.Fatalf("reply_markup %q: %v", calls[n-1].Param("reply_markup"), err)
	}
	return m, k.InlineKeyboard[0][0]["callback_data"].(string)
}

// mustBeClosed checks the message as Telegram shows it now: no buttons, and
// the outcome line.
func mustBeClosed(t *testing.T, srv *telegramtest.Server, chat int64, id int, outcome string) {
	t.Helper()
	m, ok := srv.Message(chat, id)
	if !ok {
		t.Fatalf("message %d not found", id)
	}
	if !strings.Contains(m.Text, outcome) {
		t.Errorf("message %d reads %q, want %q in it", id, m.Text, outcome)
	}
	if m.ReplyMarkup != nil && len(m.ReplyMarkup.InlineKeyboard) > 0 {
		t.Errorf("message %d still has buttons: %+v", id, m.ReplyMarkup)
	}
}

func TestPollsAnywayWhenTheServerHasNoDeleteWebhook(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("deleteWebhook", 1, telegramtest.Fault{Code: http.StatusNotFound, Description: "Not Found"})
	h.start() // waits for setMyCommands, which comes after deleteWebhook
	calls := h.srv.Calls(telegramtest.Method("deleteWebhook"))
	if len(calls) != 1 || calls[0].Status != http.StatusNotFound {
		t.Fatalf("deleteWebhook calls %+v, want one answered 404", calls)
	}
	if !strings.Contains(h.logs.String(), "polling anyway") {
		t.Errorf("no warning logged; logs:\n%s", h.logs.String())
	}
	h.srv.UserMessage(alice.ID, alice, "/help")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(alice.ID), textHas("Commands:")))
}

func TestOtherDeleteWebhookFailuresStopRun(t *testing.T) {
	for name, tc := range map[string]struct {
		fault telegramtest.Fault
		n     int // faults queued: a 5xx is retried until MaxAttempts
		is    error
	}{
		"unauthorized": {telegramtest.Fault{Code: http.StatusUnauthorized, Description: "Unauthorized"}, 1, tgbot.ErrorUnauthorized},
		"bad request":  {telegramtest.BadRequest("bad webhook: something"), 1, tgbot.ErrorBadRequest},
		"server error": {telegramtest.ServerError(), 5, nil},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil, func(c *config) { c.Limits.MaxAttempts = 5 })
			h.srv.Fail("deleteWebhook", tc.n, tc.fault)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			err := h.bot.Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("Run returned only when its context ended: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), "delete webhook") {
				t.Fatalf("Run = %v, want a delete webhook error", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Run = %v, want it to wrap %v", err, tc.is)
			}
			if n := len(h.srv.Calls(telegramtest.Method("deleteWebhook"))); n != tc.n {
				t.Errorf("%d deleteWebhook calls, want %d", n, tc.n)
			}
			if n := len(h.srv.Calls(telegramtest.Method("getUpdates"))); n != 0 {
				t.Errorf("polled %d times after deleteWebhook failed", n)
			}
		})
	}
}

func TestCopySentWhileAnotherIsPressedIsClosedAtOnce(t *testing.T) {
	first := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`))})
	first.start()
	first.srv.UserMessage(alice.ID, alice, "list")
	old, approve, _ := first.approvalMessage(1)

	// A start re-sends the waiting request; that copy is on its way (sent,
	// not yet recorded) when Alice presses the first copy. The decision's
	// edit waits behind the copy in the chat's outbox; the copy, once
	// recorded, finds the request decided and closes every copy at once.
	hs := &hookStore{}
	h := first.restart([]prompttest.Step{prompttest.Answer("done")}, withHookStore(hs))
	type pressed struct{ cb string }
	press := make(chan pressed, 1)
	hs.setHook(func(_ context.Context, _ string, _ int64, _ int) bool {
		cb := h.srv.Press(alice.ID, alice, old.ID, approve)
		// The press is decided before this copy's record goes on.
		h.srv.WaitCall(t, wait, telegramtest.Method("answerCallbackQuery", func(c telegramtest.Call) bool { return c.Param("callback_query_id") == cb }))
		press <- pressed{cb}
		return false
	})
	h.start()
	var p pressed
	select {
	case p = <-press:
	case <-time.After(wait):
		t.Fatal("the re-sent copy was never recorded")
	}
	h.waitAnswer(p.cb, "Approved")
	second, _ := keyboardMessage(t, h.srv, 2)
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, messageID(second.ID)))
	mustBeClosed(t, h.srv, alice.ID, old.ID, "Approved by Alice (111)")
	mustBeClosed(t, h.srv, alice.ID, second.ID, "Approved by Alice (111)")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

func TestCopySentAfterARejectionIsClosedAtOnce(t *testing.T) {
	hs := &hookStore{}
	h := newHarness(t, lsThenAnswer("not done"), withHookStore(hs))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	first, _, _ := h.approvalMessage(1)

	// Decided through the service, so no press edits anything: only the
	// check after recording the /pending copy can close both copies.
	decided := make(chan error, 1)
	hs.setHook(func(ctx context.Context, id string, _ int64, _ int) bool {
		decided <- h.svc.Reject(ctx, id, "no", "Bob (222)")
		return false
	})
	h.srv.UserMessage(alice.ID, alice, "/pending")
	select {
	case err := <-decided:
		if err != nil {
			t.Fatalf("reject: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the /pending copy was never recorded")
	}
	second, _ := keyboardMessage(t, h.srv, 2)
	edits := h.srv.WaitCalls(t, wait, 2, telegramtest.Method("editMessageText", telegramtest.Succeeded))
	if got := edits[0].Int("message_id") + edits[1].Int("message_id"); got != int64(first.ID+second.ID) {
		t.Errorf("edited %d and %d, want %d and %d", edits[0].Int("message_id"), edits[1].Int("message_id"), first.ID, second.ID)
	}
	mustBeClosed(t, h.srv, alice.ID, first.ID, "Rejected by Bob (222)")
	mustBeClosed(t, h.srv, alice.ID, second.ID, "Rejected by Bob (222)")
	if n := h.ran.Load(); n != 0 {
		t.Errorf("rejected tool ran %d times", n)
	}
}

func TestPressOnAnUnrecordedCopyEditsAndRecordsIt(t *testing.T) {
	hs := &hookStore{}
	dropped := make(chan struct{})
	hs.setHook(func(context.Context, string, int64, int) bool {
		close(dropped)
		return true
	})
	h := newHarness(t, lsThenAnswer("done"), withHookStore(hs))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	lost, approve := keyboardMessage(t, h.srv, 1)
	select {
	case <-dropped:
	case <-time.After(wait):
		t.Fatal("the first copy was never recorded")
	}
	h.srv.UserMessage(alice.ID, alice, "/pending")
	kept, _, _ := h.approvalMessage(2) // waits for its record
	if _, err := h.store.ApprovalByMessage(context.Background(), alice.ID, lost.ID); err == nil {
		t.Fatal("the first copy was recorded; the test lost its premise")
	}

	cb := h.srv.Press(alice.ID, alice, lost.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, messageID(lost.ID)))
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, messageID(kept.ID)))
	mustBeClosed(t, h.srv, alice.ID, lost.ID, "Approved by Alice (111)")
	mustBeClosed(t, h.srv, alice.ID, kept.ID, "Approved by Alice (111)")
	copies, err := h.store.ApprovalMessages(context.Background(), strings.TrimPrefix(approve, "a:"))
	want := []prompt.ApprovalCopy{{ChatID: alice.ID, MessageID: kept.ID}, {ChatID: alice.ID, MessageID: lost.ID}}
	if err != nil || !slices.Equal(copies, want) {
		t.Errorf("ApprovalMessages = %v %v, want %v", copies, err, want)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
}

// TestAnswerFinishedAtShutdownIsStillSent: when Run's context ends while an
// answer is on its way (here held by a 429), the answer is still delivered
// within the drain, and Run returns after it.
func TestAnswerFinishedAtShutdownIsStillSent(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("last words before the restart")})
	h.start()
	h.srv.Fail("sendMessage", 1, telegramtest.TooManyRequests(1))
	h.srv.UserMessage(alice.ID, alice, "hello")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return !c.OK() }))
	h.stop()
	if got := h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("last words"))); len(got) != 1 {
		t.Fatalf("answer sent %d times; want once, before Run returned", len(got))
	}
}
