package bot_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

const token = "123456:test-token"

var (
	alice   = models.User{ID: 111, FirstName: "Alice"}
	bob     = models.User{ID: 222, FirstName: "Bob"}
	mallory = models.User{ID: 999, FirstName: "Mallory"}
)

// memStore is an in-memory bot.Store.
type memStore struct {
	mu        sync.Mutex
	chats     map[string]int64
	approvals map[string][]int // approval → message IDs
	chatOf    map[string]int64 // approval → chat
	byMessage map[[2]int64]string
	ended     []*prompt.Prompt  // prompts that ended, as the store would list them
	answered  map[string]string // prompt ID → note
}

func newMemStore() *memStore {
	return &memStore{chats: map[string]int64{}, approvals: map[string][]int{}, chatOf: map[string]int64{}, byMessage: map[[2]int64]string{},
		answered: map[string]string{}}
}

func (m *memStore) SaveChat(_ context.Context, conv string, chat int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chats[conv] = chat
	return nil
}

func (m *memStore) ChatOf(_ context.Context, conv string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.chats[conv]
	if !ok {
		return 0, fmt.Errorf("chat of %s: %w", conv, prompt.ErrNotFound)
	}
	return c, nil
}

func (m *memStore) AddApprovalMessage(_ context.Context, id string, chat int64, msg int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]int64{chat, int64(msg)}
	if _, ok := m.byMessage[key]; ok {
		return nil
	}
	m.byMessage[key] = id
	m.chatOf[id] = chat
	m.approvals[id] = append(m.approvals[id], msg)
	return nil
}

func (m *memStore) ApprovalMessages(_ context.Context, id string) (int64, []int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.approvals[id]
	if len(ids) == 0 {
		return 0, nil, fmt.Errorf("approval messages %s: %w", id, prompt.ErrNotFound)
	}
	return m.chatOf[id], append([]int(nil), ids...), nil
}

func (m *memStore) ApprovalByMessage(_ context.Context, chat int64, msg int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byMessage[[2]int64{chat, int64(msg)}]
	if !ok {
		return "", fmt.Errorf("approval of message %d: %w", msg, prompt.ErrNotFound)
	}
	return id, nil
}

// UnansweredPrompts returns the ended prompts a test put in m.ended that
// were not marked answered.
func (m *memStore) UnansweredPrompts(_ context.Context, limit int) ([]*prompt.Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*prompt.Prompt
	for _, p := range m.ended {
		if _, done := m.answered[p.ID]; !done && len(out) < limit {
			out = append(out, p.Clone())
		}
	}
	return out, nil
}

func (m *memStore) MarkAnswered(_ context.Context, id, note string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, done := m.answered[id]; !done {
		m.answered[id] = note
	}
	return nil
}

// answeredNote reports whether prompt id was marked answered, and how.
func (m *memStore) answeredNote(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	note, ok := m.answered[id]
	return note, ok
}

var _ bot.Store = (*memStore)(nil)
var _ bot.Service = (*prompt.Service)(nil)

type shellIn struct {
	Cmd string `json:"cmd"`
}

// syncBuffer is a log sink tests can read while the bot writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type harness struct {
	t      *testing.T
	srv    *telegramtest.Server
	model  *prompttest.Model
	pstore *prompt.MemStore
	svc    *prompt.Service
	store  *memStore
	bot    *bot.Bot
	ran    atomic.Int32 // executions of the gated tool
	ranArg chan string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

type option func(*bot.Config)

// newHarness wires the real prompt.Service, with a gated tool shell.run,
// to a Bot talking to a fake Bot API; it does not start the bot.
func newHarness(t *testing.T, steps []prompttest.Step, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, srv: telegramtest.NewServer(t, token), model: prompttest.NewModel(steps...),
		pstore: prompt.NewMemStore(), store: newMemStore(), ranArg: make(chan string, 10), logs: &syncBuffer{}}
	tool, err := prompt.NewTool("shell.run", "Runs a shell command.", prompt.AlwaysFor[shellIn]("runs a command on the host"),
		func(ctx context.Context, in shellIn) (string, error) {
			h.ran.Add(1)
			h.ranArg <- in.Cmd
			return "ran: " + in.Cmd, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	h.svc, err = prompt.NewService(prompt.Config{Model: h.model, Store: h.pstore, Tools: []*prompt.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.svc.Close(ctx)
	})
	cfg := bot.Config{
		Token: token, APIURL: h.srv.URL(), AllowedUsers: []int64{alice.ID, bob.ID},
		Service: h.svc, Store: h.store,
		Logger:      slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:         func() time.Time { return time.Date(2026, 11, 22, 3, 4, 0, 0, time.UTC) },
		PollTimeout: 5 * time.Second,
		Limits:      bot.Limits{PerChat: 5 * time.Millisecond, Global: time.Millisecond, Backoff: 10 * time.Millisecond, Typing: 50 * time.Millisecond},
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.bot, err = bot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// start runs the bot until the test ends, then checks that Run returned.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.bot.Run(ctx) }()
	h.t.Cleanup(h.stop)
	h.srv.WaitCall(h.t, 5*time.Second, telegramtest.Method("setMyCommands", telegramtest.Succeeded))
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Error("Run did not return after its context ended")
	}
}

// wait bounds how long a test waits for the bot; generous, since CI runs
// every package at once under -race on two cores.
const wait = 15 * time.Second

func hasKeyboard(c telegramtest.Call) bool {
	return strings.Contains(c.Param("reply_markup"), "inline_keyboard")
}

func textHas(s string) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool {
		m, err := c.Message()
		return err == nil && strings.Contains(m.Text, s)
	}
}

func toChat(chat int64) func(telegramtest.Call) bool {
	return func(c telegramtest.Call) bool { return c.Int("chat_id") == chat }
}

type kb struct {
	InlineKeyboard [][]map[string]any `json:"inline_keyboard"`
}

// approvalMessage waits for the n-th request with buttons and returns it
// with its approve and reject data.
func (h *harness) approvalMessage(n int) (models.Message, string, string) {
	h.t.Helper()
	calls := h.srv.WaitCalls(h.t, wait, n, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))
	c := calls[n-1]
	m, err := c.Message()
	if err != nil {
		h.t.Fatal(err)
	}
	var k kb
	if err := c.Decode("reply_markup", &k); err != nil {
		h.t.Fatal(err)
	}
	if len(k.InlineKeyboard) != 1 || len(k.InlineKeyboard[0]) != 2 {
		h.t.Fatalf("keyboard = %+v, want one row of two buttons", k)
	}
	for _, b := range k.InlineKeyboard[0] {
		if len(b) != 2 || b["text"] == nil || b["callback_data"] == nil {
			h.t.Fatalf("button %v: want exactly text and callback_data", b)
		}
		if d := b["callback_data"].(string); len(d) > 64 {
			h.t.Fatalf("callback_data %q longer than 64 bytes", d)
		}
	}
	// The bot records the message once Telegram answers; wait for that so
	// that what the test does next sees it.
	deadline := time.Now().Add(wait)
	for {
		if _, err := h.store.ApprovalByMessage(context.Background(), m.Chat.ID, m.ID); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("approval message %d never recorded", m.ID)
		}
		time.Sleep(time.Millisecond)
	}
	return m, k.InlineKeyboard[0][0]["callback_data"].(string), k.InlineKeyboard[0][1]["callback_data"].(string)
}

func (h *harness) waitAnswer(id, text string) {
	h.t.Helper()
	h.srv.WaitCall(h.t, wait, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == id && c.Param("text") == text
	}))
}

var _ = http.StatusOK
