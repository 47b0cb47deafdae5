package bot

import (
	"context"
	"strings"
	"unicode/utf16"

	"github.com/go-telegram/bot/models"
)

// In a group the bot hears everyone (or, with Telegram's privacy mode on,
// every command, mention and reply to it) but answers only what is meant
// for it: a message that mentions it (@name, or a text mention of its
// user), replies to one of its messages, or is a command for it (/cmd or
// /cmd@name). Everything else is people talking to each other and is
// ignored without a word; a stranger who addresses the bot is told no,
// briefly. The conversation is the group: one prompt at a time, as in a
// private chat.

// isGroup reports whether a chat is a group or supergroup.
func isGroup(c models.Chat) bool {
	return c.Type == models.ChatTypeGroup || c.Type == models.ChatTypeSupergroup
}

// isGroupID reports whether a chat ID is a group's, where only the ID is
// known (a conversation's chat): Telegram gives users positive IDs and
// groups, supergroups and channels negative ones. The limiter tells them
// apart the same way.
func isGroupID(chat int64) bool { return chat < 0 }

// groupMessage decides what to do with a group message: nil if it is not
// for the bot or was answered here (a stranger, a bare mention), else the
// message to handle as a private one, its text without the bot's mentions.
func (b *Bot) groupMessage(ctx context.Context, m *models.Message) *models.Message {
	text, ok := b.addressed(m)
	if !ok {
		return nil
	}
	if !b.allowed[m.From.ID] {
		b.log.Info("group message for the bot from a user not allowed", "user", m.From.ID, "chat", m.Chat.ID)
		b.note(ctx, m.Chat.ID, m.ID, "Sorry, you are not allowed to use this bot.")
		return nil
	}
	if text == "" && m.Text != "" {
		b.note(ctx, m.Chat.ID, m.ID, "Yes? Mention me together with what you need, or reply to one of my messages.")
		return nil
	}
	cp := *m
	// The entities' offsets were into the text before the cut; nothing
	// after this point reads them but command, which a command skips.
	cp.Text = text
	return &cp
}

// addressed reports whether group message m is for the bot, and returns
// its text with the bot's mentions cut out (a command's text is left as
// it is, for command to read).
func (b *Bot) addressed(m *models.Message) (string, bool) {
	if cmd, ok := b.command(m); ok {
		return m.Text, cmd != "" // "": a command for another bot
	}
	b.mu.Lock()
	name, id := b.botName, b.botID
	b.mu.Unlock()
	units := utf16.Encode([]rune(m.Text))
	var cuts [][2]int // UTF-16 ranges of the bot's mentions, in order
	for _, e := range m.Entities {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
			continue
		}
		span := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
		mine := (e.Type == models.MessageEntityTypeMention && name != "" && strings.EqualFold(span, "@"+name)) ||
			(e.Type == models.MessageEntityTypeTextMention && e.User != nil && e.User.ID == id)
		if mine {
			cuts = append(cuts, [2]int{e.Offset, e.Offset + e.Length})
		}
	}
	reply := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == id && id != 0
	if len(cuts) == 0 {
		return m.Text, reply
	}
	return cutMentions(units, cuts), true
}

// cutMentions removes the ranges cuts (in order, not overlapping) from the
// UTF-16 text units, so that the model reads "what is on example.com"
// rather than "@tollgate_bot, what is on example.com".
func cutMentions(units []uint16, cuts [][2]int) string {
	var b strings.Builder
	at := 0
	for _, c := range cuts {
		if c[0] < at {
			continue
		}
		b.WriteString(string(utf16.Decode(units[at:c[0]])))
		at = c[1]
		// "ask @bot now" leaves one space at the seam, not two; spacing
		// elsewhere (an indented snippet) is the user's and stays.
		if at < len(units) && units[at] == ' ' && (b.Len() == 0 || strings.HasSuffix(b.String(), " ")) {
			at++
		}
	}
	b.WriteString(string(utf16.Decode(units[at:])))
	// "@bot, do this" and "@bot: do this" address the bot; the punctuation
	// is not part of the request.
	text := strings.TrimLeft(strings.TrimSpace(b.String()), ",:;")
	return strings.TrimSpace(text)
}
