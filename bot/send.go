package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/prompt"
)

// permanent reports errors that a retry cannot fix.
func permanent(err error) bool {
	var migrate *tgbot.MigrateError
	return errors.Is(err, tgbot.ErrorBadRequest) || errors.Is(err, tgbot.ErrorForbidden) ||
		errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound) ||
		errors.Is(err, tgbot.ErrorConflict) || errors.As(err, &migrate)
}

// do is the one outbound path: every call to Telegram waits for the
// limiter (messages for their place, anything else only for a 429's hold)
// and is retried, after retry_after on a 429 and with doubling backoff on
// 5xx and network errors, until MaxAttempts or ctx ends. A 429 holds
// chatID for retry_after, or the whole bot if the call is not tied to a
// chat (chatID 0: getMe, callback answers, setup calls), since flood
// control there can only be the bot's as a whole. The waits are on the
// bot's clock.
func (b *Bot) do(ctx context.Context, chatID int64, p pace, what string, f func(context.Context) error) error {
	lim := b.cfg.Limits
	backoff := lim.Backoff
	for attempt := 1; ; attempt++ {
		if err := b.lim.wait(ctx, chatID, p); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if permanent(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		var delay time.Duration
		var tooMany *tgbot.TooManyRequestsError
		if errors.As(err, &tooMany) {
			delay = time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
			b.lim.hold(chatID, delay)
		} else {
			delay = backoff
			backoff = min(backoff*2, lim.MaxBackoff)
		}
		if attempt >= lim.MaxAttempts {
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, attempt, err)
		}
		b.log.Debug("telegram call failed; retrying", "call", what, "attempt", attempt, "wait", delay, "err", err)
		if err := b.sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}

func noPreview() *models.LinkPreviewOptions {
	return &models.LinkPreviewOptions{IsDisabled: tgbot.True()}
}

// button is an inline keyboard button with only text and callback_data:
// the library's type always adds a copy_text object, which Telegram may
// refuse with BUTTON_COPY_TEXT_INVALID.
type button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

type keyboard struct {
	InlineKeyboard [][]button `json:"inline_keyboard"`
}

// approvalKeyboard is a request's buttons; "Always…" only where the tool
// offers a grant.
func approvalKeyboard(req prompt.ApprovalRequest) keyboard {
	id := req.ApprovalID
	top := []button{{Text: "✅ Approve", CallbackData: "a:" + id}}
	if req.Scope != nil {
		top = append(top, button{Text: "🔁 Always…", CallbackData: "w:" + id})
	}
	return keyboard{InlineKeyboard: [][]button{top, {
		{Text: "✏️ Edit", CallbackData: "e:" + id},
		{Text: "❌ Reject", CallbackData: "r:" + id},
		{Text: "⛔ Stop", CallbackData: "s:" + id},
	}}}
}

// grantChoices maps the choice part of a "g:" button to what it grants.
var grantChoices = map[string]prompt.GrantSpec{
	"ch": {For: time.Hour},
	"cf": {},
	"ah": {AllChats: true, For: time.Hour},
	"af": {AllChats: true},
}

// alwaysKeyboard is what "Always…" turns a request's buttons into: where
// and for how long, or back.
func alwaysKeyboard(approvalID string) keyboard {
	g := func(text, choice string) button {
		return button{Text: text, CallbackData: "g:" + approvalID + ":" + choice}
	}
	return keyboard{InlineKeyboard: [][]button{
		{g("This chat · 1 hour", "ch"), g("This chat · until revoked", "cf")},
		{g("All chats · 1 hour", "ah"), g("All chats · until revoked", "af")},
		{{Text: "« Back", CallbackData: "b:" + approvalID}},
	}}
}

// editMarkup edits only the buttons of a message.
func (b *Bot) editMarkup(ctx context.Context, chat int64, msgID int, kb keyboard) error {
	err := b.do(ctx, chat, paceChat, "edit buttons", func(ctx context.Context) error {
		_, err := b.tg.EditMessageReplyMarkup(ctx, &tgbot.EditMessageReplyMarkupParams{ChatID: chat, MessageID: msgID, ReplyMarkup: kb})
		return err
	})
	if err != nil && isNotModified(err) {
		return nil
	}
	return err
}

// editWithMarkup replaces a message's text and buttons.
func (b *Bot) editWithMarkup(ctx context.Context, chat int64, msgID int, html string, kb keyboard) error {
	err := b.do(ctx, chat, paceChat, "edit message", func(ctx context.Context) error {
		_, err := b.tg.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: chat, MessageID: msgID, Text: html,
			ParseMode: models.ParseModeHTML, LinkPreviewOptions: noPreview(), ReplyMarkup: kb})
		return err
	})
	if err != nil && isNotModified(err) {
		return nil
	}
	return err
}

func isParseError(err error) bool {
	return errors.Is(err, tgbot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities")
}

func isNotModified(err error) bool {
	return errors.Is(err, tgbot.ErrorBadRequest) && strings.Contains(err.Error(), "message is not modified")
}

// message is one message to send.
type message struct {
	chat    int64
	html    string
	plain   string // sent instead if Telegram refuses the HTML; "" to not retry
	replyTo int
	markup  any
}

// send sends m and returns its message ID. A formatting problem never loses
// the text: if Telegram refuses the entities, the plain text is sent.
func (b *Bot) send(ctx context.Context, m message) (int, error) {
	var id int
	call := func(text string, mode models.ParseMode) func(context.Context) error {
		return func(ctx context.Context) error {
			// Fresh params per attempt: the library may still be reading
			// the last ones when a failed request returns.
			params := &tgbot.SendMessageParams{ChatID: m.chat, Text: text, ParseMode: mode,
				LinkPreviewOptions: noPreview(), ReplyMarkup: m.markup}
			if m.replyTo != 0 {
				params.ReplyParameters = &models.ReplyParameters{MessageID: m.replyTo, AllowSendingWithoutReply: true}
			}
			sent, err := b.tg.SendMessage(ctx, params)
			if err == nil {
				id = sent.ID
			}
			return err
		}
	}
	err := b.do(ctx, m.chat, paceChat, "send message", call(m.html, models.ParseModeHTML))
	if err != nil && isParseError(err) && m.plain != "" {
		b.log.Warn("telegram refused the formatting; sending plain text", "chat", m.chat, "err", err)
		err = b.do(ctx, m.chat, paceChat, "send plain message", call(m.plain, ""))
	}
	return id, err
}

// note sends a short message of the bot's own, in HTML.
func (b *Bot) note(ctx context.Context, chat int64, replyTo int, html string) {
	if _, err := b.send(ctx, message{chat: chat, html: html, replyTo: replyTo}); err != nil {
		b.log.Error("send note", "chat", chat, "err", err)
	}
}

func (b *Bot) sendDocument(ctx context.Context, chat int64, replyTo int, name string, data []byte, caption string) error {
	return b.do(ctx, chat, paceChat, "send document", func(ctx context.Context) error {
		params := &tgbot.SendDocumentParams{ChatID: chat, Caption: caption,
			Document: &models.InputFileUpload{Filename: name, Data: bytes.NewReader(data)}}
		if replyTo != 0 {
			params.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
		}
		_, err := b.tg.SendDocument(ctx, params)
		return err
	})
}

// edit replaces a message's text and removes its keyboard; "message is not
// modified" means it already shows that, which is success.
func (b *Bot) edit(ctx context.Context, chat int64, msgID int, html string) error {
	err := b.do(ctx, chat, paceChat, "edit message", func(ctx context.Context) error {
		_, err := b.tg.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: chat, MessageID: msgID, Text: html,
			ParseMode: models.ParseModeHTML, LinkPreviewOptions: noPreview()})
		return err
	})
	if err != nil && isNotModified(err) {
		return nil
	}
	return err
}

func (b *Bot) answerCallback(ctx context.Context, id, text string) {
	err := b.do(ctx, 0, paceGlobal, "answer callback", func(ctx context.Context) error {
		_, err := b.tg.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text})
		return err
	})
	if err != nil {
		b.log.Warn("answer callback", "err", err)
	}
}
