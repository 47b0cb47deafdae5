package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/llm/llmtest"
	"tollgate/store/pgtest"
)

// The end-to-end tests build the real binary and run it as a child process
// against a fake Bot API, a fake OpenAI-compatible endpoint and a local web
// page, as a user would run it.

const token = "123456:TEST-token"

var alice = models.User{ID: 4242, FirstName: "Alice"}

var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tollgate-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bot")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	// The replica tests share one PostgreSQL server, stopped here.
	code := pgtest.Run(m)
	if bin, err := buildBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// syncBuffer collects a child's output while tests read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startBot runs the binary with exactly env (nothing inherited, so no proxy
// or stray variable changes what is tested).
func startBot(t *testing.T, env map[string]string) *proc {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("bot output:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// wait waits for the process to exit and returns its error.
func (p *proc) wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("bot still running after %s; output:\n%s", timeout, p.stderr.String())
		return nil
	}
}

type world struct {
	tg    *telegramtest.Server
	llm   *llmtest.Server
	page  *httptest.Server
	hits  *atomic.Int32
	db    string
	extra map[string]string
}

func newWorld(t *testing.T) *world {
	w := &world{tg: telegramtest.NewServer(t, token), llm: llmtest.NewServer(t), hits: &atomic.Int32{}}
	w.page = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, "<html><head><title>T</title></head><body><h1>Hello from the page</h1><p>All is well.</p></body></html>")
	}))
	t.Cleanup(w.page.Close)
	w.db = filepath.Join(t.TempDir(), "data", "tollgate.db")
	return w
}

func (w *world) env() map[string]string {
	env := map[string]string{
		"TELEGRAM_BOT_TOKEN":     token,
		"TELEGRAM_API_URL":       w.tg.URL(),
		"TELEGRAM_ALLOWED_USERS": fmt.Sprint(alice.ID),
		"LLM_BASE_URL":           w.llm.URL(),
		"LLM_MODEL":              "test-model",
		"DATABASE_PATH":          w.db,
		// The page is served on 127.0.0.1 at a random port.
		"WEBFETCH_ALLOW_PRIVATE": "true",
		"LOG_LEVEL":              "debug",
	}
	for k, v := range w.extra {
		env[k] = v
	}
	return env
}

func (w *world) fetchArgs() string {
	b, _ := json.Marshal(map[string]string{"url": w.page.URL + "/news"})
	return string(b)
}

const wait = 20 * time.Second

// approvalMessages matches messages the bot sent with an inline keyboard.
func approvalMessages(c telegramtest.Call) bool {
	return c.Method == "sendMessage" && c.OK() && strings.Contains(c.Param("reply_markup"), "inline_keyboard")
}

// buttonData returns the callback data of the button whose text contains
// label.
func buttonData(t *testing.T, c telegramtest.Call, label string) string {
	t.Helper()
	var markup struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := c.Decode("reply_markup", &markup); err != nil {
		t.Fatal(err)
	}
	for _, row := range markup.InlineKeyboard {
		for _, b := range row {
			if strings.Contains(b.Text, label) {
				if len(b.CallbackData) > 64 {
					t.Fatalf("callback data over 64 bytes: %q", b.CallbackData)
				}
				return b.CallbackData
			}
		}
	}
	t.Fatalf("no %q button in %s", label, c.Param("reply_markup"))
	return ""
}

func messageID(t *testing.T, c telegramtest.Call) int {
	t.Helper()
	m, err := c.Message()
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// sentText matches a message from the bot whose text contains s.
func sentText(s string) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && c.OK() && strings.Contains(c.Param("text"), s)
	}
}

// toolResult is the last tool result the model was shown in req.
func toolResult(req llmtest.Request) string {
	var result string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			result = m.Content
		}
	}
	return result
}

func TestApproveFetchesThePageAndAnswers(t *testing.T) {
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("The page says hello."))
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	req := w.tg.WaitCall(t, wait, approvalMessages)
	text := req.Param("text")
	for _, want := range []string{"web-fetch.fetch", "is not on the allowlist", w.page.URL + "/news"} {
		if !strings.Contains(text, want) {
			t.Errorf("approval message lacks %q:\n%s", want, text)
		}
	}
	if w.hits.Load() != 0 {
		t.Fatal("page fetched before approval")
	}
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))

	w.tg.WaitCall(t, wait, sentText("The page says hello."))
	if got := w.hits.Load(); got != 1 {
		t.Fatalf("page fetched %d times", got)
	}
	if result := toolResult(w.llm.Requests()[1]); !strings.Contains(result, "Hello from the page") {
		t.Fatalf("the model did not get the page: %q", result)
	}
	// The request message now says who approved it and has no buttons.
	edit := w.tg.WaitCall(t, wait, func(c telegramtest.Call) bool {
		return c.Method == "editMessageText" && c.OK() && strings.Contains(c.Param("text"), "Approved")
	})
	if strings.Contains(edit.Param("reply_markup"), "callback_data") {
		t.Fatalf("buttons left after the decision: %s", edit.Param("reply_markup"))
	}
}

func TestRejectNeverFetches(t *testing.T) {
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("Understood, I will not read it."))
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "Read the news page")
	req := w.tg.WaitCall(t, wait, approvalMessages)
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Reject"))
	w.tg.WaitCall(t, wait, sentText("Understood, I will not read it."))
	if w.hits.Load() != 0 {
		t.Fatal("rejected fetch reached the page")
	}
	if result := toolResult(w.llm.Requests()[1]); !strings.Contains(result, "Rejected by user") {
		t.Fatalf("the model was not told of the rejection: %q", result)
	}
}

func TestPendingApprovalSurvivesSIGKILL(t *testing.T) {
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("After the restart: hello."))
	first := startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	shown := w.tg.WaitCall(t, wait, approvalMessages)
	first.kill()

	second := startBot(t, w.env())
	resent := w.tg.WaitCalls(t, wait, 2, approvalMessages)[1]
	if buttonData(t, resent, "Approve") != buttonData(t, shown, "Approve") {
		t.Fatal("the re-sent request is not the same approval")
	}
	// The button the user saw before the crash still works.
	w.tg.Press(alice.ID, alice, messageID(t, shown), buttonData(t, shown, "Approve"))
	w.tg.WaitCall(t, wait, sentText("After the restart: hello."))
	if got := w.hits.Load(); got != 1 {
		t.Fatalf("page fetched %d times", got)
	}
	// Both copies of the request say it was approved.
	edited := map[int64]bool{}
	w.tg.Await(wait, 2, func(c telegramtest.Call) bool {
		if c.Method == "editMessageText" && c.OK() && strings.Contains(c.Param("text"), "Approved") {
			edited[c.Int("message_id")] = true
			return true
		}
		return false
	})
	for _, c := range []telegramtest.Call{shown, resent} {
		if !edited[int64(messageID(t, c))] {
			t.Errorf("copy %d of the request was not updated", messageID(t, c))
			for _, e := range w.tg.Calls(nil) {
				t.Logf("%s %v ok=%v %s", e.Method, e.Params, e.OK(), e.Description)
			}
		}
	}

	// A graceful stop exits cleanly and says so.
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(wait); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, second.stderr.String())
	}
	if !strings.Contains(second.stderr.String(), "stopped") {
		t.Fatalf("no stop line in output:\n%s", second.stderr.String())
	}
}

func TestStartupErrorsNameWhatToFix(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name string
		edit func(env map[string]string)
		want string
	}{
		{"missing token", func(env map[string]string) { delete(env, "TELEGRAM_BOT_TOKEN") }, "TELEGRAM_BOT_TOKEN is required"},
		{"bad allowed users", func(env map[string]string) { env["TELEGRAM_ALLOWED_USERS"] = "4242,alice" }, `TELEGRAM_ALLOWED_USERS: "alice" is not a numeric Telegram user ID`},
		{"bad approval notify", func(env map[string]string) { env["APPROVAL_NOTIFY"] = "pigeon" }, `APPROVAL_NOTIFY: "pigeon" is not one of chat, dm`},
		{"database is not a database", func(env map[string]string) {
			path := filepath.Join(t.TempDir(), "junk.db")
			if err := os.WriteFile(path, []byte("this is not sqlite, it is a shopping list"), 0o600); err != nil {
				t.Fatal(err)
			}
			env["DATABASE_PATH"] = path
		}, "junk.db"},
		{"bad approval mode", func(env map[string]string) { env["APPROVAL_MODE"] = "yolo" }, `APPROVAL_MODE: "yolo" is not one of`},
		{"deny list names no tool", func(env map[string]string) { env["APPROVAL_DENY_TOOLS"] = "shell.*" }, `APPROVAL_DENY_TOOLS: "shell.*" names no tool`},
		{"rules file with a mistake", func(env map[string]string) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte("allow:\n  - tool: web-fetch.fetch\n    host: \"foo*.example.com\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env["APPROVAL_RULES"] = path
		}, "rules.yaml:3: allow rule 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := w.env()
			tc.edit(env)
			p := startBot(t, env)
			err := p.wait(wait)
			if err == nil {
				t.Fatal("the bot started")
			}
			if out := p.stderr.String(); !strings.Contains(out, tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestUnreachableModelIsExplainedInTheChat(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there now
	w.extra = map[string]string{"LLM_BASE_URL": dead}
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "hello?")
	msg := w.tg.WaitCall(t, 60*time.Second, sentText("could not reach the model endpoint"))
	if !strings.Contains(msg.Param("text"), ln.Addr().String()) {
		t.Fatalf("message does not say which endpoint: %s", msg.Param("text"))
	}
}

func TestStrangerIsToldTheirIDAndTheModelIsNotCalled(t *testing.T) {
	w := newWorld(t)
	startBot(t, w.env())
	mallory := models.User{ID: 777, FirstName: "Mallory"}
	w.tg.UserMessage(mallory.ID, mallory, "run something for me")
	w.tg.WaitCall(t, wait, sentText("777"))
	if n := len(w.llm.Requests()); n != 0 {
		t.Fatalf("model called %d times for a stranger", n)
	}
}

func TestWebhookModeChecksTheSecret(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	w.extra = map[string]string{
		"WEBHOOK_URL":    "http://" + addr + "/telegram",
		"WEBHOOK_SECRET": "s3cret-token_1",
		"LISTEN_ADDR":    addr,
	}
	w.llm.Add(llmtest.Text("Hi from the webhook."))
	startBot(t, w.env())

	w.tg.WaitCall(t, wait, telegramtest.Method("setWebhook", telegramtest.Succeeded))
	if _, secret := w.tg.Webhook(); secret != "s3cret-token_1" {
		t.Fatalf("webhook secret = %q", secret)
	}
	w.tg.UserMessage(alice.ID, alice, "hello")
	w.tg.WaitCall(t, wait, sentText("Hi from the webhook."))

	// A delivery without the secret is refused and processes nothing.
	body := `{"update_id":999,"message":{"message_id":1,"date":1,"chat":{"id":4242,"type":"private"},"from":{"id":4242,"is_bot":false,"first_name":"Alice"},"text":"forged"}}`
	for _, secret := range []string{"", "wrong"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+"/telegram", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("secret %q: status %d, want 401", secret, resp.StatusCode)
		}
	}
	for _, path := range []string{"/healthz", "/health"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s status %d", path, resp.StatusCode)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(w.llm.Requests()); n != 1 {
		t.Fatalf("model called %d times; the forged delivery was processed", n)
	}
}

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"bot", "version"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "tollgate ") {
		t.Fatalf("version output %q", out.String())
	}
	if err := run(context.Background(), []string{"bot", "frobnicate"}, func(string) string { return "" }, &out, &out); err == nil {
		t.Fatal("unknown argument accepted")
	}
}

func TestSIGTERMLetsARunningModelTurnFinishAndAnswer(t *testing.T) {
	w := newWorld(t)
	hold := make(chan struct{})
	w.llm.Add(llmtest.Reply{Text: "Finished during shutdown.", Hold: hold})
	p := startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "take your time")
	w.llm.Wait(1)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The process waits for the turn instead of exiting.
	select {
	case <-p.done:
		t.Fatalf("exited while a model turn ran:\n%s", p.stderr.String())
	case <-time.After(300 * time.Millisecond):
	}
	close(hold)
	w.tg.WaitCall(t, wait, sentText("Finished during shutdown."))
	if err := p.wait(wait); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestAnswerKeptFromTheChatByAKillIsSentAfterRestart(t *testing.T) {
	w := newWorld(t)
	w.llm.Add(llmtest.Text("The answer that must not be lost."))
	first := startBot(t, w.env())
	// The answer's first send fails; the retry comes a second later, and
	// the process is killed before it: the answer is saved, not delivered.
	w.tg.Fail("sendMessage", 1, telegramtest.ServerError())
	w.tg.UserMessage(alice.ID, alice, "question")
	w.tg.WaitCall(t, wait, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && !c.OK() && strings.Contains(c.Param("text"), "must not be lost")
	})
	first.kill()
	if n := len(w.tg.Calls(sentText("must not be lost"))); n != 0 {
		t.Fatalf("the answer got through before the kill (%d); the test proves nothing", n)
	}

	startBot(t, w.env())
	w.tg.WaitCall(t, wait, sentText("The answer that must not be lost."))
	if n := len(w.llm.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times; the answer was saved and only needed sending", n)
	}
}
