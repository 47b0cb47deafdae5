package bot

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-telegram/bot/models"

	"tollgate/prompt"
)

func (b *Bot) handleUpdate(ctx context.Context, upd *models.Update) {
	switch {
	case upd.Message != nil:
		b.handleMessage(ctx, upd.Message)
	case upd.CallbackQuery != nil:
		b.handleCallback(ctx, upd.CallbackQuery)
	}
}

// who names a Telegram user in decisions and logs.
func who(u models.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if name == "" && u.Username != "" {
		name = "@" + u.Username
	}
	if name == "" {
		return fmt.Sprintf("user %d", u.ID)
	}
	// Telegram allows 128 characters of name; cut it so that the ID, the
	// part that identifies, survives every later shortening.
	if name = oneLine(name); utf16Len(name) > maxWhoName {
		name = cutUnits(name, maxWhoName) + "…"
	}
	return fmt.Sprintf("%s (%d)", name, u.ID)
}

// maxWhoName bounds the name part of who, in UTF-16 units: with " (ID)" it
// stays under maxByLength.
const maxWhoName = 48

const internalError = "Something went wrong on my side; please try again."

func (b *Bot) handleMessage(ctx context.Context, m *models.Message) {
	if m.From == nil {
		return // channel posts have no sender to check
	}
	chat := m.Chat.ID
	if !b.allowed[m.From.ID] {
		b.log.Info("message from a user not allowed", "user", m.From.ID, "chat", chat)
		b.note(ctx, chat, m.ID, fmt.Sprintf("Sorry, you are not allowed to use this bot. Your Telegram user ID is <code>%d</code>; "+
			"the owner can add it to TELEGRAM_ALLOWED_USERS.", m.From.ID))
		return
	}
	conv := conversationOf(chat)
	if err := b.cfg.Store.SaveChat(ctx, conv, chat); err != nil {
		b.log.Error("save chat", "chat", chat, "err", err)
	}
	if m.Text == "" {
		b.note(ctx, chat, m.ID, "I can only read text messages.")
		return
	}
	if cmd, ok := b.command(m); ok {
		if cmd != "" {
			b.handleCommand(ctx, m, cmd)
		}
		return
	}
	if r := m.ReplyToMessage; r != nil {
		id, err := b.cfg.Store.ApprovalByMessage(ctx, chat, r.ID)
		switch {
		case err == nil:
			b.rejectByReply(ctx, m, id)
			return
		case !errors.Is(err, prompt.ErrNotFound):
			b.log.Error("find approval of a replied message", "chat", chat, "err", err)
		}
	}
	created, err := b.cfg.Service.CreateOnce(ctx, conv, strconv.Itoa(m.ID), m.Text)
	switch {
	case errors.Is(err, prompt.ErrExists):
		// Handled before a crash kept the inbox from saying so: the
		// agent works (or worked) on it already.
		b.log.Info("message already taken", "chat", chat, "message", m.ID)
	case err == nil && created.Position > 0:
		// Typing shows once a worker takes it; until then, say why not.
		b.note(ctx, chat, m.ID, fmt.Sprintf("Many requests right now: yours is number %d in line. I will start on it as soon as I can.", created.Position))
	case err == nil:
	case errors.Is(err, prompt.ErrBusy):
		b.busy(ctx, chat, conv, m.ID)
	case errors.Is(err, prompt.ErrClosed):
		b.note(ctx, chat, m.ID, "Tollgate is shutting down; please send that again in a minute.")
	default:
		b.log.Error("create prompt", "conversation", conv, "err", err)
		b.note(ctx, chat, m.ID, internalError)
	}
}

// command returns the bot command a message starts with, without the
// "@botname" Telegram adds in groups; "" with true for a command meant for
// another bot, which is none of ours to answer or to send to the model.
func (b *Bot) command(m *models.Message) (string, bool) {
	if len(m.Entities) == 0 || m.Entities[0].Type != models.MessageEntityTypeBotCommand || m.Entities[0].Offset != 0 {
		return "", false
	}
	cmd, _, _ := strings.Cut(m.Text, " ")
	cmd, _, _ = strings.Cut(cmd, "\n")
	cmd, at, found := strings.Cut(cmd, "@")
	b.mu.Lock()
	name := b.botName
	b.mu.Unlock()
	if found && name != "" && !strings.EqualFold(at, name) {
		return "", true
	}
	return strings.ToLower(cmd), true
}

// busy tells the user the chat already has a prompt, replying to its
// pending request when there is one so that it is one tap away.
func (b *Bot) busy(ctx context.Context, chat int64, conv string, msgID int) {
	text := "I am still working on your previous message."
	replyTo := msgID
	if req := b.pending(ctx, conv); req != nil {
		h := &htmlText{}
		h.text(" It is waiting for your decision on ").wrap("code", clip(req.ToolName, maxNameLength)).text(": this request (or send /pending).")
		text += h.b.String()
		if _, ids, err := b.cfg.Store.ApprovalMessages(ctx, req.ApprovalID); err == nil && len(ids) > 0 {
			replyTo = ids[len(ids)-1]
		}
	}
	b.note(ctx, chat, replyTo, text+" Send /cancel to stop it.")
}

// active returns where the conversation's prompt stands: ok false if it
// has none, an error (already logged) if the service could not tell.
func (b *Bot) active(ctx context.Context, conv string) (prompt.Status, bool, error) {
	st, err := b.cfg.Service.Active(ctx, conv)
	switch {
	case errors.Is(err, prompt.ErrNotFound):
		return prompt.Status{}, false, nil
	case err != nil:
		b.log.Error("find the active prompt", "conversation", conv, "err", err)
		return prompt.Status{}, false, err
	}
	return st, true, nil
}

// pending returns the request the conversation's prompt waits for, or nil.
func (b *Bot) pending(ctx context.Context, conv string) *prompt.ApprovalRequest {
	st, ok, _ := b.active(ctx, conv)
	if !ok {
		return nil
	}
	return st.Pending
}

func (b *Bot) handleCommand(ctx context.Context, m *models.Message, cmd string) {
	chat, conv := m.Chat.ID, conversationOf(m.Chat.ID)
	switch cmd {
	case "/start", "/help":
		b.note(ctx, chat, 0, b.helpText())
	case "/pending":
		st, ok, err := b.active(ctx, conv)
		switch {
		case err != nil:
			b.note(ctx, chat, m.ID, internalError)
		case !ok:
			b.note(ctx, chat, m.ID, "Nothing is waiting for your approval.")
		case st.Pending == nil:
			b.note(ctx, chat, m.ID, "Nothing is waiting for your approval; I am still working on your message.")
		default:
			if err := b.sendApproval(ctx, *st.Pending); err != nil {
				b.note(ctx, chat, m.ID, "I could not send the request; try /pending again.")
			}
		}
	case "/cancel":
		st, ok, err := b.active(ctx, conv)
		switch {
		case err != nil:
			b.note(ctx, chat, m.ID, internalError)
			return
		case !ok:
			b.note(ctx, chat, m.ID, "Nothing to cancel.")
			return
		}
		by := who(*m.From)
		err = b.cfg.Service.Cancel(ctx, st.PromptID, by)
		switch {
		case errors.Is(err, prompt.ErrNotPending), errors.Is(err, prompt.ErrNotFound):
			b.note(ctx, chat, m.ID, "Nothing to cancel.")
		case err != nil:
			b.log.Error("cancel prompt", "conversation", conv, "prompt", st.PromptID, "err", err)
			b.note(ctx, chat, m.ID, internalError)
		}
		// The outbox tells the rest: the request's copies lose their
		// buttons, and the answer says it was cancelled.
	default:
		b.note(ctx, chat, m.ID, "I do not know that command. Send /help for the list.")
	}
}

func (b *Bot) helpText() string {
	h := &htmlText{}
	h.wrap("b", "Tollgate").text(" runs an AI agent for you. Send a message and it works on it; " +
		"before it uses a risky tool it asks here, and nothing runs until you press ✅ Approve. " +
		"Press ❌ Reject, or reply to the request with a note, to refuse; the agent is told why.\n\n")
	gated := b.cfg.Service.Gated()
	if len(gated) == 0 {
		h.text("No tool needs approval right now.")
	} else {
		h.text("Tools that need your approval:")
		for _, g := range gated {
			h.text("\n• " + oneLine(g))
		}
	}
	h.text("\n\nCommands:\n/pending: show the request waiting for you\n/cancel: stop the current request\n/help: this message")
	return h.b.String()
}

// sendApproval sends a request with its buttons (and its input as a
// document when it does not fit) and records the message, so that a press
// on it, even after a restart, finds the approval. A failure is logged and
// leaves the approval pending: /pending and the next start send it again.
func (b *Bot) sendApproval(ctx context.Context, req prompt.ApprovalRequest) error {
	chat, err := b.chatOf(ctx, req.ConversationID)
	if err != nil {
		b.log.Error("approval request not sent; it stays pending", "approval", req.ApprovalID, "err", err)
		return err
	}
	view := renderApproval(req)
	id, err := b.send(ctx, message{chat: chat, html: view.HTML, markup: approvalKeyboard(req.ApprovalID)})
	if err != nil {
		b.log.Error("approval request not sent; it stays pending and is sent again by /pending and on the next start",
			"approval", req.ApprovalID, "chat", chat, "err", err)
		return err
	}
	if err := b.cfg.Store.AddApprovalMessage(ctx, req.ApprovalID, chat, id); err != nil {
		b.log.Error("record approval message", "approval", req.ApprovalID, "message", id, "err", err)
	}
	// A press on another copy may have decided it while this one was on
	// its way; that press's edit did not know of this copy, so close it
	// here rather than leave live-looking buttons behind.
	if ref, err := b.cfg.Service.LookupApproval(ctx, req.ApprovalID); err == nil && ref.Status != prompt.ApprovalPending {
		if err := b.editApproval(ctx, req.ApprovalID, &req, nil, decidedLine(ref)); err != nil {
			b.log.Warn("close a copy decided while it was sent", "approval", req.ApprovalID, "err", err)
		}
	}
	if view.Document != nil {
		caption := fmt.Sprintf("Full input of %s (%d characters)", clip(req.ToolName, maxNameLength), utf16Len(string(view.Document)))
		if err := b.sendDocument(ctx, chat, id, "input-"+req.ApprovalID+".json", view.Document, caption); err != nil {
			b.log.Error("send approval input document", "approval", req.ApprovalID, "err", err)
			b.note(ctx, chat, id, "I could not attach the full input of this request; reject it if you cannot judge it.")
		}
	}
	return nil
}

// sendResult sends a finished prompt's answer, or why it failed. An
// answer in several messages that fails part-way is sent whole again on
// the next try: a repeated part is better than a lost one.
func (b *Bot) sendResult(ctx context.Context, a prompt.Answer) error {
	chat, err := b.chatOf(ctx, a.ConversationID)
	if err != nil {
		return fmt.Errorf("%w: no chat: %w", errGiveUp, err)
	}
	var chunks []chunk
	switch {
	case a.State == prompt.StateFailed:
		h := &htmlText{}
		h.text("⚠️ " + answerVisible(a.Error))
		chunks = []chunk{{HTML: h.b.String(), Plain: "⚠️ " + a.Error}}
	case strings.TrimSpace(a.Text) == "":
		chunks = []chunk{{HTML: "The agent finished without an answer."}}
	default:
		chunks = renderAnswer(a.Text)
	}
	for _, c := range chunks {
		if _, err := b.send(ctx, message{chat: chat, html: c.HTML, plain: c.Plain}); err != nil {
			return fmt.Errorf("answer of %s: %w", a.PromptID, err)
		}
	}
	return nil
}

var callbackData = regexp.MustCompile(`^([ars]):([A-Za-z0-9_-]{1,32})$`)

// handleCallback decides an approval from a button press. The checks run
// before anything changes: the presser is allowed, the data names an
// approval, and the pressed message is one that shows it.
func (b *Bot) handleCallback(ctx context.Context, q *models.CallbackQuery) {
	const expired = "This approval request has expired."
	if !b.allowed[q.From.ID] {
		b.log.Info("press from a user not allowed", "user", q.From.ID)
		b.answerCallback(ctx, q.ID, "You are not allowed to decide this.")
		return
	}
	var chat int64
	var msgID int
	var pressed *models.Message
	switch {
	case q.Message.Message != nil:
		pressed = q.Message.Message
		chat, msgID = pressed.Chat.ID, pressed.ID
	case q.Message.InaccessibleMessage != nil:
		chat, msgID = q.Message.InaccessibleMessage.Chat.ID, q.Message.InaccessibleMessage.MessageID
	}
	parts := callbackData.FindStringSubmatch(q.Data)
	if parts == nil || chat == 0 {
		b.answerCallback(ctx, q.ID, expired)
		return
	}
	button, id := parts[1], parts[2]
	unrecorded := false
	switch shown, err := b.cfg.Store.ApprovalByMessage(ctx, chat, msgID); {
	case err == nil && shown != id:
		b.log.Warn("press with data of another approval", "chat", chat, "message", msgID)
		b.answerCallback(ctx, q.ID, expired)
		return
	case errors.Is(err, prompt.ErrNotFound):
		// A copy not (yet) recorded still counts if the approval belongs
		// to this chat: pending in its conversation, or shown in it.
		unrecorded = true
		if b.pendingRequest(ctx, chat, id) == nil {
			c, _, err := b.cfg.Store.ApprovalMessages(ctx, id)
			if err != nil || c != chat {
				b.answerCallback(ctx, q.ID, expired)
				return
			}
		}
	case err != nil:
		b.log.Error("find approval of a pressed message", "chat", chat, "err", err)
		b.answerCallback(ctx, q.ID, internalError)
		return
	}
	by := who(q.From)
	if pressed != nil && unrecorded {
		// Before the decision, whose notice edits every recorded copy.
		b.recordPressed(ctx, id, pressed)
	}
	var err error
	switch button {
	case "a":
		err = b.cfg.Service.Approve(ctx, id, by)
	case "r":
		err = b.cfg.Service.Reject(ctx, id, buttonRejectReason, by)
	default:
		err = b.cfg.Service.Stop(ctx, id, by)
	}
	switch {
	case errors.Is(err, prompt.ErrNotPending):
		req, ref, lerr := b.cfg.Service.Request(ctx, id)
		if lerr == nil && ref.Status == prompt.ApprovalExpired {
			b.answerCallback(ctx, q.ID, expired)
		} else {
			b.answerCallback(ctx, q.ID, "Already decided")
		}
		// The pressed copy still had buttons: a crash may have kept the
		// decision's edit from it, or its record was lost. Close it.
		switch {
		case lerr != nil:
			b.log.Warn("look up a decided approval", "approval", id, "err", lerr)
		case pressed != nil:
			b.closePressed(ctx, id, req, ref, pressed)
		}
		return
	case errors.Is(err, prompt.ErrNotFound):
		b.answerCallback(ctx, q.ID, expired)
		return
	case err != nil:
		b.log.Error("decide approval", "approval", id, "err", err)
		b.answerCallback(ctx, q.ID, internalError)
		return
	}
	// The decision's notice in the outbox edits every copy; the press is
	// answered here and now.
	switch button {
	case "a":
		b.answerCallback(ctx, q.ID, "Approved")
	case "r":
		b.answerCallback(ctx, q.ID, "Rejected")
	default:
		b.answerCallback(ctx, q.ID, "Stopped: nothing more of this request runs")
	}
}

// buttonRejectReason is what the model is told of a rejection with the
// button; the outcome line leaves it out.
const buttonRejectReason = "rejected with the button, no reason given"

// recordPressed records a pressed copy of a request, in case its record
// was lost (the process died between sending and recording it), so the
// decision's edit finds it. Recording a known copy again changes nothing.
func (b *Bot) recordPressed(ctx context.Context, id string, pressed *models.Message) {
	if err := b.cfg.Store.AddApprovalMessage(ctx, id, pressed.Chat.ID, pressed.ID); err != nil {
		b.log.Warn("record pressed approval message", "approval", id, "message", pressed.ID, "err", err)
	}
}

// closePressed edits a pressed copy of a decided request to its outcome.
func (b *Bot) closePressed(ctx context.Context, id string, req prompt.ApprovalRequest, ref prompt.ApprovalRef, pressed *models.Message) {
	if err := b.edit(ctx, pressed.Chat.ID, pressed.ID, renderApproval(req).HTML+decidedLine(ref)); err != nil {
		b.log.Warn("close a pressed copy of a decided request", "approval", id, "message", pressed.ID, "err", err)
	}
}

// rejectByReply rejects an approval with the reply's text as feedback for
// the model.
func (b *Bot) rejectByReply(ctx context.Context, m *models.Message, id string) {
	chat, by := m.Chat.ID, who(*m.From)
	b.recordPressed(ctx, id, m.ReplyToMessage)
	err := b.cfg.Service.Reject(ctx, id, m.Text, by)
	switch {
	case errors.Is(err, prompt.ErrNotPending), errors.Is(err, prompt.ErrNotFound):
		b.note(ctx, chat, m.ID, "That request was already decided.")
		return
	case err != nil:
		b.log.Error("reject approval", "approval", id, "err", err)
		b.note(ctx, chat, m.ID, internalError)
		return
	}
	b.note(ctx, chat, m.ID, "Rejected; your note goes to the agent.")
}

// editApproval removes the buttons from every copy of a decided request and
// adds the outcome line. The text is rebuilt from the request when it is at
// hand, else taken from the message shown (its formatting is then lost).
// It returns the first error that a later try might not meet; a copy
// Telegram refuses for good (deleted by the user) is skipped.
func (b *Bot) editApproval(ctx context.Context, id string, req *prompt.ApprovalRequest, shown *models.Message, line string) error {
	chat, ids, err := b.cfg.Store.ApprovalMessages(ctx, id)
	if errors.Is(err, prompt.ErrNotFound) && shown == nil {
		return nil // never shown: nothing to close
	}
	if err != nil {
		if shown == nil {
			return fmt.Errorf("find approval messages: %w", err)
		}
		chat, ids = shown.Chat.ID, []int{shown.ID}
	} else if shown != nil && shown.Chat.ID == chat && !slices.Contains(ids, shown.ID) {
		// A copy whose record was lost (the process died between sending
		// and recording it) was pressed: edit it too, and record it.
		ids = append(ids, shown.ID)
		if err := b.cfg.Store.AddApprovalMessage(ctx, id, chat, shown.ID); err != nil {
			b.log.Warn("record pressed approval message", "approval", id, "message", shown.ID, "err", err)
		}
	}
	var base string
	switch {
	case req != nil:
		base = renderApproval(*req).HTML
	case shown != nil && shown.Text != "":
		base = escapeHTML(visible(shown.Text))
	default:
		base = "🔐 Approval request " + escapeHTML(id)
	}
	var first error
	for _, msgID := range ids {
		err := b.edit(ctx, chat, msgID, base+line)
		switch {
		case err == nil:
		case permanent(err):
			b.log.Warn("approval message cannot be edited; skipped", "approval", id, "message", msgID, "err", err)
		case first == nil:
			first = fmt.Errorf("edit approval message %d: %w", msgID, err)
		}
	}
	return first
}

// pendingRequest returns the request of approval id if it is the one the
// chat's prompt waits for, else nil.
func (b *Bot) pendingRequest(ctx context.Context, chat int64, id string) *prompt.ApprovalRequest {
	if req := b.pending(ctx, conversationOf(chat)); req != nil && req.ApprovalID == id {
		return req
	}
	return nil
}
