package bot

import (
	"context"
	"errors"
	"slices"

	"tollgate/prompt"
)

// A request may be shown in several chats: its conversation's, and with
// APPROVAL_NOTIFY=dm each approver's private chat. A press or a reply is
// honoured in any chat that holds a recorded copy; these helpers answer
// the questions handle.go asks of the copies.

// lastCopyIn returns the newest recorded copy of approval id in chat, and
// false if the chat holds none (or the store could not tell: logged).
func (b *Bot) lastCopyIn(ctx context.Context, id string, chat int64) (int, bool) {
	copies, err := b.cfg.Store.ApprovalMessages(ctx, id)
	if err != nil {
		if !errors.Is(err, prompt.ErrNotFound) {
			b.log.Error("find approval messages", "approval", id, "err", err)
		}
		return 0, false
	}
	for _, c := range slices.Backward(copies) {
		if c.ChatID == chat {
			return c.MessageID, true
		}
	}
	return 0, false
}

// unrecordedIn reports whether message msgID of chat is missing from
// copies while the chat holds another copy: a copy whose record was lost.
func unrecordedIn(copies []prompt.ApprovalCopy, chat int64, msgID int) bool {
	inChat := false
	for _, c := range copies {
		if c.ChatID == chat {
			if c.MessageID == msgID {
				return false
			}
			inChat = true
		}
	}
	return inChat
}
