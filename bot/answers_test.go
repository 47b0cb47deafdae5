package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
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
