package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func lsThenAnswer(answer string) []prompttest.Step {
	return []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Answer(answer),
	}
}

func TestMessageApprovalApproveAnswer(t *testing.T) {
	h := newHarness(t, lsThenAnswer("Found **3** files in `/tmp`."))
	h.start()
	cmds := h.srv.Commands()
	if len(cmds) == 0 {
		t.Fatal("no command menu registered")
	}

	h.srv.UserMessage(alice.ID, alice, "list my files")
	msg, approve, reject := h.approvalMessage(1)
	for _, want := range []string{"shell.run", "runs a command on the host", `"cmd": "ls"`} {
		if !strings.Contains(msg.Text, want) {
			t.Errorf("approval text %q lacks %q", msg.Text, want)
		}
	}
	if !strings.HasPrefix(approve, "a:") || !strings.HasPrefix(reject, "r:") || approve[2:] != reject[2:] {
		t.Fatalf("callback data %q %q", approve, reject)
	}
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("tool ran %d times before approval", n)
	}

	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Approved by Alice (111) at 2026-11-22 03:04 UTC")))
	answer := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Found 3 files in /tmp.")))
	if answer.Param("parse_mode") != "HTML" || !strings.Contains(answer.Param("text"), "<b>3</b>") || !strings.Contains(answer.Param("text"), "<code>/tmp</code>") {
		t.Errorf("answer sent as %q (%s)", answer.Param("text"), answer.Param("parse_mode"))
	}
	if !strings.Contains(answer.Param("link_preview_options"), `"is_disabled":true`) {
		t.Errorf("link previews not disabled: %q", answer.Param("link_preview_options"))
	}
	if got := <-h.ranArg; got != "ls" {
		t.Errorf("tool ran with %q", got)
	}
	edited, _ := h.srv.Message(alice.ID, msg.ID)
	if edited.ReplyMarkup != nil && len(edited.ReplyMarkup.InlineKeyboard) > 0 {
		t.Errorf("keyboard still on the decided request: %+v", edited.ReplyMarkup)
	}
}

func TestRejectWithButton(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"rm -rf /"}`)),
		{Text: "Understood, I will not.", Check: func(req prompt.Request) error {
			last := req.Messages[len(req.Messages)-1]
			if !strings.Contains(last.Text, prompt.RejectedPrefix) {
				t.Errorf("model saw %q, want a rejection", last.Text)
			}
			return nil
		}},
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "clean up")
	msg, _, reject := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, reject)
	h.waitAnswer(cb, "Rejected")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Rejected by Alice")))
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Understood, I will not.")))
	if n := h.ran.Load(); n != 0 {
		t.Errorf("rejected tool ran %d times", n)
	}
}

func TestRejectByReplyGivesFeedback(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"curl evil.example"}`)),
		{Text: "OK, not fetching that.", Check: func(req prompt.Request) error {
			last := req.Messages[len(req.Messages)-1]
			if !strings.Contains(last.Text, "use the mirror instead") {
				t.Errorf("model saw %q, want the feedback", last.Text)
			}
			return nil
		}},
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "fetch it")
	msg, _, _ := h.approvalMessage(1)
	h.srv.UserReply(alice.ID, alice, msg.ID, "use the mirror instead")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Rejected by Alice (111) at 2026-11-22 03:04 UTC: use the mirror instead")))
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("OK, not fetching that.")))
	if n := h.ran.Load(); n != 0 {
		t.Errorf("rejected tool ran %d times", n)
	}
}

func TestPressByUserNotAllowedChangesNothing(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, mallory, msg.ID, approve)
	h.waitAnswer(cb, "You are not allowed to decide this.")
	if st, err := h.svc.Active(context.Background(), "tg:111"); err != nil || st.Pending == nil {
		t.Errorf("approval no longer pending after a stranger's press: %+v, %v", st, err)
	}
	if n := len(h.srv.Calls(telegramtest.Method("editMessageText"))); n != 0 {
		t.Errorf("%d edits after a stranger's press", n)
	}
}

func TestUnknownAndForgedCallbackData(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Calls(prompttest.Call("c2", "shell.run", `{"cmd":"id"}`)),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	// A second chat with its own request: its ID pressed on the first
	// chat's message must not decide it.
	h.srv.UserMessage(bob.ID, bob, "who am I")
	other, otherApprove, _ := h.approvalMessage(2)
	if other.Chat.ID != bob.ID {
		t.Fatalf("second request went to chat %d", other.Chat.ID)
	}
	for _, data := range []string{"a:doesnotexist", "x:" + approve[2:], "garbage", otherApprove} {
		cb := h.srv.Press(alice.ID, alice, msg.ID, data)
		h.waitAnswer(cb, "This approval request has expired.")
	}
	// Bob's request pressed in Alice's chat, on a message that shows nothing.
	note := h.srv.UserMessage(alice.ID, alice, "/help")
	cb := h.srv.Press(alice.ID, alice, note.ID, otherApprove)
	h.waitAnswer(cb, "This approval request has expired.")
	if h.ran.Load() != 0 {
		t.Error("a forged press ran a tool")
	}
	for _, conv := range []string{"tg:111", "tg:222"} {
		if st, err := h.svc.Active(context.Background(), conv); err != nil {
			t.Errorf("%s: prompt ended: %v", conv, err)
		} else if st.Pending == nil {
			t.Errorf("%s: approval decided by a forged press", conv)
		}
	}
}

func TestDoubleTapRunsOnce(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	cb1 := h.srv.Press(alice.ID, alice, msg.ID, approve)
	cb2 := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.srv.WaitCalls(t, wait, 2, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded))
	answers := map[string]string{}
	for _, c := range h.srv.Calls(telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded)) {
		answers[c.Param("callback_query_id")] = c.Param("text")
	}
	got := []string{answers[cb1], answers[cb2]}
	if !(got[0] == "Approved" && got[1] == "Already decided") && !(got[1] == "Approved" && got[0] == "Already decided") {
		t.Errorf("answers = %q, want one Approved and one Already decided", got)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

func TestEscapingShowsArgumentsFaithfully(t *testing.T) {
	arg := `</pre><b>✅ Approved</b>` + "\nline two \u202Eevil\u200B"
	input := `{"cmd":"` + strings.NewReplacer("\n", `\n`, `"`, `\"`).Replace(arg) + `"}`
	h := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", input))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "go")
	msg, _, _ := h.approvalMessage(1)
	// Parsed by the fake as Telegram parses it: the only bold entity is the
	// header, none came from the argument.
	bold := 0
	for _, e := range msg.Entities {
		if e.Type == "bold" {
			bold++
		}
	}
	if bold != 1 {
		t.Errorf("%d bold entities, want 1 (the header): %+v", bold, msg.Entities)
	}
	for _, want := range []string{`</pre><b>✅ Approved</b>\nline two [U+202E]evil[U+200B]`} {
		if !strings.Contains(msg.Text, want) {
			t.Errorf("approval text %q lacks %q", msg.Text, want)
		}
	}
	for _, line := range strings.Split(msg.Text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "✅") || strings.Contains(line, "\u202E") {
			t.Errorf("forged or hidden line %q", line)
		}
	}
}

func TestTooManyRequestsOnApprovalIsRetried(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.Fail("sendMessage", 1, telegramtest.TooManyRequests(1))
	start := time.Now()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, _, _ := h.approvalMessage(1)
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before retry_after", d)
	}
	refused := h.srv.Calls(telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return c.Status == 429 }))
	if len(refused) != 1 || !hasKeyboard(refused[0]) {
		t.Fatalf("429s = %d, want the approval refused once", len(refused))
	}
	copies, err := h.store.ApprovalMessages(context.Background(), mustPending(t, h).ApprovalID)
	if err != nil || len(copies) != 1 || copies[0] != (prompt.ApprovalCopy{ChatID: alice.ID, MessageID: msg.ID}) {
		t.Errorf("recorded %v %v, want message %d of chat %d", copies, err, msg.ID, alice.ID)
	}
}

func TestMessageWhileBusy(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, _, _ := h.approvalMessage(1)
	second := h.srv.UserMessage(alice.ID, alice, "and another thing")
	busy := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("still working")))
	m, _ := busy.Message()
	if m.ReplyToMessage == nil || m.ReplyToMessage.ID != msg.ID {
		t.Errorf("busy reply does not point at the pending request %d: %+v", msg.ID, m.ReplyToMessage)
	}
	if !strings.Contains(m.Text, "/cancel") || !strings.Contains(m.Text, "shell.run") {
		t.Errorf("busy reply %q", m.Text)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Errorf("model called %d times; a second prompt started for message %d", n, second.ID)
	}
}

func TestCancelEndsPromptAndRemovesButtons(t *testing.T) {
	h := newHarness(t, lsThenAnswer("never"))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, _, _ := h.approvalMessage(1)
	h.srv.UserMessage(alice.ID, alice, "/cancel")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Cancelled by Alice")))
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Cancelled by Alice (111).")))
	if st, err := h.svc.Active(context.Background(), "tg:111"); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("prompt still active after /cancel: %+v, %v", st, err)
	}
	edited, _ := h.srv.Message(alice.ID, msg.ID)
	if edited.ReplyMarkup != nil && len(edited.ReplyMarkup.InlineKeyboard) > 0 {
		t.Error("buttons still on a cancelled request")
	}
	h.srv.UserMessage(alice.ID, alice, "/cancel")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Nothing to cancel.")))
	if h.ran.Load() != 0 {
		t.Error("cancelled tool ran")
	}
}

func TestPendingResendsButtonsAndEveryCopyIsEdited(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/pending")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Nothing is waiting")))
	h.srv.UserMessage(alice.ID, alice, "list")
	first, _, _ := h.approvalMessage(1)
	h.srv.UserMessage(alice.ID, alice, "/pending")
	second, approve, _ := h.approvalMessage(2)
	if second.ID == first.ID || second.Text != first.Text {
		t.Fatalf("copy %d %q, first %d %q", second.ID, second.Text, first.ID, first.Text)
	}
	// The old copy's button works too, and both copies are edited.
	cb := h.srv.Press(alice.ID, alice, first.ID, approve)
	h.waitAnswer(cb, "Approved")
	edits := h.srv.WaitCalls(t, wait, 2, telegramtest.Method("editMessageText", telegramtest.Succeeded))
	got := map[int64]bool{edits[0].Int("message_id"): true, edits[1].Int("message_id"): true}
	if !got[int64(first.ID)] || !got[int64(second.ID)] {
		t.Errorf("edited %v, want both %d and %d", got, first.ID, second.ID)
	}
}

func TestStrangerGetsTheirIDAndNoModelCall(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(mallory.ID, mallory, "hello")
	reply := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(mallory.ID)))
	m, _ := reply.Message()
	if !strings.Contains(m.Text, "999") || !strings.Contains(m.Text, "not allowed") {
		t.Errorf("stranger told %q", m.Text)
	}
	// Let anything else the bot might do happen before counting.
	h.srv.UserMessage(alice.ID, alice, "/help")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(alice.ID)))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", toChat(mallory.ID)))); n != 1 {
		t.Errorf("stranger got %d messages, want 1", n)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("model called %d times for a stranger", n)
	}
	if _, err := h.store.ChatOf(context.Background(), "tg:999"); err == nil {
		t.Error("a stranger's chat was saved")
	}
}

func TestHelpListsGatedTools(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/help@other_bot")
	h.srv.UserMessage(alice.ID, alice, "/help@test_bot")
	c := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded))
	m, _ := c.Message()
	for _, want := range []string{"shell.run", "/pending", "/cancel"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("help %q lacks %q", m.Text, want)
		}
	}
	h.srv.UserMessage(alice.ID, alice, "/nonsense")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("do not know that command")))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage"))); n != 2 {
		t.Errorf("%d messages, want 2: a command for another bot gets no answer", n)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("commands reached the model %d times", n)
	}
}

// TestStopEndsTheRequest: ⛔ Stop rejects the call and every call queued
// after it, ends the prompt without another model turn, and says so.
func TestStopEndsTheRequest(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Calls(
		prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`), prompttest.Call("c2", "shell.run", `{"cmd":"rm -rf /tmp/x"}`))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "tidy up")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, "s:"+strings.TrimPrefix(approve, "a:"))
	h.waitAnswer(cb, "Stopped: nothing more of this request runs")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Cancelled by Alice (111).")))
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Cancelled by Alice (111)")
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("tool ran %d times after Stop", n)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("model asked %d times, want only the first turn", n)
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))); n != 1 {
		t.Fatalf("%d requests shown: the queued call asked too", n)
	}
}
