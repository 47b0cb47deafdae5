package bot_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
	"tollgate/prompt/prompttest"
)

func TestLongInputIsSentWholeAsDocument(t *testing.T) {
	long := strings.Repeat("x", 6000) + "END"
	h := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"`+long+`"}`))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "go")
	msg, _, _ := h.approvalMessage(1)
	if !strings.Contains(msg.Text, "characters, too long to show here") || strings.Contains(msg.Text, "xxxxxxxx") {
		t.Errorf("approval text %q", msg.Text[:min(len(msg.Text), 300)])
	}
	doc := h.srv.WaitCall(t, wait, telegramtest.Method("sendDocument", telegramtest.Succeeded))
	if !bytes.Contains(doc.Files["document"].Data, []byte(long)) {
		t.Error("document does not hold the whole input")
	}
	m, _ := doc.Message()
	if m.ReplyToMessage == nil || m.ReplyToMessage.ID != msg.ID {
		t.Error("document is not attached to the request")
	}
}

func TestServerErrorsAreRetriedAndEntityErrorsFallBackToPlainText(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("**bold** answer")})
	h.start()
	h.srv.Fail("sendMessage", 2, telegramtest.ServerError())
	h.srv.Fail("sendMessage", 1, telegramtest.BadRequest("can't parse entities: Unsupported start tag \"foo\" at byte offset 0"))
	h.srv.UserMessage(alice.ID, alice, "hi")
	ok := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded))
	if ok.Param("parse_mode") != "" || ok.Param("text") != "bold answer" {
		t.Errorf("fallback sent %q with parse_mode %q", ok.Param("text"), ok.Param("parse_mode"))
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage"))); n != 4 {
		t.Errorf("%d sendMessage calls, want 2 server errors, 1 refused, 1 plain", n)
	}
}

func TestLongAnswerIsSplitNotCut(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 10000; i++ {
		b.WriteString("line <" + strings.Repeat("é", 50) + ">\n")
	}
	h := newHarness(t, []prompttest.Step{prompttest.Answer(b.String() + "THE END")})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "write a lot")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("THE END")))
	var got strings.Builder
	for _, c := range h.srv.Calls(telegramtest.Method("sendMessage")) {
		if !c.OK() {
			t.Fatalf("a part was refused: %s", c.Description)
		}
		m, _ := c.Message()
		got.WriteString(m.Text + "\n")
	}
	if strings.TrimSpace(got.String()) != strings.TrimSpace(b.String()+"THE END") {
		t.Error("the parts do not add up to the answer")
	}
}

func TestRequestThatCannotBeSentStaysPendingAndPendingResends(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), func(c *config) { c.Limits.MaxAttempts = 2 })
	h.start()
	h.srv.Fail("sendMessage", 2, telegramtest.ServerError())
	h.srv.UserMessage(alice.ID, alice, "list")
	h.srv.WaitCalls(t, wait, 2, telegramtest.Method("sendMessage"))
	deadline := time.Now().Add(wait)
	for !strings.Contains(h.logs.String(), "notice not delivered; trying again later") {
		if time.Now().After(deadline) {
			t.Fatalf("failure not logged; logs:\n%s", h.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustPending(t, h)
	h.srv.UserMessage(alice.ID, alice, "/pending")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
}
