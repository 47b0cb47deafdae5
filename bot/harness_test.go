package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
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

// shownNow is the time decisions are stamped with, as outcome lines show it.
func shownNow() time.Time { return time.Date(2026, 11, 22, 3, 4, 0, 0, time.UTC) }

// memStore is an in-memory bot.Store. Like the database, which holds the
// prompts too, it keeps the outbox with the prompts.
type memStore struct {
	prompts   *prompttest.Store
	calls     *callLog
	mu        sync.Mutex
	chats     map[string]int64
	approvals map[string][]prompt.ApprovalCopy
	byMessage map[[2]int64]string
	edits     map[[2]int64]string // ✏️ Edit's messages → approval
	inbox     map[int64]*inboxRow
	// recordHook, if set, runs before each RecordUpdates: an error fails
	// the recording. afterRecord, if set, runs after one succeeded, before
	// it returns. Set them before the bot starts.
	recordHook  func(ctx context.Context, ups []json.RawMessage) error
	afterRecord func(fresh []int64)
	// claims holds the outbox's claims by seq, as the database's columns do.
	claims map[int64]claim
}

type claim struct {
	holder string
	until  time.Time
}

// inboxRow is an update in memStore's inbox.
type inboxRow struct {
	body      json.RawMessage
	handled   bool
	handledAt time.Time
	handles   int // times marked handled: a handler ran to its end
}

func newMemStore(prompts *prompttest.Store, calls *callLog) *memStore {
	return &memStore{prompts: prompts, calls: calls, chats: map[string]int64{}, approvals: map[string][]prompt.ApprovalCopy{},
		byMessage: map[[2]int64]string{}, edits: map[[2]int64]string{}, inbox: map[int64]*inboxRow{},
		claims: map[int64]claim{}}
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
	m.approvals[id] = append(m.approvals[id], prompt.ApprovalCopy{ChatID: chat, MessageID: msg})
	return nil
}

func (m *memStore) ApprovalMessages(_ context.Context, id string) ([]prompt.ApprovalCopy, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copies := m.approvals[id]
	if len(copies) == 0 {
		return nil, fmt.Errorf("approval messages %s: %w", id, prompt.ErrNotFound)
	}
	return slices.Clone(copies), nil
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

func (m *memStore) AddEditMessage(_ context.Context, id string, chat int64, msg int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.edits[[2]int64{chat, int64(msg)}] = id
	return nil
}

func (m *memStore) EditByMessage(_ context.Context, chat int64, msg int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.edits[[2]int64{chat, int64(msg)}]
	if !ok {
		return "", fmt.Errorf("edit of message %d: %w", msg, prompt.ErrNotFound)
	}
	return id, nil
}

// The outbox lives with the prompts, as in the database.

func (m *memStore) DueNotices(ctx context.Context, now time.Time, limit int) ([]prompt.OutboxEntry, error) {
	return m.prompts.DueNotices(ctx, now, limit)
}

func (m *memStore) NextNoticeAt(ctx context.Context) (time.Time, bool, error) {
	return m.prompts.NextNoticeAt(ctx)
}

// RecordUpdates records what is not recorded yet, all or none, as the
// database does.
func (m *memStore) RecordUpdates(ctx context.Context, ups []json.RawMessage) ([]int64, error) {
	if m.recordHook != nil {
		if err := m.recordHook(ctx, ups); err != nil {
			return nil, err
		}
	}
	ids := make([]int64, len(ups))
	for i, u := range ups {
		var head struct {
			ID int64 `json:"update_id"`
		}
		if err := json.Unmarshal(u, &head); err != nil || head.ID <= 0 {
			return nil, fmt.Errorf("record updates: update %d has no update_id (%v)", i, err)
		}
		ids[i] = head.ID
	}
	m.mu.Lock()
	var fresh []int64
	for i, id := range ids {
		if _, ok := m.inbox[id]; !ok {
			m.inbox[id] = &inboxRow{body: slices.Clone(ups[i])}
			fresh = append(fresh, id)
		}
	}
	m.mu.Unlock()
	m.calls.add("record updates")
	if m.afterRecord != nil {
		m.afterRecord(fresh)
	}
	return fresh, nil
}

func (m *memStore) MarkHandled(_ context.Context, id int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.inbox[id]
	if !ok {
		return fmt.Errorf("mark update %d handled: %w", id, prompt.ErrNotFound)
	}
	r.handles++
	if !r.handled {
		r.handled, r.handledAt = true, time.Now()
	}
	return nil
}

func (m *memStore) UnhandledUpdates(_ context.Context, after int64, limit int) ([]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []int64
	for id, r := range m.inbox {
		if !r.handled && id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []json.RawMessage
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, m.inbox[id].body)
	}
	return out, nil
}

func (m *memStore) PruneUpdates(_ context.Context, keep time.Duration) (int64, error) {
	m.mu.Lock()
	var n int64
	for id, r := range m.inbox {
		if r.handled && time.Since(r.handledAt) > keep {
			delete(m.inbox, id)
			n++
		}
	}
	m.mu.Unlock()
	m.calls.add("prune updates")
	return n, nil
}

// putUpdate records an update as a crash left it: handled or not, and
// handled when.
func (m *memStore) putUpdate(id int64, body json.RawMessage, handledAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inbox[id] = &inboxRow{body: body, handled: !handledAt.IsZero(), handledAt: handledAt}
}

// updateState returns whether update id is recorded, whether handled, and
// how many times a handler marked it so.
func (m *memStore) updateState(id int64) (recorded, handled bool, handles int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.inbox[id]
	if !ok {
		return false, false, 0
	}
	return true, r.handled, r.handles
}

func (m *memStore) MarkNotice(ctx context.Context, seq int64, note string) error {
	m.calls.add("mark notice")
	return m.prompts.MarkNotice(ctx, seq, note)
}

func (m *memStore) HoldNotice(ctx context.Context, seq int64, until time.Time, note string) error {
	m.calls.add("hold notice")
	m.mu.Lock()
	delete(m.claims, seq)
	m.mu.Unlock()
	return m.prompts.HoldNotice(ctx, seq, until, note)
}

// ClaimNotice is the database's compare-and-set on the claim columns.
func (m *memStore) ClaimNotice(_ context.Context, seq int64, holder string, now time.Time, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq < 1 || int(seq) > len(m.prompts.Outbox()) {
		return false, fmt.Errorf("claim outbox entry %d: %w", seq, prompt.ErrNotFound)
	}
	if _, done := m.prompts.OutboxNote(seq); done {
		return false, nil
	}
	if c, ok := m.claims[seq]; ok && c.holder != holder && c.until.After(now) {
		return false, nil
	}
	m.claims[seq] = claim{holder, now.Add(ttl)}
	return true, nil
}

// answeredNote reports whether the answer of prompt id left the outbox,
// and how.
func (m *memStore) answeredNote(id string) (string, bool) {
	for _, e := range m.prompts.Outbox() {
		if e.PromptID == id && e.Kind == prompt.NoticeAnswer {
			return m.prompts.OutboxNote(e.Seq)
		}
	}
	return "", false
}

// approvalCopies returns how many messages were recorded for approval id.
func (m *memStore) approvalCopies(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.approvals[id])
}

var _ bot.Store = (*memStore)(nil)
var _ bot.Service = (*prompt.Service)(nil)

// callLog records, in order, the store calls tests look for, and lets a
// test wait for one without polling.
type callLog struct {
	mu      sync.Mutex
	calls   []string
	changed chan struct{}
}

func newCallLog() *callLog { return &callLog{changed: make(chan struct{})} }

func (l *callLog) add(call string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// wait waits up to timeout for call, and reports whether it came.
func (l *callLog) wait(timeout time.Duration, call string) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		found, ch := slices.Contains(l.calls, call), l.changed
		l.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// tracedStore is the prompt store the harness's service uses: it logs the
// calls that tell where Recover and Create are.
type tracedStore struct {
	*prompttest.Store
	calls *callLog
}

func (s *tracedStore) RunningPrompts(ctx context.Context, cur prompt.Cursor, limit int) ([]string, prompt.Cursor, error) {
	s.calls.add("running prompts")
	return s.Store.RunningPrompts(ctx, cur, limit)
}

func (s *tracedStore) CreatePrompt(ctx context.Context, p *prompt.Prompt) error {
	if err := s.Store.CreatePrompt(ctx, p); err != nil {
		return err
	}
	s.calls.add("create " + p.ConversationID)
	return nil
}

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
	pstore *prompttest.Store
	calls  *callLog
	svc    *prompt.Service
	store  *memStore
	bot    *bot.Bot
	ran    atomic.Int32 // executions of the gated tool
	ranArg chan string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// config is what a harness is built from; options change it first.
type config struct {
	bot.Config
	svc prompt.Config
}

type option func(*config)

// newHarness wires the real prompt.Service, with a gated tool shell.run,
// to a Bot talking to a fake Bot API; it does not start the bot.
func newHarness(t *testing.T, steps []prompttest.Step, opts ...option) *harness {
	t.Helper()
	calls, pstore := newCallLog(), prompttest.NewStore()
	return build(t, telegramtest.NewServer(t, token), pstore, newMemStore(pstore, calls), calls, steps, opts...)
}

// restart stops h's bot and closes its service, as a deploy does, and
// returns the next process: a new service and bot on the same stores and
// the same Telegram, not started.
func (h *harness) restart(steps []prompttest.Step, opts ...option) *harness {
	h.t.Helper()
	h.stop()
	h.closeService()
	return build(h.t, h.srv, h.pstore, h.store, h.calls, steps, opts...)
}

func build(t *testing.T, srv *telegramtest.Server, pstore *prompttest.Store, store *memStore, calls *callLog,
	steps []prompttest.Step, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, srv: srv, model: prompttest.NewModel(steps...), pstore: pstore, calls: calls, store: store,
		ranArg: make(chan string, 10), logs: &syncBuffer{}}
	tool, err := prompt.NewTool("shell.run", "Runs a shell command.", prompt.AlwaysFor[shellIn]("runs a command on the host"),
		func(ctx context.Context, in shellIn) (string, error) {
			h.ran.Add(1)
			h.ranArg <- in.Cmd
			return "ran: " + in.Cmd, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{
		Config: bot.Config{
			Token: token, APIURL: srv.URL(), AllowedUsers: []int64{alice.ID, bob.ID},
			Store:       store,
			Logger:      slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			PollTimeout: 5 * time.Second,
			// Fast pacing, default bursts: a chat's backlog is still spaced
			// (5ms), just not by a second.
			Limits: bot.Limits{ChatRate: 200, GroupRate: 200, GlobalRate: 1000,
				Backoff: 10 * time.Millisecond, Typing: 50 * time.Millisecond},
		},
		// The same clock: decisions are stamped by the service and shown
		// by the bot.
		svc: prompt.Config{Model: h.model, Store: &tracedStore{Store: pstore, calls: calls}, Tools: []*prompt.Tool{tool}, Now: shownNow},
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.svc, err = prompt.NewService(cfg.svc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.closeService)
	cfg.Service = h.svc
	h.bot, err = bot.New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) closeService() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.svc.Close(ctx); err != nil {
		h.t.Errorf("close service: %v", err)
	}
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
	// ✅ Approve (· 🔁 Always… when the tool offers it), then ✏️ Edit ·
	// ❌ Reject · ⛔ Stop.
	if len(k.InlineKeyboard) != 2 || len(k.InlineKeyboard[0]) < 1 || len(k.InlineKeyboard[0]) > 2 || len(k.InlineKeyboard[1]) != 3 {
		h.t.Fatalf("keyboard = %+v, want Approve (and Always…) over Edit, Reject, Stop", k)
	}
	data := map[string]string{}
	for _, row := range k.InlineKeyboard {
		for _, b := range row {
			if len(b) != 2 || b["text"] == nil || b["callback_data"] == nil {
				h.t.Fatalf("button %v: want exactly text and callback_data", b)
			}
			d := b["callback_data"].(string)
			if len(d) > 64 {
				h.t.Fatalf("callback_data %q longer than 64 bytes", d)
			}
			data[d[:1]] = d
		}
	}
	for _, want := range []string{"a", "e", "r", "s"} {
		if data[want] == "" {
			h.t.Fatalf("keyboard %+v has no %q button", k, want)
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
	return m, data["a"], data["r"]
}

func (h *harness) waitAnswer(id, text string) {
	h.t.Helper()
	h.srv.WaitCall(h.t, wait, telegramtest.Method("answerCallbackQuery", telegramtest.Succeeded, func(c telegramtest.Call) bool {
		return c.Param("callback_query_id") == id && c.Param("text") == text
	}))
}

// mustPending returns the request alice's chat waits for.
func mustPending(t *testing.T, h *harness) prompt.ApprovalRequest {
	t.Helper()
	st, err := h.svc.Active(context.Background(), "tg:111")
	if err != nil {
		t.Fatalf("no active prompt: %v", err)
	}
	if st.Pending == nil {
		t.Fatalf("nothing pending; prompt %s is %s", st.PromptID, st.State)
	}
	return *st.Pending
}
