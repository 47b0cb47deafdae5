package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

func (s *Server) serve(ctx context.Context, c Call) (any, *apiError) {
	switch strings.ToLower(c.Method) {
	case "getme":
		return s.bot, nil
	case "getupdates":
		return s.getUpdates(ctx, c)
	case "sendmessage":
		return s.sendMessage(c)
	case "editmessagetext":
		return s.editMessageText(c)
	case "editmessagereplymarkup":
		return s.editMessageReplyMarkup(c)
	case "answercallbackquery":
		return s.answerCallbackQuery(c)
	case "sendchataction":
		return s.sendChatAction(c)
	case "senddocument":
		return s.sendDocument(c)
	case "setmycommands":
		return s.setMyCommands(c)
	case "getmycommands":
		s.mu.Lock()
		defer s.mu.Unlock()
		return append([]models.BotCommand{}, s.commands...), nil
	case "deletewebhook":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.webhookURL, s.webhookSecret = "", ""
		if c.Param("drop_pending_updates") == "true" {
			s.updates = nil
		}
		s.notifyLocked()
		return true, nil
	case "setwebhook":
		return s.setWebhook(c)
	case "getwebhookinfo":
		s.mu.Lock()
		defer s.mu.Unlock()
		return map[string]any{"url": s.webhookURL, "has_custom_certificate": false, "pending_update_count": len(s.updates)}, nil
	}
	return nil, &apiError{code: http.StatusNotFound, desc: "Not Found"}
}

func updateKind(u *models.Update) string {
	switch {
	case u.Message != nil:
		return "message"
	case u.EditedMessage != nil:
		return "edited_message"
	case u.CallbackQuery != nil:
		return "callback_query"
	}
	return "other"
}

func (s *Server) getUpdates(ctx context.Context, c Call) (any, *apiError) {
	offset, limit, timeout := c.Int("offset"), int(c.Int("limit")), int(c.Int("timeout"))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	s.mu.Lock()
	if s.webhookURL != "" {
		s.mu.Unlock()
		return nil, &apiError{code: http.StatusConflict, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	if raw := c.Param("allowed_updates"); raw != "" {
		var allowed []string
		if err := json.Unmarshal([]byte(raw), &allowed); err != nil {
			s.mu.Unlock()
			return nil, badRequest("can't parse allowed_updates JSON array")
		}
		s.allowedUpdates = allowed
	}
	if s.poller != nil {
		close(s.poller)
	}
	mine := make(chan struct{})
	s.poller = mine
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.poller == mine {
			s.poller = nil
		}
		s.mu.Unlock()
	}()

	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		before := len(s.updates)
		// An offset confirms every update below it, as Telegram forgets them;
		// a negative one keeps only the last -offset.
		switch {
		case offset > 0:
			i := 0
			for i < len(s.updates) && s.updates[i].ID < offset {
				i++
			}
			s.updates = s.updates[i:]
		case offset < 0 && int(-offset) < len(s.updates):
			s.updates = s.updates[len(s.updates)+int(offset):]
		}
		var out []*models.Update
		kept := s.updates[:0:0]
		for _, u := range s.updates {
			if len(s.allowedUpdates) > 0 && !contains(s.allowedUpdates, updateKind(u)) {
				continue // Telegram drops what the bot did not ask for
			}
			kept = append(kept, u)
			if len(out) < limit {
				out = append(out, u)
			}
		}
		s.updates = kept
		if len(kept) != before {
			s.notifyLocked() // for AwaitConfirmed, while this call still waits
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return []*models.Update{}, nil
		case <-deadline.C:
			return []*models.Update{}, nil
		case <-mine:
			return nil, &apiError{code: http.StatusConflict, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		case <-ch:
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// chatOf resolves chat_id to a chat the bot has seen; the caller holds mu.
func (s *Server) chatOfLocked(c Call) (*chat, *apiError) {
	raw := c.Param("chat_id")
	if raw == "" {
		return nil, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, badRequest("chat not found")
	}
	ch := s.chats[id]
	if ch == nil {
		if aerr := s.unreachableLocked(id); aerr != nil {
			return nil, aerr
		}
		return nil, badRequest("chat not found")
	}
	return ch, nil
}

// parseText applies parse_mode to text, as Telegram does before checking
// the length.
func parseText(text, mode string) (string, []models.MessageEntity, *apiError) {
	switch mode {
	case "":
		return text, nil, nil
	case "HTML", "html":
		plain, ents, err := ParseHTML(text)
		if err != nil {
			return "", nil, badRequest("%v", err)
		}
		return plain, ents, nil
	case "MarkdownV2", "Markdown":
		// Not validated by this fake: Tollgate sends HTML.
		return text, nil, nil
	}
	return "", nil, badRequest("unsupported parse_mode")
}

var buttonActions = []string{"url", "callback_data", "web_app", "login_url", "switch_inline_query",
	"switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay"}

// parseMarkup validates reply_markup as Telegram does for inline keyboards.
func parseMarkup(raw string) (*models.InlineKeyboardMarkup, *apiError) {
	if raw == "" {
		return nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	kb, ok := top["inline_keyboard"]
	if !ok {
		for _, k := range []string{"keyboard", "remove_keyboard", "force_reply"} {
			if _, ok := top[k]; ok {
				return nil, nil
			}
		}
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	var rows [][]map[string]json.RawMessage
	if err := json.Unmarshal(kb, &rows); err != nil {
		return nil, badRequest("can't parse inline keyboard button: InlineKeyboardButton must be an Object")
	}
	out := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}}
	for _, row := range rows {
		var r []models.InlineKeyboardButton
		for _, b := range row {
			var text string
			if json.Unmarshal(b["text"], &text) != nil || text == "" {
				return nil, badRequest("can't parse inline keyboard button: Text must be non-empty")
			}
			if ct, ok := b["copy_text"]; ok {
				var v struct {
					Text string `json:"text"`
				}
				if json.Unmarshal(ct, &v) != nil || v.Text == "" || utf16Len(v.Text) > 256 {
					return nil, badRequest("BUTTON_COPY_TEXT_INVALID")
				}
			}
			n := 0
			for _, a := range buttonActions {
				if _, ok := b[a]; ok {
					n++
				}
			}
			if n == 0 {
				return nil, badRequest("text buttons are unallowed in the inline keyboard")
			}
			if n > 1 {
				return nil, badRequest("can't parse inline keyboard button: exactly one of the optional fields must be used")
			}
			if d, ok := b["callback_data"]; ok {
				var data string
				if json.Unmarshal(d, &data) != nil || len(data) < 1 || len(data) > 64 {
					return nil, badRequest("BUTTON_DATA_INVALID")
				}
			}
			if u, ok := b["url"]; ok {
				var s string
				pu, err := url.Parse(strings.Trim(string(u), `"`))
				if json.Unmarshal(u, &s) != nil || err != nil || (pu.Scheme != "http" && pu.Scheme != "https" && pu.Scheme != "tg") {
					return nil, badRequest("BUTTON_URL_INVALID")
				}
			}
			var btn models.InlineKeyboardButton
			all, _ := json.Marshal(b)
			if err := json.Unmarshal(all, &btn); err != nil {
				return nil, badRequest("can't parse inline keyboard button: %v", err)
			}
			r = append(r, btn)
		}
		out.InlineKeyboard = append(out.InlineKeyboard, r)
	}
	return out, nil
}

// replyTarget resolves reply_parameters or reply_to_message_id; the caller
// holds mu.
func replyTargetLocked(ch *chat, c Call) (*models.Message, *apiError) {
	id, allowMissing := int(c.Int("reply_to_message_id")), c.Param("allow_sending_without_reply") == "true"
	if raw := c.Param("reply_parameters"); raw != "" {
		var rp struct {
			MessageID                int  `json:"message_id"`
			AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
		}
		if err := json.Unmarshal([]byte(raw), &rp); err != nil {
			return nil, badRequest("can't parse reply parameters JSON object")
		}
		id, allowMissing = rp.MessageID, rp.AllowSendingWithoutReply
	}
	if id == 0 {
		return nil, nil
	}
	m := ch.messages[id]
	if m == nil {
		if allowMissing {
			return nil, nil
		}
		return nil, badRequest("message to be replied not found")
	}
	cp := *m
	cp.ReplyToMessage = nil
	return &cp, nil
}

func (s *Server) newBotMessageLocked(ch *chat) *models.Message {
	from := s.bot
	m := &models.Message{ID: ch.nextID, From: &from, Date: int(time.Now().Unix()), Chat: ch.info}
	ch.nextID++
	ch.messages[m.ID] = m
	return m
}

// messageText parses and checks the text and reply_markup of a call that
// sets a message's text; tooLong is Telegram's wording for that method.
func messageText(c Call, tooLong string) (string, []models.MessageEntity, *models.InlineKeyboardMarkup, *apiError) {
	text, ents, aerr := parseText(c.Param("text"), c.Param("parse_mode"))
	if aerr != nil {
		return "", nil, nil, aerr
	}
	if strings.TrimSpace(text) == "" {
		return "", nil, nil, badRequest("message text is empty")
	}
	if utf16Len(text) > MaxTextLength {
		return "", nil, nil, badRequest("%s", tooLong)
	}
	markup, aerr := parseMarkup(c.Param("reply_markup"))
	if aerr != nil {
		return "", nil, nil, aerr
	}
	return text, ents, markup, nil
}

func (s *Server) sendMessage(c Call) (any, *apiError) {
	text, ents, markup, aerr := messageText(c, "message is too long")
	if aerr != nil {
		return nil, aerr
	}
	if raw := c.Param("link_preview_options"); raw != "" {
		var v map[string]any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return nil, badRequest("can't parse link preview options JSON object")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, aerr := s.chatOfLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	reply, aerr := replyTargetLocked(ch, c)
	if aerr != nil {
		return nil, aerr
	}
	m := s.newBotMessageLocked(ch)
	m.Text, m.Entities, m.ReplyMarkup, m.ReplyToMessage = text, ents, markup, reply
	return m, nil
}

func (s *Server) editTargetLocked(c Call) (*models.Message, *apiError) {
	if c.Param("inline_message_id") != "" {
		return nil, badRequest("MESSAGE_ID_INVALID")
	}
	ch, aerr := s.chatOfLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	m := ch.messages[int(c.Int("message_id"))]
	if m == nil {
		return nil, badRequest("message to edit not found")
	}
	if m.From == nil || m.From.ID != s.bot.ID {
		return nil, badRequest("message can't be edited")
	}
	return m, nil
}

const notModified = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"

func sameMarkup(a, b *models.InlineKeyboardMarkup) bool {
	empty := func(m *models.InlineKeyboardMarkup) bool { return m == nil || len(m.InlineKeyboard) == 0 }
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	return reflect.DeepEqual(a, b)
}

func (s *Server) editMessageText(c Call) (any, *apiError) {
	text, ents, markup, aerr := messageText(c, "MESSAGE_TOO_LONG")
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.editTargetLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	if m.Document != nil {
		return nil, badRequest("there is no text in the message to edit")
	}
	if m.Text == text && reflect.DeepEqual(m.Entities, ents) && sameMarkup(m.ReplyMarkup, markup) {
		return nil, badRequest(notModified)
	}
	m.Text, m.Entities, m.ReplyMarkup, m.EditDate = text, ents, markup, int(time.Now().Unix())
	return m, nil
}

func (s *Server) editMessageReplyMarkup(c Call) (any, *apiError) {
	markup, aerr := parseMarkup(c.Param("reply_markup"))
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.editTargetLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	if sameMarkup(m.ReplyMarkup, markup) {
		return nil, badRequest(notModified)
	}
	m.ReplyMarkup, m.EditDate = markup, int(time.Now().Unix())
	return m, nil
}

func (s *Server) answerCallbackQuery(c Call) (any, *apiError) {
	if utf16Len(c.Param("text")) > 200 {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := c.Param("callback_query_id")
	answered, ok := s.callbacks[id]
	if !ok || answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	s.callbacks[id] = true
	return true, nil
}

var chatActions = map[string]bool{"typing": true, "upload_photo": true, "record_video": true, "upload_video": true,
	"record_voice": true, "upload_voice": true, "upload_document": true, "choose_sticker": true,
	"find_location": true, "record_video_note": true, "upload_video_note": true}

func (s *Server) sendChatAction(c Call) (any, *apiError) {
	if !chatActions[c.Param("action")] {
		return nil, badRequest("wrong parameter action in request")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, aerr := s.chatOfLocked(c); aerr != nil {
		return nil, aerr
	}
	return true, nil
}

func (s *Server) sendDocument(c Call) (any, *apiError) {
	caption, ents, aerr := parseText(c.Param("caption"), c.Param("parse_mode"))
	if aerr != nil {
		return nil, aerr
	}
	if utf16Len(caption) > MaxCaptionLength {
		return nil, badRequest("message caption is too long")
	}
	markup, aerr := parseMarkup(c.Param("reply_markup"))
	if aerr != nil {
		return nil, aerr
	}
	doc := &models.Document{}
	if f, ok := c.Files["document"]; ok {
		if len(f.Data) == 0 {
			return nil, badRequest("file must be non-empty")
		}
		doc.FileName, doc.FileSize = f.Name, int64(len(f.Data))
	} else if ref := c.Param("document"); ref != "" {
		doc.FileName = ref
	} else {
		return nil, badRequest("there is no document in the request")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, aerr := s.chatOfLocked(c)
	if aerr != nil {
		return nil, aerr
	}
	reply, aerr := replyTargetLocked(ch, c)
	if aerr != nil {
		return nil, aerr
	}
	s.nextFile++
	doc.FileID, doc.FileUniqueID = fmt.Sprintf("file%d", s.nextFile), fmt.Sprintf("u%d", s.nextFile)
	m := s.newBotMessageLocked(ch)
	m.Document, m.Caption, m.CaptionEntities, m.ReplyMarkup, m.ReplyToMessage = doc, caption, ents, markup, reply
	return m, nil
}

var commandName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (s *Server) setMyCommands(c Call) (any, *apiError) {
	var cmds []models.BotCommand
	if err := c.Decode("commands", &cmds); err != nil {
		return nil, badRequest("can't parse commands JSON array")
	}
	if len(cmds) > 100 {
		return nil, badRequest("too many commands")
	}
	for _, cmd := range cmds {
		if !commandName.MatchString(cmd.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := utf16Len(cmd.Description); n < 1 || n > 256 {
			return nil, badRequest("command description must be 1-256 characters")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = cmds
	return true, nil
}

var secretToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func (s *Server) setWebhook(c Call) (any, *apiError) {
	target, secret := c.Param("url"), c.Param("secret_token")
	if target != "" {
		u, err := url.Parse(target)
		// Telegram demands HTTPS; this fake also takes http so that tests
		// can use a plain httptest listener.
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, badRequest("bad webhook: An HTTPS URL must be provided for webhook")
		}
	}
	if secret != "" && !secretToken.MatchString(secret) {
		return nil, badRequest("secret token contains unallowed characters")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookURL, s.webhookSecret = target, secret
	if c.Param("drop_pending_updates") == "true" {
		s.updates = nil
	}
	if s.poller != nil {
		close(s.poller)
		s.poller = nil
	}
	s.notifyLocked()
	return true, nil
}
