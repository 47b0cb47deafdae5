package bot_test

import (
	"strings"
	"testing"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// forcesReply matches a message that asks for a reply.
func forcesReply(c telegramtest.Call) bool {
	return strings.Contains(c.Param("reply_markup"), `"force_reply":true`)
}

// lastToolResult returns the text of the tool result for callID in the
// model's latest request.
func lastToolResult(t *testing.T, m *prompttest.Model, callID string) (string, prompt.Message) {
	t.Helper()
	reqs := m.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never asked")
	}
	var asst prompt.Message
	for _, msg := range reqs[len(reqs)-1].Messages {
		if msg.Role == prompt.RoleAssistant && len(msg.ToolCalls) > 0 {
			asst = msg
		}
		if msg.Role == prompt.RoleTool && msg.ToolCallID == callID {
			return msg.Text, asst
		}
	}
	t.Fatalf("no result for %s in the model's last request", callID)
	return "", asst
}

// TestEditButtonThenReplyAsksForTheEditedCallAndTellsTheModel: ✏️ Edit
// sends a message that forces a reply and shows the input; a reply with
// new JSON closes the request as edited and shows the edited call as a
// new request, which runs with the edited input once approved; the model
// learns what ran and what changed.
func TestEditButtonThenReplyAsksForTheEditedCallAndTellsTheModel(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"rm -rf /"}`)),
		prompttest.Answer("done"),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "clean up")
	msg, approve, _ := h.approvalMessage(1)
	id := strings.TrimPrefix(approve, "a:")

	cb := h.srv.Press(alice.ID, alice, msg.ID, "e:"+id)
	h.waitAnswer(cb, "Reply with the new input")
	ask := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, forcesReply))
	am, _ := ask.Message()
	if !strings.Contains(am.Text, `{"cmd":"rm -rf /"}`) && !strings.Contains(am.Text, `"cmd": "rm -rf /"`) {
		t.Errorf("edit message %q does not show the input now", am.Text)
	}
	if am.ReplyToMessage == nil || am.ReplyToMessage.ID != msg.ID {
		t.Errorf("edit message does not reply to the request")
	}

	h.srv.UserReply(alice.ID, alice, am.ID, `{"cmd": "rm -rf /tmp/cache"}`)
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Edited. The edited call follows")))
	next, approve2, _ := h.approvalMessage(2)
	for _, want := range []string{"rm -rf /tmp/cache", "Input edited by Alice (111)"} {
		if !strings.Contains(next.Text, want) {
			t.Errorf("edited request %q lacks %q", next.Text, want)
		}
	}
	if approve2 == approve {
		t.Fatal("the edited call reuses the original approval")
	}
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Edited by Alice (111)")
	cb = h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "This request was edited; decide the edited one.")
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("the edit ran the tool %d times before approval", n)
	}

	cb = h.srv.Press(alice.ID, alice, next.ID, approve2)
	h.waitAnswer(cb, "Approved")
	if got := <-h.ranArg; got != "rm -rf /tmp/cache" {
		t.Fatalf("tool ran %q, want the edited input", got)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	res, asst := lastToolResult(t, h.model, "c1")
	for _, want := range []string{`{"cmd":"rm -rf /tmp/cache"}`, `cmd: "rm -rf /" → "rm -rf /tmp/cache"`, "ran: rm -rf /tmp/cache"} {
		if !strings.Contains(res, want) {
			t.Errorf("model's result %q lacks %q", res, want)
		}
	}
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Arguments != `{"cmd":"rm -rf /"}` {
		t.Errorf("assistant turn %+v: the transcript must keep what the model asked", asst.ToolCalls)
	}
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestEditCommandRepliesAndRefusals: "/edit {…}" as a reply to the request
// edits it; a bad input is refused with the reason and changes nothing;
// /edit with nothing waiting says so.
func TestEditCommandRepliesAndRefusals(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Answer("done"),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/edit {\"cmd\":\"pwd\"}")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("nothing to edit")))

	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	for _, tc := range []struct{ text, want string }{
		{`/edit {"cmd": 5}`, "That edit was not taken: invalid arguments for shell.run"},
		{`/edit {"nope": "x"}`, "That edit was not taken: invalid arguments for shell.run"},
		{`/edit {"cmd": "a", "cmd": "b"}`, `That edit was not taken: arguments for shell.run: duplicate key "cmd"`},
		{`/edit {"cmd":`, "That edit was not taken: arguments for shell.run are not valid JSON"},
		{`/edit { "cmd" : "ls" }`, "That edit was not taken: that is the input the request shows already"},
		{`/edit`, "Send /edit followed by the new input"},
	} {
		h.srv.UserReply(alice.ID, alice, msg.ID, tc.text)
		h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas(tc.want)))
	}
	if st := mustPending(t, h); st.ApprovalID != strings.TrimPrefix(approve, "a:") {
		t.Fatalf("a refused edit changed the request")
	}
	if m, _ := h.srv.Message(alice.ID, msg.ID); m.ReplyMarkup == nil || len(m.ReplyMarkup.InlineKeyboard) == 0 {
		t.Fatal("a refused edit closed the request")
	}

	h.srv.UserReply(alice.ID, alice, msg.ID, "/edit {\"cmd\":\"pwd\"}")
	next, approve2, _ := h.approvalMessage(2)
	if !strings.Contains(next.Text, "pwd") {
		t.Fatalf("edited request %q", next.Text)
	}
	// Edit the edited one, without a reply: the chat's waiting request.
	h.srv.UserMessage(alice.ID, alice, "/edit {\"cmd\":\"whoami\"}")
	third, approve3, _ := h.approvalMessage(3)
	if !strings.Contains(third.Text, "whoami") || approve3 == approve2 {
		t.Fatalf("second edit: request %q", third.Text)
	}
	mustBeClosed(t, h.srv, alice.ID, next.ID, "Edited by Alice (111)")
	h.srv.Press(alice.ID, alice, third.ID, approve3)
	if got := <-h.ranArg; got != "whoami" {
		t.Fatalf("tool ran %q", got)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	res, _ := lastToolResult(t, h.model, "c1")
	if !strings.Contains(res, `cmd: "ls" → "whoami"`) {
		t.Errorf("model's result %q: the change is from what the model asked", res)
	}
}
