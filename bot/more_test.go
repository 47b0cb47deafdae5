package bot_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestWebhookModeChecksSecretBeforeProcessing(t *testing.T) {
	var hook http.Handler
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hook.ServeHTTP(w, r) }))
	defer front.Close()
	h := newHarness(t, lsThenAnswer("done"), func(c *bot.Config) {
		c.Webhook = bot.Webhook{URL: front.URL + "/telegram", Secret: "s3cret-token"}
	})
	hook = h.bot.WebhookHandler()

	// Before Run, a delivery is refused so that Telegram retries it.
	req := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1}`))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret-token")
	rec := httptest.NewRecorder()
	hook.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("delivery before Run answered %d, want 503", rec.Code)
	}

	h.start()
	if url, secret := h.srv.Webhook(); url != front.URL+"/telegram" || secret != "s3cret-token" {
		t.Fatalf("webhook set to %q %q", url, secret)
	}
	if n := len(h.srv.Calls(telegramtest.Method("deleteWebhook"))); n != 0 {
		t.Errorf("webhook mode called deleteWebhook %d times", n)
	}
	// A forged delivery: a stranger's text posing as Alice's.
	forged := `{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":111,"type":"private"},"from":{"id":111,"first_name":"Alice"},"text":"delete everything"}}`
	for _, secret := range []string{"", "wrong", "s3cret-token-and-more"} {
		body := &readCounter{r: strings.NewReader(forged)}
		req := httptest.NewRequest(http.MethodPost, "/telegram", body)
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", secret, rec.Code)
		}
		if body.n != 0 {
			t.Errorf("secret %q: %d body bytes read before the check", secret, body.n)
		}
	}

	// The real thing, delivered by the fake Telegram to the webhook.
	h.srv.UserMessage(alice.ID, alice, "list")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
	if n := len(h.model.Requests()); n != 2 {
		t.Errorf("model called %d times, want 2 (the forged deliveries must not count)", n)
	}
	for _, d := range h.srv.Deliveries() {
		if d.Status != http.StatusOK {
			t.Errorf("delivery %+v", d)
		}
	}
}

type readCounter struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestRestartResendsQueuedRequestAndOldButtonsWork(t *testing.T) {
	first := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`))})
	first.start()
	first.srv.UserMessage(alice.ID, alice, "list")
	old, approve, _ := first.approvalMessage(1)
	first.stop()

	// A new process: same prompt store, same bot store, same Telegram.
	second := newHarness(t, []prompttest.Step{prompttest.Answer("listed after restart")}, func(c *bot.Config) {
		c.APIURL = first.srv.URL()
		c.Store = first.store
	})
	second.srv, second.store = first.srv, first.store
	var err error
	second.svc, err = prompt.NewService(prompt.Config{Model: second.model, Store: first.pstore, Tools: toolsOf(t, second)})
	if err != nil {
		t.Fatal(err)
	}
	second.bot, err = bot.New(bot.Config{Token: token, APIURL: first.srv.URL(), AllowedUsers: []int64{alice.ID},
		Service: second.svc, Store: first.store, Limits: bot.Limits{PerChat: time.Millisecond, Global: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	// Recover emits the request before Run: it must wait for Run, not vanish.
	if n, err := second.svc.Recover(context.Background()); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	before := len(first.srv.Calls(telegramtest.Method("sendMessage")))
	second.start()
	resent, _, _ := second.approvalMessage(2)
	if resent.ID == old.ID || resent.Text != old.Text {
		t.Errorf("re-sent %d %q, old %d %q", resent.ID, resent.Text, old.ID, old.Text)
	}
	if after := len(first.srv.Calls(telegramtest.Method("sendMessage"))); after != before+1 {
		t.Errorf("%d messages sent at start, want the one request", after-before)
	}
	cb := first.srv.Press(alice.ID, alice, old.ID, approve)
	second.waitAnswer(cb, "Approved")
	first.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("listed after restart")))
	edits := first.srv.WaitCalls(t, wait, 2, telegramtest.Method("editMessageText", telegramtest.Succeeded))
	if edits[0].Int("message_id")+edits[1].Int("message_id") != int64(old.ID+resent.ID) {
		t.Errorf("edited %d and %d, want %d and %d", edits[0].Int("message_id"), edits[1].Int("message_id"), old.ID, resent.ID)
	}
	if n := second.ran.Load() + first.ran.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

// toolsOf builds the gated tool again for a harness rebuilt by hand.
func toolsOf(t *testing.T, h *harness) []*prompt.Tool {
	tool, err := prompt.NewTool("shell.run", "Runs a shell command.", prompt.AlwaysFor[shellIn]("runs a command on the host"),
		func(ctx context.Context, in shellIn) (string, error) {
			h.ran.Add(1)
			h.ranArg <- in.Cmd
			return "ran: " + in.Cmd, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return []*prompt.Tool{tool}
}

func TestLongInputIsSentWholeAsDocument(t *testing.T) {
	long := strings.Repeat("x", 6000) + "END"
	h := newHarness(t, []prompttest.Step{prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"`+long+`"}`))})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "go")
	msg, _, _ := h.approvalMessage(1)
	if !strings.Contains(msg.Text, "characters, too long to show here") || strings.Contains(msg.Text, "xxxxxxxx") {
		t.Errorf("approval text %q", msg.Text[:min(len(msg.Text), 300)])
	}
	doc := h.srv.WaitCall(t, wait, telegramtest.Method("sendDocument", telegramtest.Succeeded))
	if !bytes.Contains(doc.Files["document"].Data, []byte(long)) {
		t.Error("document does not hold the whole input")
	}
	m, _ := doc.Message()
	if m.ReplyToMessage == nil || m.ReplyToMessage.ID != msg.ID {
		t.Error("document is not attached to the request")
	}
}

func TestServerErrorsAreRetriedAndEntityErrorsFallBackToPlainText(t *testing.T) {
	h := newHarness(t, []prompttest.Step{prompttest.Answer("**bold** answer")})
	h.start()
	h.srv.Fail("sendMessage", 2, telegramtest.ServerError())
	h.srv.Fail("sendMessage", 1, telegramtest.BadRequest("can't parse entities: Unsupported start tag \"foo\" at byte offset 0"))
	h.srv.UserMessage(alice.ID, alice, "hi")
	ok := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded))
	if ok.Param("parse_mode") != "" || ok.Param("text") != "bold answer" {
		t.Errorf("fallback sent %q with parse_mode %q", ok.Param("text"), ok.Param("parse_mode"))
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage"))); n != 4 {
		t.Errorf("%d sendMessage calls, want 2 server errors, 1 refused, 1 plain", n)
	}
}

func TestLongAnswerIsSplitNotCut(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 10000; i++ {
		b.WriteString("line <" + strings.Repeat("é", 50) + ">\n")
	}
	h := newHarness(t, []prompttest.Step{prompttest.Answer(b.String() + "THE END")})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "write a lot")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("THE END")))
	var got strings.Builder
	for _, c := range h.srv.Calls(telegramtest.Method("sendMessage")) {
		if !c.OK() {
			t.Fatalf("a part was refused: %s", c.Description)
		}
		m, _ := c.Message()
		got.WriteString(m.Text + "\n")
	}
	if strings.TrimSpace(got.String()) != strings.TrimSpace(b.String()+"THE END") {
		t.Error("the parts do not add up to the answer")
	}
}

func TestRequestThatCannotBeSentStaysPendingAndPendingResends(t *testing.T) {
	h := newHarness(t, lsThenAnswer("done"), func(c *bot.Config) { c.Limits.MaxAttempts = 2 })
	h.start()
	h.srv.Fail("sendMessage", 2, telegramtest.ServerError())
	h.srv.UserMessage(alice.ID, alice, "list")
	h.srv.WaitCalls(t, wait, 2, telegramtest.Method("sendMessage"))
	deadline := time.Now().Add(wait)
	for !strings.Contains(h.logs.String(), "stays pending") {
		if time.Now().After(deadline) {
			t.Fatalf("failure not logged; logs:\n%s", h.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustPending(t, h)
	h.srv.UserMessage(alice.ID, alice, "/pending")
	msg, approve, _ := h.approvalMessage(1)
	cb := h.srv.Press(alice.ID, alice, msg.ID, approve)
	h.waitAnswer(cb, "Approved")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))
}

func TestSendsToOneChatArePaced(t *testing.T) {
	const gap = 40 * time.Millisecond
	h := newHarness(t, nil, func(c *bot.Config) { c.Limits.PerChat = gap })
	h.start()
	for range 4 {
		h.srv.UserMessage(alice.ID, alice, "/help")
	}
	calls := h.srv.WaitCalls(t, wait, 4, telegramtest.Method("sendMessage", telegramtest.Succeeded))
	for i := 1; i < len(calls); i++ {
		if d := calls[i].Time.Sub(calls[i-1].Time); d < gap-5*time.Millisecond {
			t.Errorf("messages %d and %d to one chat %v apart, want ≥ %v", i-1, i, d, gap)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompt.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]bot.Config{
		"no token":          {Service: svc, Store: newMemStore()},
		"no store":          {Token: token, Service: svc},
		"webhook no secret": {Token: token, Service: svc, Store: newMemStore(), Webhook: bot.Webhook{URL: "https://x.example/hook"}},
	} {
		if _, err := bot.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestRunReportsABadToken(t *testing.T) {
	h := newHarness(t, nil, func(c *bot.Config) { c.Token = "42:wrong" })
	err := h.bot.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") {
		t.Errorf("Run = %v, want a message naming TELEGRAM_BOT_TOKEN", err)
	}
}
