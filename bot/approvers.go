package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-telegram/bot/models"

	"tollgate/prompt"
)

// Who may decide. The list of approvers is the bot's: the core decides
// by approval ID and knows no Telegram users, so it cannot tell whether
// another approver exists. What the core does own is the quorum (votes
// keyed by person, counted in the store's transaction).

// The answers a refused decider reads.
const (
	notApprover = "You are not an approver."
	selfRefused = "You started this request; another approver must decide it."
)

// approverSet is Config.Approvers, or the allowed users when it is empty.
func approverSet(cfg Config) map[int64]bool {
	ids := cfg.Approvers
	if len(ids) == 0 {
		ids = cfg.AllowedUsers
	}
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// personID is how the core and the store name a Telegram user: votes
// and prompt authors are keyed by it, since a display name can change.
func personID(u models.User) string { return strconv.FormatInt(u.ID, 10) }

// selfBlocked reports whether user, the author of a prompt, may not
// approve its requests: with NoSelfApproval, as long as some other
// approver could. With the author the only approver, blocking would leave
// the request undecidable, so they may.
func (b *Bot) selfBlocked(user int64, author string) bool {
	if !b.cfg.NoSelfApproval || author == "" || author != strconv.FormatInt(user, 10) {
		return false
	}
	for id := range b.approvers {
		if id != user {
			return true
		}
	}
	return false
}

// refuseDecider returns why user may not act on approval id, or "" if
// they may. approving is true for what moves the call towards running
// (approve, "always", edit); a rejection, a stop or a cancel only ever
// keeps something from running, so the author may always veto.
func (b *Bot) refuseDecider(ctx context.Context, user int64, id string, approving bool) (string, error) {
	if !b.approvers[user] {
		return notApprover, nil
	}
	if !approving || !b.cfg.NoSelfApproval {
		return "", nil
	}
	ref, err := b.cfg.Service.LookupApproval(ctx, id)
	if err != nil {
		return "", err
	}
	if b.selfBlocked(user, ref.Author) {
		return selfRefused, nil
	}
	return "", nil
}

// approvingButton reports whether a request's button moves its call
// towards running: approve, "always" and its choices, edit.
func approvingButton(button string) bool {
	return button == "a" || button == "w" || button == "g" || button == "e"
}

// approvedAnswer answers an approve press: decided, or how many more
// approvals the quorum needs.
func approvedAnswer(t prompt.Tally) string {
	if t.Decided() {
		return "Approved"
	}
	return fmt.Sprintf("Approved: %d of %d. Another approver must approve too.", len(t.By), t.Needed)
}

// votesLine says who approved a request under a quorum so far; "" when
// no quorum applies or it was reached (the outcome line then names them).
func votesLine(req prompt.ApprovalRequest) string {
	if req.Quorum <= 1 || len(req.Votes) >= req.Quorum {
		return ""
	}
	if len(req.Votes) == 0 {
		return fmt.Sprintf("\nNeeds %d approvals from different approvers.", req.Quorum)
	}
	names := clip(strings.Join(req.Votes, ", "), maxVotesLength)
	return fmt.Sprintf("\nApproved so far: %s — %d of %d", names, len(req.Votes), req.Quorum)
}

// maxVotesLength bounds the names in a votes line, in UTF-16 units.
const maxVotesLength = 300

// deliverVotes re-renders every copy of a request still waiting under a
// quorum to show who approved so far, buttons kept. A request decided
// meanwhile is left to its decision's notice.
func (b *Bot) deliverVotes(ctx context.Context, approvalID string) error {
	req, ref, err := b.request(ctx, approvalID)
	if err != nil || ref.Status != prompt.ApprovalPending {
		return err
	}
	copies, err := b.cfg.Store.ApprovalMessages(ctx, approvalID)
	if errors.Is(err, prompt.ErrNotFound) {
		return nil // not shown yet: its request notice shows the votes
	}
	if err != nil {
		return fmt.Errorf("%w: approval messages: %w", errGiveUp, err)
	}
	html, kb := renderApproval(req).HTML, approvalKeyboard(req)
	var first error
	for _, c := range copies {
		err := b.editWithMarkup(ctx, c.ChatID, c.MessageID, html, kb)
		switch {
		case err == nil:
		case permanent(err):
			b.log.Warn("approval message cannot be edited; skipped", "approval", approvalID, "message", c.MessageID, "err", err)
		case first == nil:
			first = fmt.Errorf("show votes on message %d: %w", c.MessageID, err)
		}
	}
	return first
}

// refusedNote tells the sender of m, in a reply, if they may not act on
// approval id (see refuseDecider), and reports whether it did.
func (b *Bot) refusedNote(ctx context.Context, m *models.Message, id string, approving bool) bool {
	why, err := b.refuseDecider(ctx, m.From.ID, id, approving)
	switch {
	case errors.Is(err, prompt.ErrNotFound):
		b.note(ctx, m.Chat.ID, m.ID, "That request was already decided.")
		return true
	case err != nil:
		b.log.Error("look up an approval's author", "approval", id, "err", err)
		b.note(ctx, m.Chat.ID, m.ID, internalError)
		return true
	case why != "":
		b.note(ctx, m.Chat.ID, m.ID, why)
		return true
	}
	return false
}
