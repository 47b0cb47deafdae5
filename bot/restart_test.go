package bot_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// savePrompt puts p in the prompt store as an earlier process left it.
func (h *harness) savePrompt(p *prompt.Prompt) {
	h.t.Helper()
	if err := h.pstore.CreatePrompt(context.Background(), p); err != nil {
		h.t.Fatal(err)
	}
}

// knownChat makes a chat known to Telegram and to the bot's store, as a
// chat that wrote before the restart is.
func (h *harness) knownChat(user models.User) {
	h.t.Helper()
	h.srv.KnownChat(user.ID, user)
	if err := h.store.SaveChat(context.Background(), fmt.Sprintf("tg:%d", user.ID), user.ID); err != nil {
		h.t.Fatal(err)
	}
}

// waitingPrompt is prompt i of conversation conv, waiting for a decision
// on a shell.run call, as a crash left it.
func waitingPrompt(i int, conv string, at time.Time) *prompt.Prompt {
	return &prompt.Prompt{
		ID: fmt.Sprintf("p_wait_%03d", i), ConversationID: conv, State: prompt.StateWaiting, Input: "list", Turns: 1, Rev: 2,
		CreatedAt: at, UpdatedAt: at,
		Output: []prompt.Item{{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
			ID: "c1", Name: "shell.run", Arguments: fmt.Sprintf(`{"cmd":"ls %d"}`, i), Status: prompt.CallPending,
			Approval: &prompt.Approval{ID: waitingApproval(i), Status: prompt.ApprovalPending, Reason: "runs a command on the host", RequestedAt: at},
			Result:   &prompt.Result{Type: prompt.ResultPending, Reason: "runs a command on the host"},
		}}},
	}
}

func waitingApproval(i int) string { return fmt.Sprintf("apprwait%03d", i) }

func TestRestartResendsQueuedRequestAndOldButtonsWork(t *testing.T) {
	first := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`))})
	first.start()
	first.srv.UserMessage(alice.ID, alice, "list")
	old, approve, _ := first.approvalMessage(1)

	second := first.restart([]prompttest.Step{prompttest.Answer("listed after restart")})
	before := len(second.srv.Calls(telegramtest.Method("sendMessage")))
	second.start()
	resent, _, _ := second.approvalMessage(2)
	if resent.ID == old.ID || resent.Text != old.Text {
		t.Errorf("re-sent %d %q, old %d %q", resent.ID, resent.Text, old.ID, old.Text)
	}
	if after := len(second.srv.Calls(telegramtest.Method("sendMessage"))); after != before+1 {
		t.Errorf("%d messages sent at start, want the one request", after-before)
	}
	cb := second.srv.Press(alice.ID, alice, old.ID, approve)
	second.waitAnswer(cb, "Approved")
	second.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("listed after restart")))
	edits := second.srv.WaitCalls(t, wait, 2, telegramtest.Method("editMessageText", telegramtest.Succeeded))
	if edits[0].Int("message_id")+edits[1].Int("message_id") != int64(old.ID+resent.ID) {
		t.Errorf("edited %d and %d, want %d and %d", edits[0].Int("message_id"), edits[1].Int("message_id"), old.ID, resent.ID)
	}
	if n := second.ran.Load() + first.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

// TestRestartSendsTheAnswersACrashKeptOnce: an answer that never reached
// its chat (every attempt failed; or the process died between saving and
// sending) stays in the outbox and is sent by the next start, once.
func TestRestartSendsTheAnswersACrashKeptOnce(t *testing.T) {
	first := newHarness(t, []prompttest.Step{prompttest.Answer("unlucky answer")},
		func(c *config) { c.Limits.MaxAttempts = 3 })
	first.start()
	first.srv.Fail("sendMessage", 3, telegramtest.ServerError())
	first.srv.UserMessage(alice.ID, alice, "one")
	first.srv.WaitCalls(t, wait, 3, telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return !c.OK() }))
	unlucky := lastPromptID(t, first, 1)
	first.stop()
	if _, ok := first.store.answeredNote(unlucky); ok {
		t.Fatal("an answer that never arrived was marked answered")
	}

	second := first.restart(nil)
	second.start()
	second.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("unlucky answer")))
	if note := waitMarked(t, second, unlucky); note != "" {
		t.Errorf("note = %q", note)
	}
	second.stop()
	if sent := second.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded)); len(sent) != 1 {
		t.Fatalf("%d messages sent, want the answer once", len(sent))
	}
}

// TestRestartAnswersAResumedPromptOnce: a prompt the crash left running is
// resumed by Recover and ends under the new process; its answer goes
// through the outbox like any other, once.
func TestRestartAnswersAResumedPromptOnce(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("answer after recovery")})
	h.knownChat(alice)
	now := time.Now()
	h.savePrompt(&prompt.Prompt{ID: "p_resumed", ConversationID: "tg:111", State: prompt.StateRunning, Input: "q", Rev: 1,
		CreatedAt: now, UpdatedAt: now})
	h.start()
	if note := waitMarked(t, h, "p_resumed"); note != "" {
		t.Fatalf("note = %q", note)
	}
	h.stop()
	if n := len(answerCalls(h, "answer after recovery")); n != 1 {
		t.Errorf("answer sent %d times, want 1", n)
	}
}

// TestRestartResendsEveryWaitingRequestAcrossPages: Recover hands over the
// waiting requests a page at a time (100); every one of 150 is sent once,
// with buttons that work.
func TestRestartResendsEveryWaitingRequestAcrossPages(t *testing.T) {
	const n = 150
	h := newHarness(t, []prompttest.Step{prompttest.Answer("done on page two")})
	base := time.Now().Add(-time.Hour)
	for i := range n {
		user := models.User{ID: int64(1000 + i), FirstName: fmt.Sprintf("User%d", i)}
		h.knownChat(user)
		h.savePrompt(waitingPrompt(i, fmt.Sprintf("tg:%d", user.ID), base.Add(time.Duration(i)*time.Second)))
	}
	h.start()
	sent := h.srv.WaitCalls(t, wait, n, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))
	chats := map[int64]bool{}
	for _, c := range sent {
		chats[c.Int("chat_id")] = true
	}
	if len(chats) != n {
		t.Fatalf("requests went to %d chats, want %d", len(chats), n)
	}

	// The last request, from the second page, decided like any other.
	lastChat := int64(1000 + n - 1)
	i := slices.IndexFunc(sent, toChat(lastChat))
	msg, err := sent[i].Message()
	if err != nil {
		t.Fatal(err)
	}
	cb := h.srv.Press(lastChat, alice, msg.ID, "a:"+waitingApproval(n-1))
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(lastChat), textHas("done on page two")))
	if got := <-h.ranArg; got != fmt.Sprintf("ls %d", n-1) {
		t.Errorf("tool ran with %q", got)
	}
	h.stop()
	for i := range n {
		if c := h.store.approvalCopies(waitingApproval(i)); c != 1 {
			t.Errorf("request %d recorded %d times, want once", i, c)
		}
	}
	if got := len(h.srv.Calls(telegramtest.Method("sendMessage", hasKeyboard))); got != n {
		t.Errorf("%d requests sent, want %d", got, n)
	}
}

// TestRestartEditsADecidedRequestThatACrashKeptOpen: the decision was saved
// but its edit never reached Telegram before the process died. The next
// start edits every copy, once, and only then sends the answer.
func TestRestartEditsADecidedRequestThatACrashKeptOpen(t *testing.T) {
	first := newHarness(t, lsThenAnswer("listed"), func(c *config) { c.Limits.MaxAttempts = 1 })
	first.start()
	first.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := first.approvalMessage(1)
	// Every edit fails from here on, as if the process died before it.
	first.srv.Fail("editMessageText", 1000, telegramtest.ServerError())
	cb := first.srv.Press(alice.ID, alice, msg.ID, approve)
	first.waitAnswer(cb, "Approved")
	first.srv.WaitCall(t, wait, telegramtest.Method("editMessageText", func(c telegramtest.Call) bool { return !c.OK() }))
	if <-first.ranArg != "ls" {
		t.Fatal("the approved tool did not run")
	}
	lastPromptID(t, first, 1)
	first.stop()
	if n := len(answerCalls(first, "listed")); n != 0 {
		t.Fatalf("the answer went out before the edit of its request (%d)", n)
	}
	first.srv.ClearFaults("editMessageText")

	second := first.restart(nil)
	second.start()
	answer := second.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("listed")))
	second.stop()
	edits := second.srv.Calls(telegramtest.Method("editMessageText", telegramtest.Succeeded))
	if len(edits) != 1 || edits[0].Int("message_id") != int64(msg.ID) {
		t.Fatalf("%d successful edits, want the one copy edited once", len(edits))
	}
	if edits[0].Time.After(answer.Time) {
		t.Error("the answer went out before the edit of its request")
	}
	mustBeClosed(t, second.srv, alice.ID, msg.ID, "Approved by Alice (111)")
	if n := second.ran.Load() + first.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

// TestServingDoesNotWaitForResends: a start that owes 1,000 chats their
// waiting requests again, at Telegram's real pace (about 30 messages a
// second), still answers a press and shows a new chat its request within
// the first second's worth of re-sends: they queue behind live chats.
func TestServingDoesNotWaitForResends(t *testing.T) {
	const n = 1000
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == prompt.RoleUser && last.Text == "list" {
			return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "shell.run", Arguments: `{"cmd":"ls"}`}}}, nil
		}
		return prompt.Response{Text: "ok"}, nil
	})
	h := newHarness(t, nil, func(c *config) {
		c.svc.Model = model
		// Telegram's own limits, and a short drain: the test stops with
		// most re-sends still queued.
		c.Limits = bot.Limits{Backoff: 10 * time.Millisecond, Typing: time.Second, Drain: 100 * time.Millisecond}
	})
	base := time.Now().Add(-time.Hour)
	for i := range n {
		user := models.User{ID: int64(1000 + i), FirstName: fmt.Sprintf("User%d", i)}
		h.knownChat(user)
		h.savePrompt(waitingPrompt(i, fmt.Sprintf("tg:%d", user.ID), base))
	}
	// A copy of chat 1000's request, shown before the restart.
	const oldCopy = 77
	if err := h.store.AddApprovalMessage(context.Background(), waitingApproval(0), 1000, oldCopy); err != nil {
		t.Fatal(err)
	}
	isResend := func(c telegramtest.Call) bool { return c.Int("chat_id") >= 1000 && hasKeyboard(c) }
	h.start()
	cb := h.srv.Press(1000, alice, oldCopy, "a:"+waitingApproval(0))
	h.srv.UserMessage(alice.ID, alice, "list")
	answered := h.srv.WaitCall(t, wait, telegramtest.Method("answerCallbackQuery", func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == cb
	}))
	request := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard, toChat(alice.ID)))
	h.stop()

	before := func(c telegramtest.Call) int {
		return len(h.srv.Calls(telegramtest.Method("sendMessage", isResend, func(r telegramtest.Call) bool { return r.Time.Before(c.Time) })))
	}
	total := len(h.srv.Calls(telegramtest.Method("sendMessage", isResend)))
	if total >= n {
		t.Fatalf("all %d re-sends went out before the test stopped: it proves nothing", total)
	}
	t.Logf("re-sends before the press's answer: %d, before the new request: %d, in all: %d",
		before(answered), before(request), total)
	// The first 30 re-sends leave at once (the global burst); 30 more take
	// a second at Telegram's overall limit.
	if k := before(answered); k > 60 {
		t.Errorf("the press was answered after %d re-sends", k)
	}
	if k := before(request); k > 60 {
		t.Errorf("the new chat's request went out after %d re-sends", k)
	}
	if answered.Param("text") != "Approved" {
		t.Errorf("press answered %q", answered.Param("text"))
	}
}
