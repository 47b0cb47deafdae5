package bot_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-telegram/bot/models"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt/prompttest"
)

// group is a supergroup alice, bob and mallory write in; the fake's bot is
// @test_bot.
const group = int64(-1001234567890)

func notifyDM(c *config) { c.Notify = bot.NotifyDM }

// lastPromptText is what the model read last in its n-th request.
func lastPromptText(t *testing.T, h *harness, n int) string {
	t.Helper()
	reqs := h.model.Requests()
	if len(reqs) < n {
		t.Fatalf("model asked %d times, want %d", len(reqs), n)
	}
	msgs := reqs[n-1].Messages
	return msgs[len(msgs)-1].Text
}

// sentTo lists the messages the bot sent to chat.
func sentTo(h *harness, chat int64) []telegramtest.Call {
	return h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(chat)))
}

func TestGroupIgnoresWhatIsNotForTheBot(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("Four.")})
	// People talking among themselves, someone joining, another bot's
	// command: none of it is for Tollgate. The mention after them is, and
	// a chat's updates are handled in order, so once it is answered the
	// rest were handled (and ignored).
	h.srv.UserJoins(group, bob)
	h.srv.UserMessage(group, alice, "lunch anyone?")
	h.srv.UserMessage(group, mallory, "sure, @alice_x")
	h.srv.UserMessage(group, alice, "/help@other_bot")
	h.srv.UserMessage(group, alice, "@test_bot what is 2+2?")
	h.start()
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("Four.")))
	if got := lastPromptText(t, h, 1); got != "what is 2+2?" {
		t.Errorf("model read %q, want the request without the mention", got)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want once", n)
	}
	if sent := sentTo(h, group); len(sent) != 1 {
		t.Errorf("sent %d messages to the group, want the answer alone: %v", len(sent), sent)
	}
}

func TestGroupReplyToTheBotsAnswerStartsAPrompt(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("First answer."), prompttest.Answer("Second answer.")})
	h.start()
	h.srv.UserMentions(group, alice, "Test Bot, summarise the news", "Test Bot", h.srv.Bot())
	c := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("First answer.")))
	answer, err := c.Message()
	if err != nil {
		t.Fatal(err)
	}
	if got := lastPromptText(t, h, 1); got != "summarise the news" {
		t.Errorf("model read %q, want the request without the text mention", got)
	}
	// A reply to someone else is theirs; a reply to the bot's answer is a
	// new request.
	other := h.srv.UserMessage(group, bob, "interesting")
	h.srv.UserReply(group, alice, other.ID, "indeed")
	h.srv.UserReply(group, alice, answer.ID, "and in more detail?")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("Second answer.")))
	if got := lastPromptText(t, h, 2); got != "and in more detail?" {
		t.Errorf("model read %q, want the reply", got)
	}
	if sent := sentTo(h, group); len(sent) != 2 {
		t.Errorf("sent %d messages to the group, want the two answers", len(sent))
	}
}

func TestGroupStrangerWhoAddressesTheBotIsRefusedBriefly(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.UserMessage(group, mallory, "who runs this bot?")
	asked := h.srv.UserMessage(group, mallory, "@test_bot delete everything")
	h.start()
	c := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group)))
	m, _ := c.Message()
	if !strings.Contains(m.Text, "not allowed") || m.ReplyToMessage == nil || m.ReplyToMessage.ID != asked.ID {
		t.Errorf("refusal = %q replying to %+v, want a note on the mention", m.Text, m.ReplyToMessage)
	}
	if strings.Contains(m.Text, "TELEGRAM_ALLOWED_USERS") || strings.Contains(m.Text, "999") {
		t.Errorf("refusal %q tells a group how the bot is configured", m.Text)
	}
	if sent := sentTo(h, group); len(sent) != 1 {
		t.Errorf("sent %d messages to the group, want the one refusal", len(sent))
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("model asked %d times for a stranger", n)
	}
}

func TestGroupRequestIsDecidedInTheGroup(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"))
	h.start()
	h.srv.UserMessage(group, alice, "@test_bot list my files")
	req, approve, _ := h.approvalMessage(1)
	if req.Chat.ID != group {
		t.Fatalf("request sent to chat %d, want the group", req.Chat.ID)
	}
	cb := h.srv.Press(group, bob, req.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("done")))
	mustBeClosed(t, h.srv, group, req.ID, "Approved by Bob (222)")
	if h.ran.Load() != 1 {
		t.Errorf("tool ran %d times", h.ran.Load())
	}
}

// mustPendingIn returns the ID of the approval chat's prompt waits for.
func mustPendingIn(t *testing.T, h *harness, chat int64) string {
	t.Helper()
	st, err := h.svc.Active(context.Background(), "tg:"+strconv.FormatInt(chat, 10))
	if err != nil || st.Pending == nil {
		t.Fatalf("nothing pending in chat %d: %+v, %v", chat, st, err)
	}
	return st.Pending.ApprovalID
}

// privateCopies waits for the request's copies in the approvers' private
// chats, keyed by chat, each with its approve data.
func privateCopies(t *testing.T, h *harness, n int) map[int64]models.Message {
	t.Helper()
	out := map[int64]models.Message{}
	for i := 1; i <= n; i++ {
		m, _, _ := h.approvalMessage(i)
		out[m.Chat.ID] = m
	}
	return out
}

func TestGroupRequestGoesToEachApproverPrivately(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), notifyDM)
	h.srv.KnownChat(alice.ID, alice) // both started the bot in private
	h.srv.KnownChat(bob.ID, bob)
	h.start()
	h.srv.UserMessage(group, alice, "@test_bot list my files")
	copies := privateCopies(t, h, 2)
	if _, ok := copies[alice.ID]; !ok {
		t.Fatalf("copies in chats %v, want alice's and bob's", slices.Collect(maps.Keys(copies)))
	}
	if _, ok := copies[bob.ID]; !ok {
		t.Fatalf("copies in chats %v, want alice's and bob's", slices.Collect(maps.Keys(copies)))
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("sent to approvers privately")))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", toChat(group), hasKeyboard))); n != 0 {
		t.Errorf("%d requests with buttons in the group, want none", n)
	}
	// A press in bob's private chat decides for the group's prompt, and
	// both copies close.
	cb := h.srv.Press(bob.ID, bob, copies[bob.ID].ID, "a:"+mustPendingIn(t, h, group))
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("done")))
	h.srv.WaitCalls(t, wait, 2, telegramtest.Method("editMessageText", telegramtest.Succeeded))
	mustBeClosed(t, h.srv, alice.ID, copies[alice.ID].ID, "Approved by Bob (222)")
	mustBeClosed(t, h.srv, bob.ID, copies[bob.ID].ID, "Approved by Bob (222)")
	if h.ran.Load() != 1 {
		t.Errorf("tool ran %d times", h.ran.Load())
	}
}

func TestGroupApproverWithoutAPrivateChatIsSkipped(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), notifyDM)
	h.srv.KnownChat(alice.ID, alice)
	h.srv.UserMessage(group, bob, "hi all") // bob is in the group, never started the bot
	h.start()
	h.srv.UserMessage(group, alice, "@test_bot list my files")
	req, approve, _ := h.approvalMessage(1)
	if req.Chat.ID != alice.ID {
		t.Fatalf("request sent to chat %d, want alice's private chat", req.Chat.ID)
	}
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("sent to approvers privately")))
	refused := h.srv.Calls(telegramtest.Method("sendMessage", toChat(bob.ID)))
	if len(refused) != 1 || refused[0].Status != 403 {
		t.Errorf("sends to bob = %+v, want one refused with 403", refused)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "approver cannot be sent the request privately") || !strings.Contains(logs, "user=222") {
		t.Errorf("log does not name the skipped approver:\n%s", logs)
	}
	cb := h.srv.Press(alice.ID, alice, req.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("done")))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", toChat(group), hasKeyboard))); n != 0 {
		t.Errorf("%d requests with buttons in the group, want none", n)
	}
}

func TestGroupRequestFallsBackToTheGroupWhenNoApproverIsReachable(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), notifyDM)
	h.srv.UserMessage(group, bob, "hi all") // seen, never started the bot
	h.start()
	h.srv.UserMessage(group, alice, "@test_bot list my files")
	req, approve, _ := h.approvalMessage(1)
	if req.Chat.ID != group {
		t.Fatalf("request sent to chat %d, want the group", req.Chat.ID)
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("sent to approvers privately")))); n != 0 {
		t.Errorf("the group was told the request went privately, %d times", n)
	}
	cb := h.srv.Press(group, alice, req.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("done")))
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return c.Status == 403 }))); n != 2 {
		t.Errorf("%d sends refused with 403, want one per approver", n)
	}
}

// TestAPressInAChatWithoutACopyIsRefused: a request's data pressed in a
// private chat that holds no copy of it (bob's, who could not be sent one)
// decides nothing; the copy in alice's chat still does.
func TestAPressInAChatWithoutACopyIsRefused(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), notifyDM)
	h.srv.KnownChat(alice.ID, alice)
	h.srv.UserMessage(group, bob, "hi all")
	h.start()
	h.srv.UserMessage(group, alice, "@test_bot list my files")
	req, approve, _ := h.approvalMessage(1)
	// The group's line comes once every approver was tried.
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("sent to approvers privately")))
	// Bob starts the bot only now, and presses the request's data on a
	// message of his own chat.
	start := h.srv.UserMessage(bob.ID, bob, "/start")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(bob.ID)))
	cb := h.srv.Press(bob.ID, bob, start.ID, approve)
	h.waitAnswer(cb, "This approval request has expired.")
	if h.ran.Load() != 0 {
		t.Error("a press in a chat without a copy ran the tool")
	}
	cb = h.srv.Press(alice.ID, alice, req.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(group), textHas("done")))
}
