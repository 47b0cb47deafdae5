package telegramtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
)

func TestGroupChatTypes(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	if m := s.UserMessage(-4001, user, "hi all"); m.Chat.Type != models.ChatTypeGroup || m.Chat.Title == "" {
		t.Errorf("group chat = %+v, want a titled group", m.Chat)
	}
	if m := s.UserMessage(-1001234567890, user, "hi all"); m.Chat.Type != models.ChatTypeSupergroup {
		t.Errorf("chat -100… = %+v, want a supergroup", m.Chat)
	}
	if m := s.UserMessage(user.ID, user, "hi"); m.Chat.Type != models.ChatTypePrivate {
		t.Errorf("own chat = %+v, want private", m.Chat)
	}
}

func TestMentionsGetEntitiesAsTelegramAddsThem(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	for _, tc := range []struct {
		text string
		want []models.MessageEntity
	}{
		{"@test_bot hello", []models.MessageEntity{{Type: models.MessageEntityTypeMention, Offset: 0, Length: 9}}},
		// Offsets count UTF-16 units: the emoji takes two.
		{"😀 hi @Test_Bot!", []models.MessageEntity{{Type: models.MessageEntityTypeMention, Offset: 6, Length: 9}}},
		{"/help@test_bot now", []models.MessageEntity{{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: 14}}},
		{"mail me at ann@example.com", nil}, // glued to a word: not a mention
		{"@abc is too short", nil},
		{"@alice_x and @bob_y", []models.MessageEntity{
			{Type: models.MessageEntityTypeMention, Offset: 0, Length: 8},
			{Type: models.MessageEntityTypeMention, Offset: 13, Length: 6}}},
	} {
		m := s.UserMessage(-4001, user, tc.text)
		if !slices.Equal(m.Entities, tc.want) {
			t.Errorf("%q: entities %+v, want %+v", tc.text, m.Entities, tc.want)
		}
	}
	bot := s.Bot()
	m := s.UserMentions(-4001, user, "Test Bot, hello", "Test Bot", bot)
	if len(m.Entities) != 1 || m.Entities[0].Type != models.MessageEntityTypeTextMention || m.Entities[0].Offset != 0 ||
		m.Entities[0].Length != 8 || m.Entities[0].User == nil || m.Entities[0].User.ID != bot.ID {
		t.Errorf("text mention entities = %+v", m.Entities)
	}
}

func TestUserJoinsIsAServiceMessage(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	m := s.UserJoins(-4001, user)
	if m.Text != "" || len(m.NewChatMembers) != 1 || m.NewChatMembers[0].ID != user.ID || m.Chat.ID != -4001 {
		t.Errorf("join = %+v", m)
	}
	if q := s.Queued(); len(q) != 1 || q[0].Message == nil || len(q[0].Message.NewChatMembers) != 1 {
		t.Errorf("queued = %+v, want the join", q)
	}
}

// TestBotCannotWriteFirstInPrivate: a user seen in a group who never
// started the bot cannot be written to (403); once they have, they can; a
// user never seen anywhere is an unknown chat (400).
func TestBotCannotWriteFirstInPrivate(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	b := client(t, s)
	ctx := context.Background()
	s.UserMessage(-4001, user, "hi all")
	_, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: user.ID, Text: "psst"})
	if !errors.Is(err, tgbot.ErrorForbidden) || !strings.Contains(err.Error(), "bot can't initiate conversation with a user") {
		t.Fatalf("message to a user without a private chat: %v, want 403", err)
	}
	if _, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: -4001, Text: "hello group"}); err != nil {
		t.Fatalf("message to the group: %v", err)
	}
	if _, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: 8888, Text: "x"}); !errors.Is(err, tgbot.ErrorBadRequest) {
		t.Fatalf("message to a user never seen: %v, want 400 chat not found", err)
	}
	s.UserMessage(user.ID, user, "/start")
	if _, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: user.ID, Text: "psst"}); err != nil {
		t.Fatalf("message once the user started the bot: %v", err)
	}
}
