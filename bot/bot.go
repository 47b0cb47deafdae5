package bot

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/prompt"
)

// Service is what the bot needs of the agent core; *prompt.Service
// satisfies it.
type Service interface {
	// Create starts a prompt. Returns prompt.ErrBusy if the conversation has
	// one running or waiting, prompt.ErrClosed during shutdown.
	Create(ctx context.Context, conversationID, input string) (*prompt.Completion, error)
	// ActiveIn returns the conversation's running or waiting prompt, or nil.
	ActiveIn(conversationID string) *prompt.Completion
	// Approve and Reject decide an approval. They return prompt.ErrNotPending
	// if it was already decided, prompt.ErrNotFound if there is no such one.
	Approve(ctx context.Context, approvalID, by string) error
	Reject(ctx context.Context, approvalID, reason, by string) error
	// LookupApproval returns where an approval stands, or prompt.ErrNotFound.
	LookupApproval(ctx context.Context, approvalID string) (prompt.ApprovalRef, error)
	OnApprovalRequested(f prompt.ApprovalListener)
	OnCompleted(f prompt.Listener)
	// Gated names the tools that can ask for approval.
	Gated() []string
}

// Store keeps the bot's own state: which chat a conversation is and which
// messages show an approval. Implementations must be safe for concurrent use.
type Store interface {
	// SaveChat records that conversation conversationID is Telegram chat chatID (idempotent).
	SaveChat(ctx context.Context, conversationID string, chatID int64) error
	// ChatOf returns the chat of a conversation, or an error wrapping prompt.ErrNotFound.
	ChatOf(ctx context.Context, conversationID string) (int64, error)
	// AddApprovalMessage records that message messageID in chat chatID shows approval approvalID (idempotent).
	AddApprovalMessage(ctx context.Context, approvalID string, chatID int64, messageID int) error
	// ApprovalMessages returns the chat and IDs of every message that shows approvalID, oldest first; an error wrapping prompt.ErrNotFound if there are none.
	ApprovalMessages(ctx context.Context, approvalID string) (chatID int64, messageIDs []int, err error)
	// ApprovalByMessage returns the approval shown by message messageID in chat chatID, or an error wrapping prompt.ErrNotFound.
	ApprovalByMessage(ctx context.Context, chatID int64, messageID int) (string, error)
	// UnansweredPrompts returns up to limit prompts that ended (completed or failed) without MarkAnswered, oldest first.
	UnansweredPrompts(ctx context.Context, limit int) ([]*prompt.Prompt, error)
	// MarkAnswered records that a prompt's answer was delivered, or given up for good (note says why); idempotent.
	MarkAnswered(ctx context.Context, promptID, note string) error
}

// maxResentAnswers bounds the answers a start sends again.
const maxResentAnswers = 100

// Webhook selects webhook mode; an empty URL means long polling.
type Webhook struct {
	URL    string
	Secret string // required with URL: Telegram sends it in every delivery
}

// Limits paces and retries calls to Telegram. Zero fields take the
// defaults, which follow Telegram's published limits.
type Limits struct {
	PerChat     time.Duration // gap between messages to one chat (default 1s)
	Global      time.Duration // gap between any two calls (default 34ms, under 30/s)
	Backoff     time.Duration // first wait after a 5xx or network error, doubling (default 1s)
	MaxBackoff  time.Duration // default 30s
	MaxAttempts int           // per call, including the first (default 5)
	Typing      time.Duration // how often "typing…" is renewed (default 4s)
	// Drain bounds how long Run, once its context ends, still lets sends
	// already under way (an answer that finished during shutdown) complete
	// (default 10s).
	Drain time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.PerChat, time.Second)
	def(&l.Global, 34*time.Millisecond)
	def(&l.Backoff, time.Second)
	def(&l.MaxBackoff, 30*time.Second)
	def(&l.Typing, 4*time.Second)
	def(&l.Drain, 10*time.Second)
	if l.MaxAttempts <= 0 {
		l.MaxAttempts = 5
	}
	return l
}

// Config configures a Bot.
type Config struct {
	Token        string
	APIURL       string  // default https://api.telegram.org
	AllowedUsers []int64 // who may chat and decide; empty: nobody
	Service      Service
	Store        Store
	Logger       *slog.Logger     // default: discard
	Now          func() time.Time // shown in decision lines; default time.Now
	// HTTPClient is used for every call, long polls included, so its
	// Timeout, if set, must exceed PollTimeout.
	HTTPClient  *http.Client
	PollTimeout time.Duration // long-poll wait (default 30s)
	Webhook     Webhook
	Limits      Limits
}

const defaultAPIURL = "https://api.telegram.org"

// Bot is Tollgate's Telegram front end. Create it with New, then Run it.
type Bot struct {
	cfg     Config
	log     *slog.Logger
	tg      *tgbot.Bot
	allowed map[int64]bool
	lim     *limiter

	mu    sync.Mutex
	state int // notStarted, running, stopped
	// pollCtx is Run's context: updates stop when it ends. runCtx outlives
	// it by the drain, so sends under way can finish.
	pollCtx  context.Context
	runCtx   context.Context
	wg       sync.WaitGroup
	inflight int           // goroutines started by goLocked and not ended
	drained  chan struct{} // closed when inflight drops to 0, if set
	early    []func(context.Context)
	// An answer is sent once, by whichever comes first: the completed
	// event, or the start-up pass over answers a crash kept from their
	// chat. doneSeen collects completed events until that pass is over;
	// resent is what the pass sent.
	doneSeen map[string]bool
	resent   map[string]bool
	typing   map[int64]bool // chats with a typing loop
	kicked   map[int64]bool // a loop should look again before it ends
	botName  string
}

const (
	notStarted = iota
	running
	stopped
)

// New checks cfg and subscribes to the service's events at once, so that
// requests emitted before Run (by Service.Recover) are queued and sent when
// Run starts. It makes no network call.
func New(cfg Config) (*Bot, error) {
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("new bot: empty token")
	}
	if cfg.Service == nil || cfg.Store == nil {
		return nil, errors.New("new bot: Service and Store are required")
	}
	if cfg.Webhook.URL != "" && cfg.Webhook.Secret == "" {
		return nil, errors.New("new bot: a webhook needs a secret")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = defaultAPIURL
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.PollTimeout + 15*time.Second}
	}
	cfg.Limits = cfg.Limits.withDefaults()
	b := &Bot{
		cfg:      cfg,
		log:      cfg.Logger,
		allowed:  map[int64]bool{},
		lim:      newLimiter(cfg.Limits),
		typing:   map[int64]bool{},
		kicked:   map[int64]bool{},
		doneSeen: map[string]bool{},
		resent:   map[string]bool{},
	}
	for _, id := range cfg.AllowedUsers {
		b.allowed[id] = true
	}
	tg, err := tgbot.New(cfg.Token,
		tgbot.WithSkipGetMe(),
		tgbot.WithServerURL(cfg.APIURL),
		tgbot.WithHTTPClient(cfg.PollTimeout, cfg.HTTPClient),
		tgbot.WithNotAsyncHandlers(),
		tgbot.WithDefaultHandler(b.dispatch),
		tgbot.WithAllowedUpdates(tgbot.AllowedUpdates{"message", "callback_query"}),
		tgbot.WithErrorsHandler(func(err error) { b.log.Warn("telegram", "err", err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	b.tg = tg
	cfg.Service.OnApprovalRequested(b.onApprovalRequested)
	cfg.Service.OnCompleted(b.onCompleted)
	return b, nil
}

// Run serves until ctx ends: it checks the token (getMe), registers the
// command menu, sends what was queued since New, then long-polls (after
// deleting a stale webhook) or, in webhook mode, registers the webhook and
// serves updates through WebhookHandler. It returns after every goroutine it
// started has stopped. Run may be called once.
func (b *Bot) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.state != notStarted {
		b.mu.Unlock()
		return errors.New("run bot: already run")
	}
	b.mu.Unlock()

	var me *models.User
	err := b.do(ctx, 0, paceGlobal, "get me", func(ctx context.Context) error {
		var err error
		me, err = b.tg.GetMe(ctx)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: not a failure
		}
		if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound) {
			return fmt.Errorf("run bot: Telegram refused the bot token (check TELEGRAM_BOT_TOKEN): %w", err)
		}
		return fmt.Errorf("run bot: reach Telegram at %s: %w", b.cfg.APIURL, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	b.mu.Lock()
	b.state, b.pollCtx, b.runCtx, b.botName = running, ctx, runCtx, me.Username
	early := b.early
	b.early = nil
	for _, f := range early {
		b.goLocked(f)
	}
	b.goLocked(b.resendAnswers)
	b.mu.Unlock()

	err = b.serve(ctx, me.Username, len(early))
	b.drain()
	cancel()
	b.mu.Lock()
	b.state = stopped
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// drain waits, up to Limits.Drain, for the goroutines under way: an answer
// or request emitted while the service shut down is still sent.
func (b *Bot) drain() {
	b.mu.Lock()
	var drained chan struct{}
	if b.inflight > 0 {
		drained = make(chan struct{})
		b.drained = drained
	}
	b.mu.Unlock()
	if drained == nil {
		return
	}
	t := time.NewTimer(b.cfg.Limits.Drain)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		b.log.Warn("stopping with sends still under way", "waited", b.cfg.Limits.Drain)
	}
}

// serve registers the bot with Telegram and takes updates until ctx ends.
// Updates are accepted already while it registers: Telegram may deliver to
// a webhook as soon as it is set.
func (b *Bot) serve(ctx context.Context, username string, queued int) error {
	var err error
	if b.cfg.Webhook.URL == "" {
		err = b.do(ctx, 0, paceGlobal, "delete webhook", func(ctx context.Context) error {
			_, err := b.tg.DeleteWebhook(ctx, &tgbot.DeleteWebhookParams{})
			return err
		})
	} else {
		err = b.do(ctx, 0, paceGlobal, "set webhook", func(ctx context.Context) error {
			_, err := b.tg.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: b.cfg.Webhook.URL, SecretToken: b.cfg.Webhook.Secret,
				AllowedUpdates: []string{"message", "callback_query"}})
			return err
		})
	}
	if err != nil && b.cfg.Webhook.URL == "" && errors.Is(err, tgbot.ErrorNotFound) {
		// A Bot API server without deleteWebhook has no webhook to delete;
		// polling works without it.
		b.log.Warn("deleteWebhook not supported by the Bot API server; polling anyway", "err", err)
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while registering: not a failure
		}
		return fmt.Errorf("run bot: %w", err)
	}
	if err := b.do(ctx, 0, paceGlobal, "set commands", func(ctx context.Context) error {
		_, err := b.tg.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: commands})
		return err
	}); err != nil {
		b.log.Warn("command menu not registered", "err", err)
	}
	b.log.Info("telegram bot running", "username", username, "webhook", b.cfg.Webhook.URL != "", "queued", queued)
	if b.cfg.Webhook.URL == "" {
		b.tg.Start(ctx) // returns when ctx ends and its workers have stopped
		return nil
	}
	<-ctx.Done()
	return nil
}

var commands = []models.BotCommand{
	{Command: "help", Description: "What this bot does and which tools need approval"},
	{Command: "pending", Description: "Show the request waiting for your approval"},
	{Command: "cancel", Description: "Stop the current request"},
	{Command: "start", Description: "Introduction"},
}

// goLocked runs f in a goroutine that Run waits for; b.mu is held.
func (b *Bot) goLocked(f func(context.Context)) {
	b.wg.Add(1)
	b.inflight++
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.inflight--; b.inflight == 0 && b.drained != nil {
				close(b.drained)
				b.drained = nil
			}
		}()
		f(b.runCtx)
	}()
}

// resendAnswers sends the answers that ended in the store but never
// reached their chat: the process died between saving and sending.
func (b *Bot) resendAnswers(ctx context.Context) {
	defer func() {
		b.mu.Lock()
		b.doneSeen = nil
		b.mu.Unlock()
	}()
	ps, err := b.cfg.Store.UnansweredPrompts(ctx, maxResentAnswers)
	if err != nil {
		b.log.Error("find answers not delivered", "err", err)
		return
	}
	for _, p := range ps {
		b.mu.Lock()
		skip := b.doneSeen[p.ID]
		if !skip {
			b.resent[p.ID] = true
		}
		b.mu.Unlock()
		if skip {
			continue
		}
		b.log.Info("sending an answer a restart kept from its chat", "prompt", p.ID)
		b.sendResult(ctx, p)
	}
}

// goUpdate runs an update's handler if Run still takes updates.
func (b *Bot) goUpdate(f func(context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != running || b.pollCtx.Err() != nil {
		return false
	}
	b.goLocked(f)
	return true
}

// goNow runs f if Run is serving, and reports whether it did.
func (b *Bot) goNow(f func(context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != running {
		return false
	}
	b.goLocked(f)
	return true
}

// later runs f once Run serves; it reports false once Run has ended.
func (b *Bot) later(f func(context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case notStarted:
		b.early = append(b.early, f)
		return true
	case running:
		b.goLocked(f)
		return true
	}
	return false
}

// dispatch takes updates from the library's polling worker and handles
// each in its own goroutine, owned by Run.
func (b *Bot) dispatch(_ context.Context, _ *tgbot.Bot, upd *models.Update) {
	if !b.goUpdate(func(ctx context.Context) { b.handleUpdate(ctx, upd) }) {
		b.log.Warn("update dropped: bot stopping", "update", upd.ID)
	}
}

const maxWebhookBody = 1 << 20

// WebhookHandler serves Telegram's webhook deliveries. It checks the secret
// header in constant time before reading the body and answers 401 to a
// wrong or missing one; it answers 503 while Run is not serving, so that
// Telegram delivers the update again later.
func (b *Bot) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		want := b.cfg.Webhook.Secret
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if len(body) > maxWebhookBody {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		upd := &models.Update{}
		if err := json.Unmarshal(body, upd); err != nil {
			b.log.Warn("webhook: bad update", "err", err)
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		if !b.goUpdate(func(ctx context.Context) { b.handleUpdate(ctx, upd) }) {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

func conversationOf(chatID int64) string { return "tg:" + strconv.FormatInt(chatID, 10) }

// chatOf finds the chat of a conversation: from the store, or from the
// conversation ID itself when the link was never saved.
func (b *Bot) chatOf(ctx context.Context, conv string) (int64, error) {
	chat, err := b.cfg.Store.ChatOf(ctx, conv)
	if err == nil {
		return chat, nil
	}
	if rest, ok := strings.CutPrefix(conv, "tg:"); ok && errors.Is(err, prompt.ErrNotFound) {
		if id, perr := strconv.ParseInt(rest, 10, 64); perr == nil {
			if serr := b.cfg.Store.SaveChat(ctx, conv, id); serr != nil {
				b.log.Warn("save chat", "conversation", conv, "err", serr)
			}
			return id, nil
		}
	}
	return 0, fmt.Errorf("chat of %s: %w", conv, err)
}

func (b *Bot) onApprovalRequested(_ context.Context, _ *prompt.Completion, req prompt.ApprovalRequest) {
	if !b.later(func(ctx context.Context) { _ = b.sendApproval(ctx, req) }) {
		b.log.Warn("approval request not sent: bot stopped; it stays pending and is sent again on the next start",
			"approval", req.ApprovalID)
	}
}

func (b *Bot) onCompleted(_ context.Context, c *prompt.Completion) {
	p := c.Prompt()
	b.mu.Lock()
	sent := b.resent[p.ID]
	if b.doneSeen != nil {
		b.doneSeen[p.ID] = true
	}
	b.mu.Unlock()
	if sent {
		return
	}
	if !b.later(func(ctx context.Context) { b.sendResult(ctx, p) }) {
		b.log.Warn("answer not sent: bot stopped", "prompt", p.ID)
	}
}
