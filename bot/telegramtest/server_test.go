package telegramtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
)

const token = "42:abc"

var user = models.User{ID: 7, FirstName: "Ann"}

func client(t *testing.T, s *telegramtest.Server) *tgbot.Bot {
	t.Helper()
	b, err := tgbot.New(token, tgbot.WithServerURL(s.URL()), tgbot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseHTML(t *testing.T) {
	for _, tc := range []struct {
		in, plain, err string
	}{
		{in: "<b>bold</b> &lt;tag&gt; &amp; &quot;q&quot; &#65;&#x42;", plain: `bold <tag> & "q" AB`},
		{in: `<a href="https://x.example/?a=1&amp;b=2">x</a>`, plain: "x"},
		{in: "<pre><code class=\"language-go\">x := 1</code></pre>", plain: "x := 1"},
		{in: "<span class=\"tg-spoiler\">s</span><tg-spoiler>t</tg-spoiler>", plain: "st"},
		{in: "a > b", plain: "a > b"},
		{in: "<b>unclosed", err: "Can't find end tag"},
		{in: "<b><i>x</b></i>", err: "Unmatched end tag"},
		{in: "<script>x</script>", err: "Unsupported start tag"},
		{in: "a < b", err: "Unclosed start tag"},
		{in: "a < b >", err: "Empty tag name"},
		{in: "fish & chips", err: "reserved"},
		{in: "&nbsp;", err: "Unsupported HTML entity"},
		{in: "<pre><b>x</b></pre>", err: "Can't nest"},
		{in: "<code><i>x</i></code>", err: "Can't nest"},
		{in: "<a>x</a>", err: "href"},
		{in: `<b class="x">x</b>`, err: "Unsupported attribute"},
	} {
		plain, _, err := telegramtest.ParseHTML(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseHTML(%q) err = %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseHTML(%q): %v", tc.in, err)
		case tc.err == "" && plain != tc.plain:
			t.Errorf("ParseHTML(%q) = %q, want %q", tc.in, plain, tc.plain)
		}
	}
}

func TestEntitiesCountInUTF16(t *testing.T) {
	_, ents, err := telegramtest.ParseHTML("😀 <b>hé</b>")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Offset != 3 || ents[0].Length != 2 {
		t.Errorf("entities = %+v, want bold at 3 length 2", ents)
	}
}

func TestSendMessageValidatesLikeTelegram(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	b := client(t, s)
	ctx := context.Background()
	s.UserMessage(user.ID, user, "hi")
	send := func(p *tgbot.SendMessageParams) error {
		p.ChatID = user.ID
		_, err := b.SendMessage(ctx, p)
		return err
	}
	libButton := models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "go", CallbackData: "x"}}}}
	for name, tc := range map[string]struct {
		p    tgbot.SendMessageParams
		want string
	}{
		"plain":              {p: tgbot.SendMessageParams{Text: "a < b"}},
		"html":               {p: tgbot.SendMessageParams{Text: "<b>x</b>", ParseMode: models.ParseModeHTML}},
		"bad html":           {p: tgbot.SendMessageParams{Text: "a < b", ParseMode: models.ParseModeHTML}, want: "can't parse entities"},
		"empty":              {p: tgbot.SendMessageParams{Text: "<b> </b>", ParseMode: models.ParseModeHTML}, want: "message text is empty"},
		"too long":           {p: tgbot.SendMessageParams{Text: strings.Repeat("😀", 2049)}, want: "message is too long"},
		"4096 after parsing": {p: tgbot.SendMessageParams{Text: "<b>" + strings.Repeat("&amp;", 4096) + "</b>", ParseMode: models.ParseModeHTML}},
		"library button":     {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: libButton}, want: "BUTTON_COPY_TEXT_INVALID"},
		"own button":         {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: json.RawMessage(`{"inline_keyboard":[[{"text":"go","callback_data":"x"}]]}`)}},
		"data too long":      {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: json.RawMessage(`{"inline_keyboard":[[{"text":"go","callback_data":"` + strings.Repeat("d", 65) + `"}]]}`)}, want: "BUTTON_DATA_INVALID"},
		"no action":          {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: json.RawMessage(`{"inline_keyboard":[[{"text":"go"}]]}`)}, want: "unallowed"},
		"two actions":        {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: json.RawMessage(`{"inline_keyboard":[[{"text":"go","callback_data":"x","url":"https://x.example"}]]}`)}, want: "exactly one"},
		"no text":            {p: tgbot.SendMessageParams{Text: "x", ReplyMarkup: json.RawMessage(`{"inline_keyboard":[[{"callback_data":"x"}]]}`)}, want: "Text must be non-empty"},
		"missing reply":      {p: tgbot.SendMessageParams{Text: "x", ReplyParameters: &models.ReplyParameters{MessageID: 99}}, want: "message to be replied not found"},
	} {
		err := send(&tc.p)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, tgbot.ErrorBadRequest) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want a 400 with %q", name, err, tc.want)
		}
	}
	if _, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: 12345, Text: "x"}); err == nil || !strings.Contains(err.Error(), "chat not found") {
		t.Errorf("unknown chat: %v", err)
	}
}

func TestFaultsAndUnknownMethods(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	b := client(t, s)
	ctx := context.Background()
	s.Fail("getMe", 1, telegramtest.TooManyRequests(7))
	s.Fail("getMe", 1, telegramtest.ServerError())
	_, err := b.GetMe(ctx)
	var tooMany *tgbot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 7 {
		t.Errorf("first getMe: %v, want 429 retry after 7", err)
	}
	if _, err := b.GetMe(ctx); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("second getMe: %v, want a 500", err)
	}
	me, err := b.GetMe(ctx)
	if err != nil || me.ID != 42 || !me.IsBot {
		t.Errorf("getMe = %+v, %v", me, err)
	}
	resp, err := http.Post(s.URL()+"/bot"+token+"/noSuchMethod", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		OK        bool `json:"ok"`
		ErrorCode int  `json:"error_code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 404 || body.OK || body.ErrorCode != 404 {
		t.Errorf("unknown method: %d %+v", resp.StatusCode, body)
	}
	if _, err := tgbot.New("42:wrong", tgbot.WithServerURL(s.URL())); err == nil {
		t.Error("a wrong token passed getMe")
	}
}

type updatesResp struct {
	OK     bool            `json:"ok"`
	Result []models.Update `json:"result"`
}

func getUpdates(t *testing.T, s *telegramtest.Server, query string) ([]models.Update, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(s.URL() + "/bot" + token + "/getUpdates?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r updatesResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || !r.OK {
		t.Fatalf("getUpdates: %v %+v", err, r)
	}
	return r.Result, time.Since(start)
}

func TestGetUpdatesOffsetsAndLongPolling(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	s.UserMessage(user.ID, user, "one")
	s.UserMessage(user.ID, user, "two")
	ups, _ := getUpdates(t, s, "")
	if len(ups) != 2 || ups[0].Message.Text != "one" || ups[1].ID != ups[0].ID+1 {
		t.Fatalf("updates = %+v", ups)
	}
	// Not confirmed: served again.
	if again, _ := getUpdates(t, s, "limit=1"); len(again) != 1 || again[0].ID != ups[0].ID {
		t.Fatalf("limit=1 gave %+v", again)
	}
	// Confirming the first leaves the second.
	if rest, _ := getUpdates(t, s, "offset="+itoa(ups[1].ID)); len(rest) != 1 || rest[0].ID != ups[1].ID {
		t.Fatalf("after offset: %+v", rest)
	}
	if s.PendingUpdates() != 1 {
		t.Errorf("pending = %d, want 1", s.PendingUpdates())
	}
	next := itoa(ups[1].ID + 1)
	if none, d := getUpdates(t, s, "offset="+next+"&timeout=1"); len(none) != 0 || d < 900*time.Millisecond {
		t.Errorf("empty long poll returned %v after %v, want nothing after ~1s", none, d)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.UserMessage(user.ID, user, "three")
	}()
	got, d := getUpdates(t, s, "offset="+next+"&timeout=10")
	if len(got) != 1 || got[0].Message.Text != "three" || d > 5*time.Second {
		t.Errorf("long poll got %+v after %v", got, d)
	}
}

func itoa(n int64) string { return strings.TrimSpace(strings.ReplaceAll(string(mustJSON(n)), `"`, "")) }

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestEditsAndCallbacks(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	b := client(t, s)
	ctx := context.Background()
	s.UserMessage(user.ID, user, "hi")
	kb := json.RawMessage(`{"inline_keyboard":[[{"text":"ok","callback_data":"a:1"}]]}`)
	m, err := b.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: user.ID, Text: "<b>q</b>", ParseMode: models.ParseModeHTML, ReplyMarkup: kb})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != 2 {
		t.Errorf("message ID %d, want 2 (IDs count per chat)", m.ID)
	}
	_, err = b.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: user.ID, MessageID: m.ID, Text: "<b>q</b>", ParseMode: models.ParseModeHTML, ReplyMarkup: kb})
	if err == nil || !strings.Contains(err.Error(), "message is not modified") {
		t.Errorf("same edit: %v", err)
	}
	if _, err := b.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: user.ID, MessageID: m.ID, Text: "done"}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Message(user.ID, m.ID)
	if got.Text != "done" || got.ReplyMarkup != nil {
		t.Errorf("after edit: %q %+v", got.Text, got.ReplyMarkup)
	}
	if _, err := b.EditMessageText(ctx, &tgbot.EditMessageTextParams{ChatID: user.ID, MessageID: 1, Text: "x"}); err == nil {
		t.Error("edited a user's message")
	}
	id := s.Press(user.ID, user, m.ID, "a:1")
	if _, err := b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: id}); err == nil {
		t.Error("a callback was answered twice")
	}
	if !s.CallbackAnswered(id) {
		t.Error("answer not recorded")
	}
}
