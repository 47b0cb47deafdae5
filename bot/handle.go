package bot

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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
	if isGroup(m.Chat) {
		if m = b.groupMessage(ctx, m); m == nil {
			return
		}
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
		if id, err := b.cfg.Store.EditByMessage(ctx, chat, r.ID); err == nil {
			b.editRequest(ctx, m, id, m.Text)
			return
		}
		id, err := b.cfg.Store.ApprovalByMessage(ctx, chat, r.ID)
		switch {
		case err == nil:
			b.rejectByReply(ctx, m, id)
			return
		case !errors.Is(err, prompt.ErrNotFound):
			b.log.Error("find approval of a replied message", "chat", chat, "err", err)
		}
	}
	created, err := b.cfg.Service.CreateOnce(ctx, conv, strconv.Itoa(m.ID), m.Text, prompt.WithAuthor(personID(*m.From)))
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
		h.text(" It is waiting for your decision on ").wrap("code", clip(req.ToolName, maxNameLength))
		// Only a copy in this chat can be replied to; with private
		// notification the copies are in the approvers' chats.
		if last, ok := b.lastCopyIn(ctx, req.ApprovalID, chat); ok {
			replyTo = last
			h.text(": this request (or send /pending).")
		} else {
			h.text(" (or send /pending).")
		}
		text += h.b.String()
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
		// Cancelling only stops things, so the person who started the
		// prompt may, approver or not; anyone else must be an approver.
		if !b.approvers[m.From.ID] && st.Author != personID(*m.From) {
			b.note(ctx, chat, m.ID, notApprover+" Only an approver or the person who started it may cancel it.")
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
	case "/grants":
		html, kb, err := b.grantList(ctx, conv)
		if err != nil {
			b.log.Error("list grants", "conversation", conv, "err", err)
			b.note(ctx, chat, m.ID, internalError)
			return
		}
		var markup any
		if len(kb.InlineKeyboard) > 0 {
			markup = kb
		}
		if _, err := b.send(ctx, message{chat: chat, html: html, markup: markup}); err != nil {
			b.log.Error("send grants", "chat", chat, "err", err)
		}
	case "/edit":
		b.editCommand(ctx, m)
	case "/audit":
		b.auditCommand(ctx, m)
	default:
		b.note(ctx, chat, m.ID, "I do not know that command. Send /help for the list.")
	}
}

// editCommand is "/edit {JSON}": as a reply to a request (or to the
// message its ✏️ Edit button sent) it edits that request; otherwise the
// one the chat's prompt waits for.
func (b *Bot) editCommand(ctx context.Context, m *models.Message) {
	chat := m.Chat.ID
	_, args, _ := strings.Cut(m.Text, " ")
	if cmd, rest, ok := strings.Cut(m.Text, "\n"); ok && !strings.Contains(cmd, " ") {
		args = rest
	}
	var id string
	if r := m.ReplyToMessage; r != nil {
		if eid, err := b.cfg.Store.EditByMessage(ctx, chat, r.ID); err == nil {
			id = eid
		} else if aid, err := b.cfg.Store.ApprovalByMessage(ctx, chat, r.ID); err == nil {
			id = aid
		}
	}
	if id == "" {
		req := b.pending(ctx, conversationOf(chat))
		if req == nil {
			b.note(ctx, chat, m.ID, "Nothing is waiting for your approval, so there is nothing to edit.")
			return
		}
		id = req.ApprovalID
	}
	if strings.TrimSpace(args) == "" {
		b.note(ctx, chat, m.ID, "Send /edit followed by the new input as a JSON object, for example <code>/edit {\"url\": \"https://example.com/\"}</code>, or press ✏️ Edit on the request.")
		return
	}
	b.editRequest(ctx, m, id, args)
}

// maxGrantsShown bounds a /grants list: a message holds 4096 characters
// and a keyboard 100 buttons. Revoking one shows the next.
const maxGrantsShown = 20

// grantList renders the grants in force in conv, a revoke button each.
func (b *Bot) grantList(ctx context.Context, conv string) (string, keyboard, error) {
	gs, err := b.cfg.Service.Grants(ctx, conv)
	if err != nil {
		return "", keyboard{}, err
	}
	kb := keyboard{InlineKeyboard: [][]button{}}
	if len(gs) == 0 {
		return "No grants: every call that needs approval asks. Choose 🔁 Always… on a request to add one.", kb, nil
	}
	h := &htmlText{}
	h.tag("🔁 ").wrap("b", "Grants").text(" (the calls they cover run without asking):")
	for i, g := range gs {
		if i == maxGrantsShown {
			h.text(fmt.Sprintf("\n…and %d more; revoke some to see them.", len(gs)-maxGrantsShown))
			break
		}
		h.text(fmt.Sprintf("\n%d. ", i+1)).wrap("code", clip(g.Tool, maxNameLength)).text(": " + grantLine(g))
		kb.InlineKeyboard = append(kb.InlineKeyboard, []button{{Text: fmt.Sprintf("Revoke %d", i+1), CallbackData: "x:" + g.ID}})
	}
	return h.b.String(), kb, nil
}

// grantLine says what a grant covers, where, until when and from whom.
func grantLine(g prompt.Grant) string {
	return clipExact(g.Label, maxReasonLength) + "; " + g.Where() + ", " + g.Until() + "; by " + clip(g.By, maxByLength)
}

// revoke handles a /grants list's button: it ends the grant and shows the
// list as it now stands.
func (b *Bot) revoke(ctx context.Context, q *models.CallbackQuery, chat int64, msgID int, id string) {
	conv := conversationOf(chat)
	g, err := b.cfg.Service.Revoke(ctx, conv, id, who(q.From))
	switch {
	case errors.Is(err, prompt.ErrNotFound), errors.Is(err, prompt.ErrNotPending):
		b.answerCallback(ctx, q.ID, "That grant has ended already.")
	case err != nil:
		b.log.Error("revoke grant", "grant", id, "err", err)
		b.answerCallback(ctx, q.ID, internalError)
		return
	default:
		b.answerCallback(ctx, q.ID, clip("Revoked: "+g.Label+" asks again.", maxCallbackText))
	}
	html, kb, err := b.grantList(ctx, conv)
	if err != nil {
		b.log.Error("list grants", "conversation", conv, "err", err)
		return
	}
	if err := b.editWithMarkup(ctx, chat, msgID, html, kb); err != nil {
		b.log.Warn("refresh the grants list", "chat", chat, "err", err)
	}
}

func (b *Bot) helpText() string {
	h := &htmlText{}
	h.wrap("b", "Tollgate").text(" runs an AI agent for you. Send a message and it works on it; " +
		"before it uses a risky tool it asks here, and nothing runs until you press ✅ Approve. " +
		"Press ❌ Reject, or reply to the request with a note, to refuse; the agent is told why. " +
		"⛔ Stop refuses it and everything queued after it, and ends the request. " +
		"🔁 Always… approves it and lets calls like it run without asking (in this chat or all, for an hour or until revoked; /grants lists them). " +
		"✏️ Edit lets you change the input first; the edited call is asked again.\n\n")
	tools := b.cfg.Service.Summaries()
	if len(tools) == 0 {
		h.text("No tools are enabled.")
	} else {
		h.text("Tools, what each does, and whether it asks (unless the operator's rules or a grant decide):")
		for _, t := range tools {
			asks := "never asks"
			if t.Asks {
				asks = "may ask for your approval"
			}
			h.text("\n• ").wrap("code", clip(t.Name, maxNameLength)).text(" (" + oneLine(string(t.Effect)) + "): " + asks)
		}
	}
	if b.cfg.HelpNotes != nil {
		for _, n := range b.cfg.HelpNotes() {
			h.text("\n⚠️ " + clip(n, maxReasonLength))
		}
	}
	h.text("\n\nCommands:\n/pending: show the request waiting for you\n/cancel: stop the current request\n" +
		"/grants: what runs without asking, to revoke\n/edit {JSON}: change the waiting request's input\n" +
		"/audit: the last decisions in this chat, and who or what made them\n/help: this message")
	return h.b.String()
}

// sendApproval sends a request with its buttons (and its input as a
// document when it does not fit) and records the message, so that a press
// on it, even after a restart, finds the approval. A failure is logged and
// leaves the approval pending: /pending and the next start send it again.
// With NotifyDM a group's request goes to the approvers' private chats.
func (b *Bot) sendApproval(ctx context.Context, req prompt.ApprovalRequest) error {
	chat, err := b.chatOf(ctx, req.ConversationID)
	if err != nil {
		b.log.Error("approval request not sent; it stays pending", "approval", req.ApprovalID, "err", err)
		return err
	}
	if b.cfg.Notify == NotifyDM && isGroupID(chat) {
		if sent, err := b.sendPrivately(ctx, req, chat); sent || err != nil {
			return err
		}
		// No approver could be written to privately: the request is shown
		// in the group instead, where it can at least be decided.
		b.log.Warn("no approver reachable privately; showing the request in the group", "approval", req.ApprovalID, "chat", chat)
	}
	if _, err := b.sendCopy(ctx, req, chat); err != nil {
		b.log.Error("approval request not sent; it stays pending and is sent again by /pending and on the next start",
			"approval", req.ApprovalID, "chat", chat, "err", err)
		return err
	}
	return nil
}

// sendCopy sends one copy of a request to chat and records it, and
// returns its message ID; see sendApproval.
func (b *Bot) sendCopy(ctx context.Context, req prompt.ApprovalRequest, chat int64) (int, error) {
	view := renderApproval(req)
	id, err := b.send(ctx, message{chat: chat, html: view.HTML, markup: approvalKeyboard(req)})
	if err != nil {
		return 0, err
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
	if view.Preview != nil {
		caption := fmt.Sprintf("What %s does (%d characters)", clip(req.ToolName, maxNameLength), utf16Len(string(view.Preview)))
		if err := b.sendDocument(ctx, chat, id, view.PreviewName, view.Preview, caption); err != nil {
			b.log.Error("send approval preview document", "approval", req.ApprovalID, "err", err)
			b.note(ctx, chat, id, "I could not attach what this request does; reject it if you cannot judge it.")
		}
	}
	if view.Document != nil {
		caption := fmt.Sprintf("Full input of %s (%d characters)", clip(req.ToolName, maxNameLength), utf16Len(string(view.Document)))
		if err := b.sendDocument(ctx, chat, id, "input-"+req.ApprovalID+".json", view.Document, caption); err != nil {
			b.log.Error("send approval input document", "approval", req.ApprovalID, "err", err)
			b.note(ctx, chat, id, "I could not attach the full input of this request; reject it if you cannot judge it.")
		}
	}
	return id, nil
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

// callbackData is a request's button: approve, reject, stop, always… (w),
// a grant choice (g, with where and how long), back (b), edit (e).
var callbackData = regexp.MustCompile(`^(?:([arsweb])|(g)):([A-Za-z0-9_-]{1,32})(?::(ch|cf|ah|af))?$`)

// revokeData is a /grants list's button.
var revokeData = regexp.MustCompile(`^x:(g[a-z2-7]{16})$`)

// handleCallback decides an approval from a button press. The checks run
// before anything changes: the presser is allowed, the data names an
// approval, and the pressed message is one that shows it.
func (b *Bot) handleCallback(ctx context.Context, q *models.CallbackQuery) {
	const expired = "This approval request has expired."
	if !b.approvers[q.From.ID] {
		b.log.Info("press from a user who is not an approver", "user", q.From.ID)
		if b.allowed[q.From.ID] {
			b.answerCallback(ctx, q.ID, notApprover)
		} else {
			b.answerCallback(ctx, q.ID, "You are not allowed to decide this.")
		}
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
	if m := revokeData.FindStringSubmatch(q.Data); m != nil && chat != 0 {
		b.revoke(ctx, q, chat, msgID, m[1])
		return
	}
	parts := callbackData.FindStringSubmatch(q.Data)
	// A choice belongs to g alone, and g needs one.
	if parts == nil || chat == 0 || (parts[2] == "g") != (parts[4] != "") {
		b.answerCallback(ctx, q.ID, expired)
		return
	}
	button, id, choice := parts[1]+parts[2], parts[3], parts[4]
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
			if _, ok := b.lastCopyIn(ctx, id, chat); !ok {
				b.answerCallback(ctx, q.ID, expired)
				return
			}
		}
	case err != nil:
		b.log.Error("find approval of a pressed message", "chat", chat, "err", err)
		b.answerCallback(ctx, q.ID, internalError)
		return
	}
	switch why, err := b.refuseDecider(ctx, q.From.ID, id, approvingButton(button)); {
	case errors.Is(err, prompt.ErrNotFound):
		b.answerCallback(ctx, q.ID, expired)
		return
	case err != nil:
		b.log.Error("look up an approval's author", "approval", id, "err", err)
		b.answerCallback(ctx, q.ID, internalError)
		return
	case why != "":
		b.answerCallback(ctx, q.ID, why)
		return
	}
	by := who(q.From)
	if pressed != nil && unrecorded {
		// Before the decision, whose notice edits every recorded copy.
		b.recordPressed(ctx, id, pressed)
	}
	var (
		err   error
		grant prompt.Grant
		tally prompt.Tally
	)
	switch button {
	case "a":
		tally, err = b.cfg.Service.Vote(ctx, id, personID(q.From), by)
	case "r":
		err = b.cfg.Service.Reject(ctx, id, buttonRejectReason, by)
	case "s":
		err = b.cfg.Service.Stop(ctx, id, by)
	case "g":
		grant, err = b.cfg.Service.ApproveAlways(ctx, id, by, grantChoices[choice])
	default: // w, b, e: nothing is decided yet
		err = b.pressNonDeciding(ctx, q, button, id, chat, msgID)
	}
	switch {
	case errors.Is(err, prompt.ErrAlreadyVoted):
		b.answerCallback(ctx, q.ID, "You approved already; another approver must approve too.")
		return
	case errors.Is(err, prompt.ErrNotPending):
		req, ref, lerr := b.cfg.Service.Request(ctx, id)
		switch {
		case lerr == nil && ref.Status == prompt.ApprovalExpired:
			b.answerCallback(ctx, q.ID, expired)
		case lerr == nil && ref.Status == prompt.ApprovalEdited:
			b.answerCallback(ctx, q.ID, "This request was edited; decide the edited one.")
		default:
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
	case errors.Is(err, prompt.ErrNoGrant):
		b.answerCallback(ctx, q.ID, "This tool offers no “always”: approve this call on its own.")
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
		b.answerCallback(ctx, q.ID, approvedAnswer(tally))
	case "r":
		b.answerCallback(ctx, q.ID, "Rejected")
	case "s":
		b.answerCallback(ctx, q.ID, "Stopped: nothing more of this request runs")
	case "g":
		b.answerCallback(ctx, q.ID, clip("Approved "+prompt.GrantNote(grant), maxCallbackText))
	}
}

// maxCallbackText is Telegram's limit on a callback answer's text.
const maxCallbackText = 200

// pressNonDeciding handles the buttons that decide nothing: "Always…"
// shows where and for how long, "« Back" the request's own buttons again,
// "Edit" asks for the new input. Each answers the press itself; errors are
// those of a decision, for the caller to answer.
func (b *Bot) pressNonDeciding(ctx context.Context, q *models.CallbackQuery, button, id string, chat int64, msgID int) error {
	req, ref, err := b.cfg.Service.Request(ctx, id)
	if err != nil {
		return err
	}
	if ref.Status != prompt.ApprovalPending {
		return fmt.Errorf("approval %s is %s: %w", id, ref.Status, prompt.ErrNotPending)
	}
	switch button {
	case "w":
		if req.Scope == nil {
			return prompt.ErrNoGrant
		}
		b.answerCallback(ctx, q.ID, clip("Always allow "+req.Scope.Label+": choose where and for how long.", maxCallbackText))
		if err := b.editMarkup(ctx, chat, msgID, alwaysKeyboard(id)); err != nil {
			b.log.Warn("show the 'always' choices", "approval", id, "err", err)
		}
	case "b":
		b.answerCallback(ctx, q.ID, "")
		if err := b.editMarkup(ctx, chat, msgID, approvalKeyboard(req)); err != nil {
			b.log.Warn("show the request's buttons again", "approval", id, "err", err)
		}
	case "e":
		b.answerCallback(ctx, q.ID, "Reply with the new input")
		b.askEdit(ctx, req, chat, msgID)
	}
	return nil
}

// askEdit sends the message a reply to which edits request req: it shows
// the input now, ready to copy, and forces a reply.
func (b *Bot) askEdit(ctx context.Context, req prompt.ApprovalRequest, chat int64, requestMsg int) {
	h := &htmlText{}
	h.text("✏️ Reply to this message with the new input for ").wrap("code", clip(req.ToolName, maxNameLength)).
		text(": a JSON object, checked as the agent's would be. It becomes a new request to approve; this one closes. Now:\n")
	input := shownInput(req.Input)
	if utf16Len(input) > maxText-outcomeRoom-h.n {
		h.text("(too long to show; it is in the request's attachment)")
	} else {
		h.wrap("pre", input)
	}
	force := map[string]any{"force_reply": true, "input_field_placeholder": "{ … }"}
	id, err := b.send(ctx, message{chat: chat, html: h.b.String(), replyTo: requestMsg, markup: force})
	if err != nil {
		b.log.Error("ask for an edit", "approval", req.ApprovalID, "err", err)
		return
	}
	if err := b.cfg.Store.AddEditMessage(ctx, req.ApprovalID, chat, id); err != nil {
		b.log.Error("record the edit message", "approval", req.ApprovalID, "err", err)
		b.note(ctx, chat, id, "I could not record this message; reply to the request itself with /edit and the new input.")
	}
}

// editRequest replaces the input of approval id with what m says.
func (b *Bot) editRequest(ctx context.Context, m *models.Message, id, arguments string) {
	chat := m.Chat.ID
	if b.refusedNote(ctx, m, id, true) {
		return
	}
	var refused *prompt.EditError
	err := b.cfg.Service.Edit(ctx, id, strings.TrimSpace(arguments), who(*m.From))
	switch {
	case errors.As(err, &refused):
		h := &htmlText{}
		h.text("That edit was not taken: " + clip(refused.Reason, maxNoteLength) + ". The request is unchanged; send /edit again with a corrected input.")
		b.note(ctx, chat, m.ID, h.b.String())
	case errors.Is(err, prompt.ErrNotPending), errors.Is(err, prompt.ErrNotFound):
		b.note(ctx, chat, m.ID, "That request was already decided.")
	case err != nil:
		b.log.Error("edit approval", "approval", id, "err", err)
		b.note(ctx, chat, m.ID, internalError)
	default:
		b.note(ctx, chat, m.ID, "Edited. The edited call follows as a new request; approve it on its own.")
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
	if b.refusedNote(ctx, m, id, false) {
		return
	}
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
	copies, err := b.cfg.Store.ApprovalMessages(ctx, id)
	if errors.Is(err, prompt.ErrNotFound) && shown == nil {
		return nil // never shown: nothing to close
	}
	if err != nil {
		if shown == nil {
			return fmt.Errorf("find approval messages: %w", err)
		}
		copies = []prompt.ApprovalCopy{{ChatID: shown.Chat.ID, MessageID: shown.ID}}
	} else if shown != nil && unrecordedIn(copies, shown.Chat.ID, shown.ID) {
		// A copy whose record was lost (the process died between sending
		// and recording it) was pressed in a chat that holds another: edit
		// it too, and record it.
		copies = append(copies, prompt.ApprovalCopy{ChatID: shown.Chat.ID, MessageID: shown.ID})
		if err := b.cfg.Store.AddApprovalMessage(ctx, id, shown.Chat.ID, shown.ID); err != nil {
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
	for _, c := range copies {
		err := b.edit(ctx, c.ChatID, c.MessageID, base+line)
		switch {
		case err == nil:
		case permanent(err):
			b.log.Warn("approval message cannot be edited; skipped", "approval", id, "chat", c.ChatID, "message", c.MessageID, "err", err)
		case first == nil:
			first = fmt.Errorf("edit approval message %d in chat %d: %w", c.MessageID, c.ChatID, err)
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
