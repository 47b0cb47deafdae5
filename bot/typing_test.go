package bot_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func typingIn(chat int64) func(telegramtest.Call) bool {
	return telegramtest.Method("sendChatAction", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("action") == "typing" && c.Int("chat_id") == chat
	})
}

// TestTypingFollowsTheWork: "typing…" shows while a worker advances the
// prompt, stops when it pauses for a human, and comes back when the
// decision lets it go on; the service's activity drives it, not the
// handlers.
func TestTypingFollowsTheWork(t *testing.T) {
	const typing = 5 * time.Millisecond
	var h *harness
	// typed is how many "typing…" the chat had when the prompt paused.
	var mu sync.Mutex
	typed := -1
	h = newHarness(t, []prompttest.Step{
		{ToolCalls: []prompt.ToolCall{prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)}, Check: func(prompt.Request) error {
			// The model answers only once the chat shows typing. This runs
			// on the service's goroutine: report, do not FailNow.
			if _, ok := h.srv.Await(wait, 1, typingIn(alice.ID)); !ok {
				t.Error("no typing shown while the model worked")
			}
			return nil
		}},
		{Text: "listed", Check: func(prompt.Request) error {
			mu.Lock()
			n := typed
			mu.Unlock()
			// Working again after the approval: typing again. One more
			// than typed may be the call that was on its way at the pause.
			if _, ok := h.srv.Await(wait, n+2, typingIn(alice.ID)); !ok {
				t.Error("no typing shown once the approved prompt went on")
			}
			return nil
		}},
	}, func(c *config) { c.Limits.Typing = typing })
	paused := make(chan struct{})
	var once sync.Once
	// Registered after the bot's listener, so it runs after the bot
	// stopped the loop.
	h.svc.OnActivity(func(_ context.Context, a prompt.Activity) {
		if a.Working {
			return
		}
		once.Do(func() {
			mu.Lock()
			typed = len(h.srv.Calls(typingIn(alice.ID)))
			mu.Unlock()
			close(paused)
		})
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	select {
	case <-paused:
	case <-time.After(wait):
		t.Fatal("the worker never stopped on the paused prompt")
	}
	mu.Lock()
	n := typed
	mu.Unlock()
	// Forty renewals' time: a loop still running would have sent many.
	if calls, ok := h.srv.Await(40*typing, n+2, typingIn(alice.ID)); ok {
		t.Fatalf("%d typing actions while the prompt waited for a human; %d before", len(calls), n)
	}

	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("listed")))
}
