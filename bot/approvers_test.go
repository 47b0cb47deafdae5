package bot_test

import (
	"context"
	"strings"
	"testing"

	"tollgate/bot/telegramtest"
)

// onlyApprovers lets only ids decide.
func onlyApprovers(ids ...int64) option {
	return func(c *config) { c.Approvers = ids }
}

// quorum requires n different approvers.
func quorum(n int) option {
	return func(c *config) { c.svc.Quorum = n }
}

// noSelfApproval is APPROVAL_SELF=false.
func noSelfApproval(c *config) { c.NoSelfApproval = true }

// TestNonApproverMayChatButNotDecide: with TELEGRAM_APPROVERS set, an
// allowed user who is not an approver is refused on every path that
// decides (a press, a reply, /edit, /cancel of another's prompt), and
// nothing is decided; an approver's press still works.
func TestNonApproverMayChatButNotDecide(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), onlyApprovers(alice.ID))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, reject := h.approvalMessage(1)
	for _, data := range []string{approve, reject, "s" + approve[1:], "e" + approve[1:]} {
		cb := h.srv.Press(alice.ID, bob, msg.ID, data)
		h.waitAnswer(cb, "You are not an approver.")
	}
	h.srv.UserReply(alice.ID, bob, msg.ID, "no")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("You are not an approver.")))
	h.srv.UserMessage(alice.ID, bob, `/edit {"cmd":"pwd"}`)
	h.srv.WaitCalls(t, wait, 2, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("You are not an approver.")))
	h.srv.UserMessage(alice.ID, bob, "/cancel")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Only an approver or the person who started it may cancel it.")))
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("a non-approver's press ran the tool %d times", n)
	}
	if st := mustPending(t, h); st.ApprovalID != approve[2:] {
		t.Fatalf("pending %s, want %s still", st.ApprovalID, approve[2:])
	}
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestQuorumRunsOnlyWhenEnoughApproversApproved: with APPROVAL_QUORUM=2
// the first approval shows on the request and runs nothing, a second
// press by the same person does not count, and a second approver's runs
// the call once.
func TestQuorumRunsOnlyWhenEnoughApproversApproved(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), quorum(2))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	if !strings.Contains(msg.Text, "Needs 2 approvals from different approvers.") {
		t.Fatalf("request %q does not say it needs 2 approvals", msg.Text)
	}

	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved: 1 of 2. Another approver must approve too.")
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded,
		textHas("Approved so far: Alice (111) — 1 of 2"), hasKeyboard))
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("one approval of two ran the tool %d times", n)
	}
	cb = h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "You approved already; another approver must approve too.")
	mustPending(t, h)

	cb = h.srv.Press(alice.ID, bob, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Approved by Alice (111), Bob (222)")))
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Approved by Alice (111), Bob (222)")
}

// TestQuorumOneRejectionRejects: a rejection after one approval of two
// rejects the request; the call never runs.
func TestQuorumOneRejectionRejects(t *testing.T) {
	h := newHarness(t, lsThenAnswer("not run"), quorum(2))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, reject := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved: 1 of 2. Another approver must approve too.")
	cb = h.srv.Press(alice.ID, bob, msg.ID, reject)
	h.waitAnswer(cb, "Rejected")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("not run")))
	h.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", telegramtest.Succeeded, textHas("Rejected by Bob (222)")))
	mustBeClosed(t, h.srv, alice.ID, msg.ID, "Rejected by Bob (222)")
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("rejected tool ran %d times", n)
	}
}

// TestSelfApprovalRefusedWhileAnotherApproverExists: with
// APPROVAL_SELF=false the person who started the prompt may not approve
// its request; another approver may.
func TestSelfApprovalRefusedWhileAnotherApproverExists(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), noSelfApproval)
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "You started this request; another approver must decide it.")
	h.srv.UserMessage(alice.ID, alice, `/edit {"cmd":"pwd"}`)
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("another approver must decide it")))
	if n := h.ran.Load(); n != 0 {
		t.Fatalf("the author's own press ran the tool %d times", n)
	}
	mustPending(t, h)
	cb = h.srv.Press(alice.ID, bob, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestSelfApprovalAllowedToTheOnlyApprover: APPROVAL_SELF=false with one
// approver would leave every request of theirs undecidable, so it does
// not apply.
func TestSelfApprovalAllowedToTheOnlyApprover(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), noSelfApproval, onlyApprovers(alice.ID))
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := h.ran.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

// TestSelfRejectionIsAlwaysAllowed: the author may veto their own
// request with APPROVAL_SELF=false; refusing only keeps a call from
// running.
func TestSelfRejectionIsAlwaysAllowed(t *testing.T) {
	h := newHarness(t, lsThenAnswer("not run"), noSelfApproval)
	h.start()
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, _, reject := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, reject)
	h.waitAnswer(cb, "Rejected")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("not run")))
	if _, err := h.svc.Active(context.Background(), "tg:111"); err == nil {
		t.Fatal("prompt still active after its author rejected it")
	}
}
