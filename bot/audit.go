package bot

import (
	"context"
	"fmt"

	"github.com/go-telegram/bot/models"

	"tollgate/prompt"
)

// auditShown is how many decisions /audit shows: the last few are what a
// person in the chat asks about; an operator reads the rest with
// `bot audit`.
const auditShown = 15

// Bounds on the parts of an /audit line, in UTF-16 units, so that
// auditShown lines fit in one message.
const (
	maxAuditSource   = 64
	maxAuditFeedback = 60
)

// auditOutcome is the icon and word of each outcome.
var auditOutcome = map[prompt.Outcome]string{
	prompt.OutcomeApproved:  "✅ approved",
	prompt.OutcomeRejected:  "❌ rejected",
	prompt.OutcomeExpired:   "⌛ expired",
	prompt.OutcomeEdited:    "✏️ edited",
	prompt.OutcomeCancelled: "⛔ cancelled",
	prompt.OutcomeAllowed:   "☑️ allowed",
	prompt.OutcomeDenied:    "🚫 denied",
}

// auditCommand is /audit: the chat's last decisions, newest first.
func (b *Bot) auditCommand(ctx context.Context, m *models.Message) {
	chat := m.Chat.ID
	es, err := b.cfg.Service.Audit(ctx, prompt.AuditQuery{ConversationID: conversationOf(chat), Limit: auditShown})
	if err != nil {
		b.log.Error("read the audit", "chat", chat, "err", err)
		b.note(ctx, chat, m.ID, internalError)
		return
	}
	b.note(ctx, chat, m.ID, renderAudit(es))
}

// renderAudit shows decisions one a line: when, the outcome, the tool,
// what decided, the input's hash and any feedback. Every value is escaped
// and clipped; lines that would not fit in a message are counted instead.
func renderAudit(es []prompt.AuditEntry) string {
	if len(es) == 0 {
		return "No decisions recorded in this chat yet."
	}
	h := &htmlText{}
	h.tag("🧾 ").wrap("b", "Last decisions in this chat").text(" (newest first, times in UTC):")
	for i, e := range es {
		line := &htmlText{}
		line.text("\n" + e.At.UTC().Format("2006-01-02 15:04") + " ")
		word, ok := auditOutcome[e.Outcome]
		if !ok {
			word = clip(string(e.Outcome), maxAuditSource)
		}
		line.text(word+" ").wrap("code", clip(e.Tool, maxNameLength)).text(" " + auditSource(e))
		if len(e.InputHash) >= 12 {
			line.text(" · input ").wrap("code", e.InputHash[:12])
		}
		if e.Feedback != "" {
			line.text(" · “" + clipExact(e.Feedback, maxAuditFeedback) + "”")
		}
		if h.n+line.n > maxText-100 {
			h.text(fmt.Sprintf("\n…and %d more; an operator can list them all with ", len(es)-i)).wrap("code", "bot audit").text(".")
			break
		}
		h.tag(line.b.String())
		h.n += line.n
	}
	return h.b.String()
}

// auditSource says what made a decision, in a few words.
func auditSource(e prompt.AuditEntry) string {
	s := clip(e.Source, maxAuditSource)
	switch e.SourceKind {
	case prompt.SourcePerson:
		return "by " + s
	case prompt.SourceRule:
		return "rule " + s
	case prompt.SourceSystem:
		return "(request ended undecided)"
	}
	return s // a grant, the mode, a timeout: their Source says it
}
