package bot

import (
	"context"
	"errors"
	"fmt"

	"tollgate/prompt"
)

// Notify says where a group's approval requests are shown. A private
// chat's requests are always shown in it.
type Notify string

const (
	// NotifyChat shows a group's requests in the group, where any approver
	// in it may decide.
	NotifyChat Notify = "chat"
	// NotifyDM sends a group's requests to each approver's private chat
	// with the bot, and tells the group only that a decision is awaited:
	// the tool's input is not shown to everyone in the group.
	NotifyDM Notify = "dm"
)

// ParseNotify reads an APPROVAL_NOTIFY value: "chat" (also the empty
// string) or "dm". Any other value is an error that says which are allowed.
func ParseNotify(s string) (Notify, error) {
	switch Notify(s) {
	case "", NotifyChat:
		return NotifyChat, nil
	case NotifyDM:
		return NotifyDM, nil
	}
	return "", fmt.Errorf("%q is not one of chat, dm", s)
}

// deciders are the users whose private chats a group's request is sent to
// with NotifyDM: those who may decide it. The one place that says who
// they are, so that a separate list of approvers replaces it here alone.
func (b *Bot) deciders() []int64 {
	if len(b.cfg.Approvers) > 0 {
		return b.cfg.Approvers
	}
	return b.cfg.AllowedUsers
}

// privateLine is what a group reads while its request waits in the
// approvers' private chats.
const privateLine = "⏳ Waiting for approval (sent to approvers privately)."

// sendPrivately sends a group's request to each decider's private chat
// (a user's private chat with the bot has the user's ID) and, if any copy
// arrived, tells the group in one line. It reports whether a copy
// arrived. A decider who never started a private chat with the bot cannot
// be written to (Telegram answers 403: a bot cannot write first): that
// one is logged and skipped. When no copy arrived and some failure may
// pass, the error is returned so that the outbox tries again; when every
// decider refused for good, it returns false and nil, and the caller
// shows the request in the group instead.
func (b *Bot) sendPrivately(ctx context.Context, req prompt.ApprovalRequest, group int64) (bool, error) {
	sent := 0
	var passing error
	for _, user := range b.deciders() {
		_, err := b.sendCopy(ctx, req, user)
		switch {
		case err == nil:
			sent++
		case permanent(err):
			b.log.Warn("approver cannot be sent the request privately (they must start a chat with the bot first); skipped",
				"approval", req.ApprovalID, "user", user, "err", err)
		default:
			b.log.Error("request not sent to an approver privately", "approval", req.ApprovalID, "user", user, "err", err)
			passing = errors.Join(passing, fmt.Errorf("send to %d: %w", user, err))
		}
	}
	if sent == 0 {
		return false, passing
	}
	// The copies are out: a failure of this line must not send them again,
	// so it is logged, not returned.
	if _, err := b.send(ctx, message{chat: group, html: escapeHTML(privateLine)}); err != nil {
		b.log.Error("tell the group its request went to approvers privately", "chat", group, "approval", req.ApprovalID, "err", err)
	}
	return true, nil
}
