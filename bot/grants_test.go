package bot_test

import (
	"strings"
	"testing"

	"tollgate/bot/telegramtest"
	"tollgate/prompt/prompttest"
)

// hasMarkup matches an editMessageReplyMarkup whose keyboard has n buttons.
func hasButtons(n int) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool {
		var k kb
		if c.Decode("reply_markup", &k) != nil {
			return false
		}
		got := 0
		for _, row := range k.InlineKeyboard {
			got += len(row)
		}
		return got == n
	}
}

// TestAlwaysGrantsTheScopeAndTellsTheChatOnce: 🔁 Always… turns the
// request's buttons into the choice (no new message); choosing "this chat
// · until revoked" approves the call and records a grant, and the next
// call it covers runs without a request, with one line saying which grant
// allowed it.
func TestAlwaysGrantsTheScopeAndTellsTheChatOnce(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Calls(prompttest.Call("c2", "shell.run", `{ "cmd": "ls" }`)),
		prompttest.Answer("listed twice"),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list it twice")
	msg, approve, _ := h.approvalMessage(1)
	id := strings.TrimPrefix(approve, "a:")
	sent := len(h.srv.Calls(telegramtest.Method("sendMessage")))

	cb := h.srv.Press(alice.ID, alice, msg.ID, "w:"+id)
	h.srv.WaitCall(t, wait, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == cb && strings.HasPrefix(c.Param("text"), "Always allow exactly this input (hash ")
	}))
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageReplyMarkup", telegramtest.Succeeded, hasButtons(5)))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage"))); n != sent {
		t.Fatalf("Always… sent %d messages; it must edit the request's buttons only", n-sent)
	}
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("Always… alone ran the tool %d times", n)
	}

	cb = h.srv.Press(alice.ID, alice, msg.ID, "g:"+id+":cf")
	h.srv.WaitCall(t, wait, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == cb && strings.Contains(c.Param("text"), "and from now on: exactly this input") &&
			strings.Contains(c.Param("text"), "in this chat, until revoked")
	}))
	line := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("without asking")))
	m, _ := line.Message()
	for _, want := range []string{"🔁 Ran shell.run without asking: grant g", "exactly this input", "this chat, until revoked", "by Alice (111)", "/grants"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("grant line %q lacks %q", m.Text, want)
		}
	}
	if strings.Contains(m.Text, "\n") {
		t.Errorf("grant line %q is more than one line", m.Text)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("listed twice")))
	if n := h.ran.Load(); n != 2 {
		t.Fatalf("tool ran %d times, want 2 (approved, then granted)", n)
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))); n != 1 {
		t.Fatalf("%d requests shown; the granted call must not ask", n)
	}
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Approved by Alice (111)")
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "and from now on: exactly this input")
}

// TestBackRestoresTheRequestButtons: « Back leaves the choice without
// deciding anything.
func TestBackRestoresTheRequestButtons(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	id := strings.TrimPrefix(approve, "a:")
	h.srv.Press(alice.ID, alice, msg.ID, "w:"+id)
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageReplyMarkup", telegramtest.Succeeded, hasButtons(5)))
	h.srv.Press(alice.ID, alice, msg.ID, "b:"+id)
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageReplyMarkup", telegramtest.Succeeded, hasButtons(5+0), func(c telegramtest.Call) bool {
		return strings.Contains(c.Param("reply_markup"), `"a:`+id+`"`)
	}))
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("tool ran %d times; nothing was decided", n)
	}
	if st := mustPending(t, h); st.ApprovalID != id {
		t.Fatalf("pending %s, want %s still", st.ApprovalID, id)
	}
}

// TestForgedGrantChoiceIsRefused: a choice the keyboard never offers, or
// a grant button without one, decides nothing.
func TestForgedGrantChoiceIsRefused(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	id := strings.TrimPrefix(approve, "a:")
	for _, data := range []string{"g:" + id, "g:" + id + ":xx", "a:" + id + ":cf", "w:" + id + ":ch"} {
		cb := h.srv.Press(alice.ID, alice, msg.ID, data)
		h.waitAnswer(cb, "This approval request has expired.")
	}
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("a forged press ran the tool %d times", n)
	}
	mustPending(t, h)
}

// TestGrantsListRevokesAndTheCallAsksAgain: /grants lists a grant with a
// revoke button; revoking it edits the list, and the call it covered
// asks again.
func TestGrantsListRevokesAndTheCallAsksAgain(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Answer("first"),
		prompttest.Calls(prompttest.Call("c2", "shell.run", `{"cmd":"ls"}`)),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/grants")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("No grants")))

	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	id := strings.TrimPrefix(approve, "a:")
	h.srv.Press(alice.ID, alice, msg.ID, "g:"+id+":ah")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("first")))

	h.srv.UserMessage(alice.ID, alice, "/grants")
	list := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Grants")))
	lm, _ := list.Message()
	for _, want := range []string{"1. shell.run: exactly this input", "every chat, until 2026-11-22 04:04 UTC", "by Alice (111)"} {
		if !strings.Contains(lm.Text, want) {
			t.Errorf("grants list %q lacks %q", lm.Text, want)
		}
	}
	var k kb
	if err := list.Decode("reply_markup", &k); err != nil || len(k.InlineKeyboard) != 1 {
		t.Fatalf("grants keyboard %+v (%v), want one revoke button", k, err)
	}
	revoke := k.InlineKeyboard[0][0]["callback_data"].(string)
	if !strings.HasPrefix(revoke, "x:g") || k.InlineKeyboard[0][0]["text"] != "Revoke 1" {
		t.Fatalf("revoke button %v", k.InlineKeyboard[0][0])
	}
	// The list is edited in place.
	cb := h.srv.Press(alice.ID, alice, lm.ID, revoke)
	h.srv.WaitCall(t, wait, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == cb && strings.HasPrefix(c.Param("text"), "Revoked: exactly this input")
	}))
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("No grants")))
	cb = h.srv.Press(alice.ID, alice, lm.ID, revoke)
	h.waitAnswer(cb, "That grant has ended already.")

	h.srv.UserMessage(alice.ID, alice, "list again")
	h.approvalMessage(3) // asks again (the second keyboard was the list)
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1: the revoked grant ran it", n)
	}
}
