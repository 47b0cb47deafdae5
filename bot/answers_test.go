package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func answerCalls(h *harness, text string) []telegramtest.Call {
	return h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas(text)))
}

// waitMarked waits until the bot recorded prompt id's answer as dealt with.
func waitMarked(t *testing.T, h *harness, id string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if note, ok := h.store.answeredNote(id); ok {
			return note
		}
		if time.Now().After(deadline) {
			t.Fatalf("answer of %s never marked", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// lastPromptID waits until alice's chat has n prompts and returns the
// latest one's ID.
func lastPromptID(t *testing.T, h *harness, n int) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ps, err := h.pstore.History(context.Background(), "tg:111", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) >= n {
			return ps[n-1].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d prompts, want %d", len(ps), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAnswerKeptFromItsChatByACrashIsSentAtStart(t *testing.T) {
	h := newHarness(t, nil)
	missed := &prompt.Prompt{ID: "p_missed", ConversationID: "tg:111", State: prompt.StateCompleted, Input: "q",
		Output: []prompt.Item{{Type: prompt.ItemText, Turn: 1, Text: "the answer you missed"}}}
	failed := &prompt.Prompt{ID: "p_failed", ConversationID: "tg:111", State: prompt.StateFailed, Input: "q2",
		Error: "The model failed: endpoint down"}
	h.store.ended = []*prompt.Prompt{missed, failed}
	h.srv.UserMessage(alice.ID, alice, "/help") // Telegram knows the chat from before the crash
	h.start()
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("the answer you missed")))
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("endpoint down")))
	if note := waitMarked(t, h, "p_missed"); note != "" {
		t.Fatalf("note = %q", note)
	}
	waitMarked(t, h, "p_failed")
	h.stop()
	if n := len(answerCalls(h, "the answer you missed")); n != 1 {
		t.Fatalf("answer sent %d times", n)
	}
}

func TestDeliveredAnswerIsMarkedAndARefusedOneGivenUp(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("first answer"), prompttest.Answer("second answer")})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "one")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("first answer")))
	if note := waitMarked(t, h, lastPromptID(t, h, 1)); note != "" {
		t.Fatalf("delivered answer noted %q", note)
	}

	// Telegram refuses for good (the user blocked the bot): not retried at
	// the next start either.
	h.srv.Fail("sendMessage", 1, telegramtest.Fault{Code: 403, Description: "Forbidden: bot was blocked by the user"})
	h.srv.UserMessage(alice.ID, alice, "two")
	if note := waitMarked(t, h, lastPromptID(t, h, 2)); !strings.Contains(note, "blocked") {
		t.Fatalf("refused answer noted %q", note)
	}
}

func TestAnswerThatCouldNotBeSentIsLeftForTheNextStart(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("unlucky answer")})
	h.start()
	h.srv.Fail("sendMessage", 100, telegramtest.ServerError())
	h.srv.UserMessage(alice.ID, alice, "one")
	// Every attempt fails (5 with the harness's short backoff).
	h.srv.WaitCalls(t, wait, 5, telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return !c.OK() }))
	h.stop()
	if _, ok := h.store.answeredNote(lastPromptID(t, h, 1)); ok {
		t.Fatal("an answer that never arrived was marked answered")
	}
}

// TestAnswerIsSentOnceWhenItEndsBeforeRun: a prompt recovered as running
// ends before Run, so its completed event is queued; the store lists it as
// unanswered too. It is sent once.
func TestAnswerIsSentOnceWhenItEndsBeforeRun(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("answer after recovery")})
	ctx := context.Background()
	running := &prompt.Prompt{ID: "p_resumed", ConversationID: "tg:111", State: prompt.StateRunning, Input: "q", Rev: 1}
	if err := h.pstore.SavePrompt(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		p, err := h.pstore.Prompt("p_resumed")
		if err != nil {
			t.Fatal(err)
		}
		if p.State == prompt.StateCompleted {
			h.store.ended = []*prompt.Prompt{p}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("recovered prompt did not complete")
		}
		time.Sleep(time.Millisecond)
	}
	h.srv.UserMessage(alice.ID, alice, "/help") // Telegram knows the chat from before the crash
	h.start()
	if note := waitMarked(t, h, "p_resumed"); note != "" {
		t.Fatalf("note = %q", note)
	}
	h.stop()
	if n := len(answerCalls(h, "answer after recovery")); n != 1 {
		t.Fatalf("answer sent %d times", n)
	}
}
