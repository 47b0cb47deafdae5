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
	"golang.org/x/time/rate"

	"tollgate/prompt"
)

// Service is what the bot needs of the agent core; *prompt.Service
// satisfies it. Everything it returns is a value: the bot keeps no handle
// on a prompt, and asks the service (which asks its store) each time.
type Service interface {
	// CreateOnce starts a prompt for the message key names. Returns
	// prompt.ErrExists if that message started one already (it was handed
	// over again after a crash), prompt.ErrBusy if the conversation has one
	// running or waiting, prompt.ErrClosed during shutdown.
	CreateOnce(ctx context.Context, conversationID, key, input string, opts ...prompt.CreateOption) (prompt.Created, error)
	// Active returns where the conversation's running or waiting prompt
	// stands, or prompt.ErrNotFound if it has none.
	Active(ctx context.Context, conversationID string) (prompt.Status, error)
	// Approve and Reject decide an approval. They return prompt.ErrNotPending
	// if it was already decided, prompt.ErrNotFound if there is no such one.
	Approve(ctx context.Context, approvalID, by string) error
	Reject(ctx context.Context, approvalID, reason, by string) error
	// Vote approves as the person voterID; under a quorum the request is
	// approved once enough different people voted. It returns the votes
	// so far; prompt.ErrAlreadyVoted if that person voted on it already,
	// and the errors of Approve.
	Vote(ctx context.Context, approvalID, voterID, by string) (prompt.Tally, error)
	// Stop rejects an approval's call and all queued after it and ends its
	// prompt; prompt.ErrNotPending if it was already decided.
	Stop(ctx context.Context, approvalID, by string) error
	// Cancel ends a prompt at a user's request; prompt.ErrNotPending if it
	// has already ended.
	Cancel(ctx context.Context, promptID, by string) error
	// LookupApproval returns where an approval stands, or prompt.ErrNotFound.
	LookupApproval(ctx context.Context, approvalID string) (prompt.ApprovalRef, error)
	// Request returns the request of an approval as it was asked and where
	// the approval stands now; prompt.ErrNotFound if there is none.
	Request(ctx context.Context, approvalID string) (prompt.ApprovalRequest, prompt.ApprovalRef, error)
	// Answer returns how a prompt ended; prompt.ErrNotPending if it has not.
	Answer(ctx context.Context, promptID string) (prompt.Answer, error)
	// OnOutbox tells that a change recorded notices in the outbox: the
	// sender looks at once rather than at its next look.
	OnOutbox(f func())
	// OnActivity tells when a worker starts (Working) and stops advancing
	// a prompt: the bot shows "typing…" in between.
	OnActivity(f func(context.Context, prompt.Activity))
	// Recover resumes the prompts an earlier process left running and puts
	// the requests it left waiting in the outbox again. Run calls it, once.
	Recover(ctx context.Context) (prompt.Recovered, error)
	// Summaries lists the tools, what each does and whether it can ask.
	Summaries() []prompt.ToolSummary
	// ApproveAlways approves as Approve does and records a grant, so that
	// calls in the request's scope run without asking; prompt.ErrNoGrant if
	// the tool offers none.
	ApproveAlways(ctx context.Context, approvalID, by string, spec prompt.GrantSpec) (prompt.Grant, error)
	// Edit replaces a pending call's input with arguments; a
	// *prompt.EditError says why it was refused, in words for the person.
	Edit(ctx context.Context, approvalID, arguments, by string) error
	// Grants lists the grants in force in a conversation, newest first.
	Grants(ctx context.Context, conversationID string) ([]prompt.Grant, error)
	// Revoke ends a grant in force in a conversation; prompt.ErrNotFound
	// if there is none with that ID.
	Revoke(ctx context.Context, conversationID, id, by string) (prompt.Grant, error)
	// GrantedCall returns a call a grant let run, and the grant.
	GrantedCall(ctx context.Context, promptID, callID string) (prompt.GrantedCall, error)
	// Audit returns the decisions a query selects, newest first.
	Audit(ctx context.Context, q prompt.AuditQuery) ([]prompt.AuditEntry, error)
}

var _ Service = (*prompt.Service)(nil)

// Store keeps the bot's own state: which chat a conversation is and which
// messages show an approval. Implementations must be safe for concurrent use.
type Store interface {
	// SaveChat records that conversation conversationID is Telegram chat chatID (idempotent).
	SaveChat(ctx context.Context, conversationID string, chatID int64) error
	// ChatOf returns the chat of a conversation, or an error wrapping prompt.ErrNotFound.
	ChatOf(ctx context.Context, conversationID string) (int64, error)
	// AddApprovalMessage records that message messageID in chat chatID shows approval approvalID (idempotent).
	AddApprovalMessage(ctx context.Context, approvalID string, chatID int64, messageID int) error
	// ApprovalMessages returns every message that shows approvalID, in whichever chats hold one, oldest first; an error wrapping prompt.ErrNotFound if there are none.
	ApprovalMessages(ctx context.Context, approvalID string) ([]prompt.ApprovalCopy, error)
	// ApprovalByMessage returns the approval shown by message messageID in chat chatID, or an error wrapping prompt.ErrNotFound.
	ApprovalByMessage(ctx context.Context, chatID int64, messageID int) (string, error)
	// AddEditMessage records that message messageID in chat chatID asks for the edited input of approvalID (idempotent).
	AddEditMessage(ctx context.Context, approvalID string, chatID int64, messageID int) error
	// EditByMessage returns the approval whose edited input message messageID in chat chatID asks for, or an error wrapping prompt.ErrNotFound.
	EditByMessage(ctx context.Context, chatID int64, messageID int) (string, error)
	// DueNotices returns up to limit outbox entries to deliver at now: the oldest undelivered entry of each conversation unless held until later; re-sends after the rest, then oldest first.
	DueNotices(ctx context.Context, now time.Time, limit int) ([]prompt.OutboxEntry, error)
	// NextNoticeAt returns when the earliest held entry becomes due, and false if none is held.
	NextNoticeAt(ctx context.Context) (time.Time, bool, error)
	// MarkNotice records that an entry was delivered, or given up for good (note says why).
	MarkNotice(ctx context.Context, seq int64, note string) error
	// HoldNotice counts a failed delivery and holds the entry, and so its conversation, until until, and ends its claim.
	HoldNotice(ctx context.Context, seq int64, until time.Time, note string) error
	// ClaimNotice gives entry seq to holder until now+ttl unless it is delivered or another holder's claim has not lapsed, and reports whether holder holds it (a compare-and-set); an error wrapping prompt.ErrNotFound if there is no such entry. Only the claimer sends an entry, so that two senders overlapping in a failover send it once.
	ClaimNotice(ctx context.Context, seq int64, holder string, now time.Time, ttl time.Duration) (bool, error)

	// The inbox: every update Telegram hands over is recorded before
	// Telegram is told it arrived, so that a crash loses none (inbox.go).

	// RecordUpdates records updates, each the JSON Telegram sent with its update_id, all or none (one transaction), and returns the IDs of those not recorded before, in the order given.
	RecordUpdates(ctx context.Context, updates []json.RawMessage) (fresh []int64, err error)
	// MarkHandled records that update updateID was handled (idempotent); an error wrapping prompt.ErrNotFound if it was never recorded.
	MarkHandled(ctx context.Context, updateID int64) error
	// UnhandledUpdates returns up to limit recorded updates not marked handled whose update_id is above after, lowest first.
	UnhandledUpdates(ctx context.Context, after int64, limit int) ([]json.RawMessage, error)
	// PruneUpdates deletes the updates handled more than keep ago, never an unhandled one, and returns how many.
	PruneUpdates(ctx context.Context, keep time.Duration) (int64, error)
}

// Webhook selects webhook mode; an empty URL means long polling.
type Webhook struct {
	URL    string
	Secret string // required with URL: Telegram sends it in every delivery
}

// Limits paces and retries calls to Telegram. Zero fields take the
// defaults, which follow Telegram's published limits: about one message a
// second to a chat with short bursts allowed, 20 a minute to a group, 30 a
// second overall. Only messages are paced (sent or edited, documents
// included); callback answers and chat actions are not, so a press is
// answered at once. A rate of rate.Inf turns that pacing off.
type Limits struct {
	// ChatRate is the sustained pace of messages to one private chat, in
	// messages a second (default 1).
	ChatRate rate.Limit
	// ChatBurst is how many messages a quiet private chat takes at once
	// before ChatRate applies (default 3): a press's edit and the answer
	// after it need not wait a second each.
	ChatBurst int
	// GroupRate and GroupBurst are the same for a group, supergroup or
	// channel, a chat with a negative ID (default 20 a minute, burst 3).
	GroupRate  rate.Limit
	GroupBurst int
	// GlobalRate and GlobalBurst bound messages to all chats together
	// (default 30 a second, burst 30).
	GlobalRate  rate.Limit
	GlobalBurst int
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
	defRate := func(r *rate.Limit, burst *int, vr rate.Limit, vb int) {
		if *r <= 0 {
			*r = vr
		}
		if *burst <= 0 {
			*burst = vb
		}
	}
	defRate(&l.ChatRate, &l.ChatBurst, 1, 3)
	defRate(&l.GroupRate, &l.GroupBurst, rate.Every(3*time.Second), 3)
	defRate(&l.GlobalRate, &l.GlobalBurst, 30, 30)
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
	Now          func() time.Time // when held outbox entries fall due; default Clock.Now
	// Clock paces calls to Telegram and times the waits between retries
	// and "typing…" renewals (default real time); tests inject a fake one.
	Clock Clock
	// HTTPClient is used for every call, long polls included, so its
	// Timeout, if set, must exceed PollTimeout.
	HTTPClient  *http.Client
	PollTimeout time.Duration // long-poll wait (default 30s)
	Webhook     Webhook
	Limits      Limits
	// Approvers, if set, are who may decide instead of AllowedUsers:
	// others may chat, and their presses are refused. An approver need
	// not be an allowed user to press; chatting still needs that.
	Approvers []int64
	// NoSelfApproval keeps the person whose message started a prompt
	// from approving (or editing) its requests while another approver
	// exists (APPROVAL_SELF=false).
	NoSelfApproval bool
	// HelpNotes, if set, adds lines to /help about tools that are
	// missing or failing (an MCP server that could not start, and why).
	HelpNotes func() []string
	// Notify says where a group's requests are shown (notify.go): in the
	// group (NotifyChat, the default) or in each approver's private chat
	// (NotifyDM).
	Notify Notify
	// Replica names this process among those that share the database
	// (default: random); it is the holder of the leases it takes and of
	// the outbox entries it claims, so each replica needs its own.
	Replica string
	// Leases elects, among replicas that share the database, the one that
	// delivers the outbox (lease "sender") and, in polling mode, the one
	// that polls (lease "poller"); the others wait to take over (lease.go).
	// Nil: this process is alone, and always both.
	Leases prompt.Leases
	// LeaseTTL is how long a lease lasts unless renewed (default 15s); its
	// holder renews it every third of that, and another replica takes it
	// over once it has lapsed.
	LeaseTTL time.Duration
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
	state int // notStarted, starting, recovering, running, stopped
	// pollCtx ends when updates stop: at the end of Run's context, or when
	// Run gives up. runCtx outlives it by the drain, so that sends under
	// way can finish.
	pollCtx  context.Context
	runCtx   context.Context
	wg       sync.WaitGroup
	inflight int           // goroutines started by goLocked and not ended
	drained  chan struct{} // closed when inflight drops to 0, if set
	// typing stops the "typing…" loop of each prompt a worker advances.
	typing  map[string]context.CancelFunc
	botName string
	botID   int64 // the bot's own user: a group message replying to it is for the bot
	// outbox wakes the sender: something new is in the outbox, or a
	// delivery ended.
	outbox chan struct{}
	// queues holds, per chat, the updates recorded and not yet handled in
	// this process, oldest first; a chat has a queue while a goroutine
	// drains it (inbox.go).
	queues map[int64][]*models.Update
	// approvers is Config.Approvers, or the allowed users without it.
	approvers map[int64]bool
	// role is what this replica does now: which leases it holds.
	role Role
}

// The life of a Bot. Only Run moves it on, and only forward.
const (
	notStarted = iota
	starting   // Run checks the token and reads what a crash left
	recovering // the service resumes prompts: its events are handled, updates not taken
	running    // updates are taken too
	stopped
)

// New checks cfg and subscribes to the service's events. It makes no
// network call. Nothing of the service should run before Run, which calls
// its Recover: an event before then is logged and dropped.
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
	var err error
	if cfg.Notify, err = ParseNotify(string(cfg.Notify)); err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 30 * time.Second
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = defaultLeaseTTL
	}
	if cfg.Replica == "" {
		cfg.Replica = randomReplica()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.PollTimeout + 15*time.Second}
	}
	cfg.Limits = cfg.Limits.withDefaults()
	b := &Bot{
		cfg:     cfg,
		log:     cfg.Logger,
		allowed: map[int64]bool{},
		lim:     newLimiter(cfg.Limits, cfg.Clock),
		typing:  map[string]context.CancelFunc{},
		outbox:  make(chan struct{}, 1),
		queues:  map[int64][]*models.Update{},
	}
	for _, id := range cfg.AllowedUsers {
		b.allowed[id] = true
	}
	b.approvers = approverSet(cfg)
	tg, err := tgbot.New(cfg.Token,
		tgbot.WithSkipGetMe(),
		tgbot.WithServerURL(cfg.APIURL),
		tgbot.WithHTTPClient(cfg.PollTimeout, cfg.HTTPClient),
		// No handler or allowed updates: the library only sends. Its
		// polling confirms an update before it is handled; poll.go's
		// confirms it once it is recorded.
		tgbot.WithErrorsHandler(func(err error) { b.log.Warn("telegram", "err", err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("new bot: %w", err)
	}
	b.tg = tg
	cfg.Service.OnOutbox(b.wakeSender)
	cfg.Service.OnActivity(b.onActivity)
	return b, nil
}

// Run serves until ctx ends. It checks the token (getMe), calls
// Service.Recover (which resumes what was running and puts every waiting
// request in the outbox again), starts the sender that delivers the
// outbox, then registers the command menu and long-polls (after deleting a
// stale webhook) or, in webhook mode, registers the webhook and serves
// updates through WebhookHandler. Updates a crash left recorded and
// unhandled in the inbox are handled first, before any new one of their
// chat. Serving never waits for the outbox: a press is answered while
// thousands of re-sends queue. It returns after every goroutine it started
// has stopped. Run may be called once.
func (b *Bot) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.state != notStarted {
		b.mu.Unlock()
		return errors.New("run bot: already run")
	}
	b.state = starting
	b.mu.Unlock()

	var me *models.User
	err := b.do(ctx, 0, paceGlobal, "get me", func(ctx context.Context) error {
		var err error
		me, err = b.tg.GetMe(ctx)
		return err
	})
	if err != nil {
		b.setState(stopped)
		if ctx.Err() != nil {
			return nil // stopped before it started: not a failure
		}
		if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound) {
			return fmt.Errorf("run bot: Telegram refused the bot token (check TELEGRAM_BOT_TOKEN): %w", err)
		}
		return fmt.Errorf("run bot: reach Telegram at %s: %w", b.cfg.APIURL, err)
	}

	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	b.mu.Lock()
	b.state, b.pollCtx, b.runCtx, b.botName, b.botID = recovering, pollCtx, runCtx, me.Username, me.ID
	b.mu.Unlock()

	rec, err := b.cfg.Service.Recover(ctx)
	if err != nil {
		b.stop(stopPoll, cancel)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("run bot: recover prompts: %w", err)
	}
	b.log.Info("ready", "recovered_prompts", rec.Resumed, "requests_resent", rec.Resent)
	// Read before updates are taken, queued as they are: each chat then
	// handles what a crash left in the inbox before anything new.
	left := b.unhandledUpdates(ctx)

	b.mu.Lock()
	b.state = running
	b.queueLocked(left)
	// The sender stops trying to lead once updates stop; if it leads
	// then, it drains the outbox first.
	b.goLocked(func(ctx context.Context) {
		b.lead(ctx, leaseSender, pollCtx.Done(), func(ctx, lost context.Context) { b.deliver(ctx, lost.Done()) })
	})
	b.mu.Unlock()
	b.wakeSender()

	err = b.serve(pollCtx, me.Username)
	b.stop(stopPoll, cancel)
	return err
}

func (b *Bot) setState(state int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state = state
}

// stop ends updates and "typing…", lets the sends under way finish within
// the drain, then cuts the rest and waits for every goroutine of Run.
func (b *Bot) stop(stopPoll, cancel context.CancelFunc) {
	stopPoll()
	b.drain()
	cancel()
	b.setState(stopped)
	b.wg.Wait()
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
func (b *Bot) serve(ctx context.Context, username string) error {
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
	b.log.Info("telegram bot running", "username", username, "webhook", b.cfg.Webhook.URL != "")
	b.goRun(func(context.Context) { b.pruneInbox(ctx) })
	if b.cfg.Webhook.URL == "" {
		// Telegram allows one getUpdates consumer: the replica that holds
		// the lease polls. Returns when ctx ends.
		b.lead(ctx, leasePoller, nil, func(ctx, lost context.Context) {
			// A poller that lost its lease stops at once: what it got is
			// recorded before the offset moves, so its successor misses
			// nothing.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(lost, cancel)()
			b.poll(ctx)
		})
		return nil
	}
	<-ctx.Done()
	return nil
}

var commands = []models.BotCommand{
	{Command: "help", Description: "What this bot does and which tools need approval"},
	{Command: "pending", Description: "Show the request waiting for your approval"},
	{Command: "cancel", Description: "Stop the current request"},
	{Command: "grants", Description: "List what runs without asking, and revoke it"},
	{Command: "edit", Description: "Change the waiting request's input: /edit {JSON}"},
	{Command: "audit", Description: "The last decisions in this chat, and who made them"},
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

// goRun runs f in a goroutine owned by Run if Run is under way (from
// Recover on), and reports whether it did.
func (b *Bot) goRun(f func(context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != recovering && b.state != running {
		return false
	}
	b.goLocked(f)
	return true
}

const maxWebhookBody = 1 << 20

// WebhookHandler serves Telegram's webhook deliveries. It checks the secret
// header in constant time before reading the body and answers 401 to a
// wrong or missing one; it answers 503 while Run is not serving, so that
// Telegram delivers the update again later. It answers 200 only once the
// update is recorded in the inbox, and 500 if it could not be: Telegram
// then delivers it again. A delivery of an update already recorded is
// answered 200 and not handled again.
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
		if upd.ID <= 0 {
			// Without it the update could not be recognised when it comes again.
			b.log.Warn("webhook: update without update_id")
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		if !b.takesUpdates() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		if err := b.dispatch(r.Context(), []json.RawMessage{body}, []*models.Update{upd}); err != nil {
			b.log.Error("webhook: update not recorded; Telegram delivers it again", "update", upd.ID, "err", err)
			http.Error(w, "not recorded", http.StatusInternalServerError)
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

// onActivity shows "typing…" in the chat while a worker advances the
// prompt: from Working to its end, keyed by prompt. The service calls it
// for one prompt from one worker at a time, in order, so a stop always
// finds the loop its start made.
func (b *Bot) onActivity(_ context.Context, a prompt.Activity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if stop, ok := b.typing[a.PromptID]; ok {
		stop()
		delete(b.typing, a.PromptID)
	}
	if !a.Working {
		return
	}
	if (b.state != recovering && b.state != running) || b.pollCtx.Err() != nil {
		// "typing…" is pointless once updates stop, and must not hold up
		// the drain of real sends.
		b.log.Debug("no typing shown: the bot is not running", "prompt", a.PromptID)
		return
	}
	ctx, stop := context.WithCancel(b.pollCtx)
	b.typing[a.PromptID] = stop
	b.goLocked(func(context.Context) {
		defer stop()
		b.showTyping(ctx, a.ConversationID)
	})
}

// showTyping renews "typing…" in the conversation's chat every
// Limits.Typing until ctx ends.
func (b *Bot) showTyping(ctx context.Context, conv string) {
	chat, err := b.chatOf(ctx, conv)
	if err != nil {
		b.log.Debug("no typing shown", "conversation", conv, "err", err)
		return
	}
	for {
		// One attempt: a missed "typing…" is not worth a retry.
		if err := b.lim.wait(ctx, 0, paceGlobal); err != nil {
			return
		}
		if _, err := b.tg.SendChatAction(ctx, &tgbot.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping}); err != nil && ctx.Err() == nil {
			b.log.Debug("send typing", "chat", chat, "err", err)
		}
		if b.sleep(ctx, b.cfg.Limits.Typing) != nil {
			return
		}
	}
}
