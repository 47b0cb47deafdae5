package telegramtest

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

// Groups, as Telegram has them: a chat with a negative ID (a supergroup's
// starts -100), in which users write to each other and, now and then, to
// the bot. Telegram marks each @username in a message with a mention
// entity, and a user joining shows as a service message. A bot may write
// in a group it is in, but never first to a user in private: a user the
// fake has seen (in a group, say) without a private chat of their own is
// answered 403 "bot can't initiate conversation with a user", as Telegram
// answers until that user has started the bot.

// supergroupBelow is where supergroup IDs start: -100 followed by the
// twelve or so digits of the channel ID.
const supergroupBelow = -1_000_000_000_000

// cantInitiate is Telegram's answer to a message for a user who never
// started a private chat with the bot.
const cantInitiate = "Forbidden: bot can't initiate conversation with a user"

// mentionPattern is an @username as Telegram recognises one in text:
// 5 to 32 letters, digits and underscores, not glued to a word before it.
var mentionPattern = regexp.MustCompile(`(?:^|[^A-Za-z0-9_@])(@[A-Za-z0-9_]{5,32})\b`)

// groupInfo is the chat a group of ID id is: a supergroup if its ID says so.
func groupInfo(id int64) models.Chat {
	if id <= supergroupBelow {
		return models.Chat{ID: id, Type: models.ChatTypeSupergroup, Title: fmt.Sprintf("Supergroup %d", id)}
	}
	return models.Chat{ID: id, Type: models.ChatTypeGroup, Title: fmt.Sprintf("Group %d", id)}
}

// mentions returns the mention entities Telegram adds to text, in UTF-16
// offsets.
func mentions(text string) []models.MessageEntity {
	var out []models.MessageEntity
	for _, m := range mentionPattern.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[2], m[3]
		out = append(out, models.MessageEntity{Type: models.MessageEntityTypeMention,
			Offset: utf16Len(text[:start]), Length: utf16Len(text[start:end])})
	}
	return out
}

// UserJoins makes user join group chatID: the service message Telegram
// sends for it (new_chat_members, no text) is queued as an update.
func (s *Server) UserJoins(chatID int64, user models.User) models.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[user.ID] = user
	c := s.chatLocked(chatID, user)
	m := &models.Message{ID: c.nextID, From: &user, Date: int(time.Now().Unix()), Chat: c.info,
		NewChatMembers: []models.User{user}}
	c.nextID++
	c.messages[m.ID] = m
	cp := *m
	s.pushLocked(&models.Update{Message: &cp})
	return *m
}

// UserMentions is UserMessage with a text_mention of user mentioned over
// the first occurrence of label in text: how clients mention someone who
// has no username.
func (s *Server) UserMentions(chatID int64, from models.User, text, label string, mentioned models.User) models.Message {
	return s.userMessageWith(chatID, from, 0, text, func(m *models.Message) {
		i := strings.Index(text, label)
		if i < 0 {
			s.t.Errorf("telegramtest: %q not in %q", label, text)
			return
		}
		u := mentioned
		m.Entities = append(m.Entities, models.MessageEntity{Type: models.MessageEntityTypeTextMention,
			Offset: utf16Len(text[:i]), Length: utf16Len(label), User: &u})
	})
}

// unreachableLocked reports the 403 for a message to chat id when id is a
// user the fake knows who has no private chat with the bot.
func (s *Server) unreachableLocked(id int64) *apiError {
	if _, known := s.users[id]; known && id > 0 {
		return &apiError{code: http.StatusForbidden, desc: cantInitiate}
	}
	return nil
}
