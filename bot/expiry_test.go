package bot_test

import (
	"testing"
	"time"

	"tollgate/bot/telegramtest"
)

// TestAnExpiredRequestSaysSo: APPROVAL_TIMEOUT passes without a decision;
// every copy shows ⌛ Expired without buttons, a press afterwards is told
// the request expired, and the agent goes on without the call.
func TestAnExpiredRequestSaysSo(t *testing.T) {
	clock := telegramtest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, lsThenAnswer("Not listed, then."), func(c *config) {
		c.svc.ApprovalTimeout = 30 * time.Minute
		c.svc.Now, c.svc.AfterFunc = clock.Now, clock.AfterFunc
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list my files")
	msg, approve, _ := h.approvalMessage(1)
	clock.Advance(30 * time.Minute)
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, messageID(msg.ID),
		textHas("Expired: no decision within 30m")))
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Expired")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Not listed, then.")))
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "This approval request has expired.")
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("the expired call ran %d times", n)
	}
}
