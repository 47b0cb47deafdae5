package prompt

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Service. Zero fields take the defaults named.
type Config struct {
	Model Model
	Store Store
	Tools []*Tool
	// Sources are tool sets that change while the service runs (an MCP
	// server's): their tools join Tools, and a change is picked up for the
	// next model turn and call.
	Sources []ToolSource
	// System is the system prompt.
	System string
	// MaxTurns bounds the model calls of one prompt (default 10).
	MaxTurns int
	// HistoryLimit bounds how many earlier prompts of the conversation the
	// model sees (default 20).
	HistoryLimit int
	// Workers bounds how many prompts are advanced at once, and so how
	// many model requests and tools run at the same time (default 16).
	// The rest wait in line, in order.
	Workers int
	// ApprovalTimeout is how long a request waits for a decision before it
	// expires (the call is not run; the model is told); zero: forever.
	ApprovalTimeout time.Duration
	// ApprovalRemind is when a request still waiting is shown once more;
	// zero: never.
	ApprovalRemind time.Duration
	// Policy is the operator's rules, checked before grants and gates;
	// nil: none.
	Policy Policy
	// Mode says who answers where a person would be asked (default
	// ModeInteractive).
	Mode Mode
	// Quorum is how many different people must approve a request before
	// its call runs (default 1); one rejection rejects it.
	Quorum int
	// Leases, when set, are shared with other processes on the same
	// store: each prompt is then advanced by one replica at a time, under
	// the lease "prompt:<id>". Nil: this process is alone (SQLite) and
	// takes none.
	Leases Leases
	// Replica names this process to the others that share the store, as
	// the holder of the leases it takes (default: a random ID). Two live processes
	// must not share a name. A process that restarts under the name it
	// had takes back at once the prompts it was advancing when it died;
	// under a new name, they wait for their leases to lapse. A store one
	// process has to itself (SQLite) can use any fixed name.
	Replica string
	// LeaseTTL is how long a prompt's lease lasts without renewal
	// (default DefaultLeaseTTL): a replica renews it every third of it
	// while it advances the prompt, and another replica takes the prompt
	// over within about twice this after the holder died. The replicas'
	// clocks must agree to well within it.
	LeaseTTL time.Duration
	Logger   *slog.Logger     // default: discard
	Now      func() time.Time // default: time.Now
	// AfterFunc runs f once d has passed, unless stop is called first
	// (default: time.AfterFunc); tests pass a clock they move.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// DefaultWorkers is the number of prompts advanced at once when
// Config.Workers is zero.
const DefaultWorkers = 16

// Service advances prompts by steps, each a compare-and-set on the stored
// record, with a fixed pool of workers. It keeps no prompt in memory while
// the prompt waits for a human: decisions go to the store by approval ID.
// Its methods are safe for concurrent use.
type Service struct {
	model        Model
	store        Store
	tools        atomic.Pointer[toolset]
	static       []*Tool
	sources      []ToolSource
	system       string
	maxTurns     int
	historyLimit int
	workers      int
	timeout      time.Duration
	remind       time.Duration
	policy       Policy
	mode         Mode
	quorum       int
	log          *slog.Logger
	now          func() time.Time
	afterFunc    func(time.Duration, func()) func() bool
	// leases is Config.Leases: nil when this process is the only one.
	leases   Leases
	replica  string
	ttl      time.Duration
	reloadMu sync.Mutex // one reloadTools at a time
	// deadlines wakes the goroutine that expires and reminds requests.
	deadlines chan struct{}
	watching  bool

	// base is the parent of every step's context; Close cancels it when
	// its deadline passes.
	base     context.Context
	stopBase context.CancelFunc
	wg       sync.WaitGroup

	// quit is closed when Close begins: the takeover loop stops.
	quit chan struct{}

	mu      sync.Mutex
	wake    *sync.Cond
	closing bool
	started bool
	idle    int
	queue   []string          // prompt IDs waiting for a worker, in order
	entries map[string]*entry // prompts queued or being advanced here

	onApproval listeners[ApprovalRequest]
	onEnded    listeners[Answer]
	onOutbox   listeners[struct{}]
	onActivity listeners[Activity]
}

// entry is a prompt this process has queued or is advancing.
type entry struct {
	running bool
	// again asks the worker to look at the prompt once more when its
	// current pass ends: something changed it meanwhile.
	again bool
	// cancel cuts the running pass short (a user's Cancel).
	cancel context.CancelCauseFunc
}

// errCancelled is the cause of a step context cut by Cancel, as opposed
// to one cut by shutdown.
var errCancelled = errors.New("cancelled by the user")

// NewService checks cfg and returns a service. Its workers (and, with
// leases, its takeover loop) start with the first prompt to advance or
// with Recover.
func NewService(cfg Config) (*Service, error) {
	if cfg.Model == nil {
		return nil, errors.New("new prompt service: no model")
	}
	if cfg.Store == nil {
		return nil, errors.New("new prompt service: no store")
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("new prompt service: %d workers", cfg.Workers)
	}
	if cfg.ApprovalTimeout < 0 || cfg.ApprovalRemind < 0 {
		return nil, errors.New("new prompt service: negative approval timeout or reminder")
	}
	if cfg.Quorum < 0 {
		return nil, fmt.Errorf("new prompt service: quorum %d", cfg.Quorum)
	}
	if cfg.LeaseTTL < 0 {
		return nil, fmt.Errorf("new prompt service: lease TTL %s", cfg.LeaseTTL)
	}
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, fmt.Errorf("new prompt service: approval mode %w", err)
	}
	cfg.Mode = mode
	ts, err := newToolset(cfg.Tools)
	if err != nil {
		return nil, fmt.Errorf("new prompt service: %w", err)
	}
	if len(cfg.Sources) > 0 {
		// Built once more below with the sources; the static tools alone
		// must be valid, so that a source cannot hide a mistake in them.
		ts = nil
	}
	s := &Service{
		model:        cfg.Model,
		store:        cfg.Store,
		static:       cfg.Tools,
		sources:      cfg.Sources,
		system:       cfg.System,
		maxTurns:     cfg.MaxTurns,
		historyLimit: cfg.HistoryLimit,
		workers:      cfg.Workers,
		timeout:      cfg.ApprovalTimeout,
		remind:       cfg.ApprovalRemind,
		policy:       cfg.Policy,
		mode:         cfg.Mode,
		quorum:       max(cfg.Quorum, 1),
		log:          cfg.Logger,
		now:          cfg.Now,
		afterFunc:    cfg.AfterFunc,
		replica:      cfg.Replica,
		ttl:          cfg.LeaseTTL,
		deadlines:    make(chan struct{}, 1),
		quit:         make(chan struct{}),
		entries:      map[string]*entry{},
	}
	s.leases = cfg.Leases
	if s.replica == "" {
		s.replica = "r_" + randomID(5)
	}
	if s.ttl == 0 {
		s.ttl = DefaultLeaseTTL
	}
	s.wake = sync.NewCond(&s.mu)
	if s.maxTurns <= 0 {
		s.maxTurns = 10
	}
	if s.historyLimit <= 0 {
		s.historyLimit = 20
	}
	if s.workers == 0 {
		s.workers = DefaultWorkers
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.afterFunc == nil {
		s.afterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if ts != nil {
		s.tools.Store(ts)
	} else {
		// Listening first: a change between the two is not missed.
		for _, src := range s.sources {
			src.OnChange(s.reloadTools)
		}
		s.reloadTools()
	}
	s.base, s.stopBase = context.WithCancel(context.Background())
	return s, nil
}

// Replica returns the name this process holds leases under.
func (s *Service) Replica() string { return s.replica }

// ToolSource is a set of tools that changes while the service runs.
type ToolSource interface {
	// Tools returns the source's tools as they stand now.
	Tools() []*Tool
	// OnChange registers f to run after the set changed.
	OnChange(f func())
}

// toolset is the tools as they stand: the static ones and the sources'.
func (s *Service) toolset() *toolset { return s.tools.Load() }

// reloadTools rebuilds the toolset from the static tools and the sources'
// current ones. A source tool that cannot join (a name taken, a bad
// schema) is left out and logged: one bad server must not take the
// others' tools away.
func (s *Service) reloadTools() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	ts, err := newToolset(s.static)
	if err != nil {
		s.log.Error("tool set not changed", "err", err) // not reached: NewService checked them
		return
	}
	for _, src := range s.sources {
		for _, t := range src.Tools() {
			if err := ts.add(t); err != nil {
				s.log.Warn("tool left out", "tool", t.Name, "err", err)
			}
		}
	}
	s.tools.Store(ts)
}

// Tools returns what the model is told about the service's tools.
func (s *Service) Tools() []ToolDef { return append([]ToolDef(nil), s.toolset().defs...) }

// ToolSummary is a tool as /help lists it.
type ToolSummary struct {
	Name   string
	Effect Effect
	// Asks is true when its calls can ask a person (a gate, its own or
	// the default of a tool that does more than read).
	Asks bool
}

// Summaries lists the service's tools with what they do and whether they
// can ask, in the order given.
func (s *Service) Summaries() []ToolSummary {
	ts := s.toolset()
	out := make([]ToolSummary, 0, len(ts.defs))
	for _, d := range ts.defs {
		t := ts.byName[d.Name]
		out = append(out, ToolSummary{Name: t.Name, Effect: t.Effect, Asks: t.Gate != nil})
	}
	return out
}

// OnApprovalRequested registers f to run after a call was saved as pending.
// Requests that were already waiting at a restart come from Recover's
// Waiting instead.
func (s *Service) OnApprovalRequested(f func(context.Context, ApprovalRequest)) { s.onApproval.add(f) }

// OnEnded registers f to run after a prompt was saved as completed or
// failed.
func (s *Service) OnEnded(f func(context.Context, Answer)) { s.onEnded.add(f) }

// OnOutbox registers f to run after a change recorded notices in the
// outbox: a sender can look now rather than at its next look.
func (s *Service) OnOutbox(f func()) {
	s.onOutbox.add(func(context.Context, struct{}) { f() })
}

// OnActivity registers f to run when a worker starts advancing a running
// prompt (Working true) and when it stops: the prompt paused, ended, or the
// service is shutting down.
func (s *Service) OnActivity(f func(context.Context, Activity)) { s.onActivity.add(f) }

// Create saves a new prompt and queues it for a worker. Returns ErrBusy if
// the conversation has a prompt running or waiting, ErrClosed during
// shutdown. A prompt saved just as Close began is not started: it stays
// running in the store and the next start's Recover resumes it.
func (s *Service) Create(ctx context.Context, conversationID, input string, opts ...CreateOption) (Created, error) {
	return s.create(ctx, "p_"+randomID(10), conversationID, input, opts)
}

// CreateOnce is Create for an input that may be handed over more than
// once: key names it within the conversation (a chat message's ID, say),
// and a second CreateOnce with the same key creates nothing and returns
// ErrExists, whatever became of the first prompt. A crash between taking
// a message and recording that it was handled then cannot run the agent
// on it twice.
func (s *Service) CreateOnce(ctx context.Context, conversationID, key, input string, opts ...CreateOption) (Created, error) {
	sum := sha256.Sum256([]byte(conversationID + "\x00" + key))
	return s.create(ctx, "p_"+idEncoding.EncodeToString(sum[:10]), conversationID, input, opts)
}

func (s *Service) create(ctx context.Context, id, conversationID, input string, opts []CreateOption) (Created, error) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return Created{}, fmt.Errorf("create prompt: %w", ErrClosed)
	}
	now := s.now()
	p := &Prompt{
		ID:             id,
		ConversationID: conversationID,
		State:          StateRunning,
		Input:          input,
		Rev:            1,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	for _, o := range opts {
		o(p)
	}
	if err := s.store.CreatePrompt(ctx, p); err != nil {
		return Created{}, fmt.Errorf("create prompt in %s: %w", conversationID, err)
	}
	return Created{PromptID: p.ID, Position: s.kick(p.ID)}, nil
}

// Active returns where the conversation's running or waiting prompt
// stands, or ErrNotFound if it has none.
func (s *Service) Active(ctx context.Context, conversationID string) (Status, error) {
	p, err := s.store.ActivePrompt(ctx, conversationID)
	if err != nil {
		return Status{}, fmt.Errorf("active prompt of %s: %w", conversationID, err)
	}
	st := Status{PromptID: p.ID, State: p.State, Author: p.Author}
	if req, ok := p.PendingRequest(); ok && p.State == StateWaiting {
		req = s.describe(req)
		if s.quorum > 1 {
			ref, err := s.store.FindApproval(ctx, req.ApprovalID)
			if err != nil {
				return Status{}, fmt.Errorf("active prompt of %s: %w", conversationID, err)
			}
			req.Votes = ref.Votes
		}
		st.Pending = &req
	}
	return st, nil
}

// Request returns the request of approval approvalID as it was asked and
// where the approval stands now, so a sender can show it, or rebuild a
// copy with its outcome, from one look. Returns ErrNotFound if there is no
// such approval.
func (s *Service) Request(ctx context.Context, approvalID string) (ApprovalRequest, ApprovalRef, error) {
	ref, err := s.store.FindApproval(ctx, approvalID)
	if err != nil {
		return ApprovalRequest{}, ApprovalRef{}, err
	}
	p, err := s.store.LoadPrompt(ctx, ref.PromptID)
	if err != nil {
		return ApprovalRequest{}, ApprovalRef{}, fmt.Errorf("request %s: %w", approvalID, err)
	}
	i := findCall(p, ref.CallID)
	if i < 0 {
		return ApprovalRequest{}, ApprovalRef{}, fmt.Errorf("request %s: its call %s is not in prompt %s: %w", approvalID, ref.CallID, p.ID, ErrNotFound)
	}
	if a := p.Output[i].Call.Approval; a == nil || a.ID != approvalID || a.Status == ApprovalEdited {
		// A request the call left behind (it was edited): as it was shown.
		// Until the edited call asks again the call still carries this
		// approval, but its input may be the edited one already.
		return ApprovalRequest{PromptID: p.ID, ConversationID: p.ConversationID, ApprovalID: approvalID,
			ToolCallID: ref.CallID, ToolName: ref.ToolName, Input: json.RawMessage(ref.Input), Reason: ref.Reason,
			RequestedAt: ref.RequestedAt, InputHash: ref.InputHash, Author: p.Author, Quorum: s.quorum, Votes: ref.Votes}, ref, nil
	}
	req := s.describe(requestOf(p, i))
	req.Votes = ref.Votes
	return req, ref, nil
}

// describe adds to req what its tool says of it: what "always" would
// cover. An edited call is approved on its own, so it offers no "always".
func (s *Service) describe(req ApprovalRequest) ApprovalRequest {
	req.Parts = s.shownParts(s.toolset().byName[req.ToolName], req.Input)
	req.Quorum = s.quorum
	// Under a quorum no one person may grant "always" (see ApproveAlways).
	if req.Edit != nil || s.quorum > 1 {
		return req
	}
	sc, ok, err := scopeOf(s.toolset().byName[req.ToolName], string(req.Input))
	if err != nil {
		s.log.Warn("no 'always' offered", "approval", req.ApprovalID, "err", err)
		return req
	}
	if ok {
		req.Scope = &sc
	}
	return req
}

// Answer returns how prompt promptID ended. Returns ErrNotPending if it
// has not ended yet, ErrNotFound if there is no such prompt.
func (s *Service) Answer(ctx context.Context, promptID string) (Answer, error) {
	p, err := s.store.LoadPrompt(ctx, promptID)
	if err != nil {
		return Answer{}, fmt.Errorf("answer of %s: %w", promptID, err)
	}
	if !p.State.Final() {
		return Answer{}, fmt.Errorf("answer of %s: it is %s: %w", promptID, p.State, ErrNotPending)
	}
	return answerOf(p), nil
}

// RejectedPrefix starts the result a rejected call gives the model.
const RejectedPrefix = "Rejected by user"

// Approve records that a human allowed the call of approval approvalID,
// then queues its prompt to run it. It returns once the decision is saved.
// Under a quorum it is Vote with by as the voter's ID too; a caller that
// knows a stable ID for the person should call Vote.
// Returns ErrNotPending if the approval was already decided, ErrNotFound
// if there is no such approval.
func (s *Service) Approve(ctx context.Context, approvalID, by string) error {
	if s.quorum > 1 {
		_, err := s.Vote(ctx, approvalID, by, by)
		return err
	}
	return s.decide(ctx, approvalID, Decision{Status: ApprovalApproved, By: by, At: s.now()})
}

// Reject records that a human refused the call of approval approvalID; the
// model gets the error result "Rejected by user: <reason>". Errors are as
// for Approve.
func (s *Service) Reject(ctx context.Context, approvalID, reason, by string) error {
	return s.decide(ctx, approvalID, Decision{Status: ApprovalRejected, By: by, At: s.now(), Note: reason})
}

func (s *Service) decide(ctx context.Context, approvalID string, d Decision) error {
	ref, err := s.store.Decide(ctx, approvalID, d)
	if err != nil {
		return fmt.Errorf("decide approval %s: %w", approvalID, err)
	}
	s.log.Info("approval decided", "prompt", ref.PromptID, "approval", approvalID, "call", ref.CallID,
		"status", d.Status, "by", d.By)
	s.onOutbox.emit(ctx, struct{}{})
	s.kick(ref.PromptID)
	return nil
}

// LookupApproval returns where approval approvalID stands, from the store:
// ErrNotFound if there is no such approval.
func (s *Service) LookupApproval(ctx context.Context, approvalID string) (ApprovalRef, error) {
	return s.store.FindApproval(ctx, approvalID)
}

// Cancel ends prompt promptID at the user's request: a pending call is
// rejected, queued calls never run, and a running model turn or tool is
// cancelled through its context. A prompt no worker is advancing is ended
// before Cancel returns; one a worker advances ends at its next step.
// Returns ErrNotPending if the prompt has already ended, ErrNotFound if
// there is no such prompt.
func (s *Service) Cancel(ctx context.Context, promptID, by string) error {
	if err := s.store.CancelPrompt(ctx, promptID, by, s.now()); err != nil {
		return fmt.Errorf("cancel prompt %s: %w", promptID, err)
	}
	s.log.Info("prompt cancelled", "prompt", promptID, "by", by)
	// The notice of the rejected approval, if there was one, is in the
	// outbox.
	s.onOutbox.emit(ctx, struct{}{})
	s.mu.Lock()
	e := s.entries[promptID]
	switch {
	case e != nil && e.running:
		e.again = true
		e.cancel(errCancelled)
		s.mu.Unlock()
		return nil
	case e != nil:
		// Queued: end it here rather than behind every other prompt.
		s.dequeueLocked(promptID)
	}
	e = &entry{running: true, cancel: func(error) {}}
	s.entries[promptID] = e
	s.mu.Unlock()
	s.endCancelled(ctx, promptID)
	s.mu.Lock()
	again := e.again
	delete(s.entries, promptID)
	s.mu.Unlock()
	if again {
		s.kick(promptID)
	}
	return nil
}

// Stop is the request's own ⛔ button: it rejects the call of approval
// approvalID and every call queued after it, and ends the prompt with no
// further model turn, as Cancel does. Returns ErrNotPending if the
// approval was already decided, ErrNotFound if there is no such approval.
func (s *Service) Stop(ctx context.Context, approvalID, by string) error {
	// The rejection is the compare-and-set, so Stop loses to a press that
	// decided first; the prompt is not kicked in between, so nothing
	// queued runs before the cancel below ends it.
	ref, err := s.store.Decide(ctx, approvalID, Decision{Status: ApprovalRejected, By: by, At: s.now(), Note: "cancelled"})
	if err != nil {
		return fmt.Errorf("stop at approval %s: %w", approvalID, err)
	}
	s.log.Info("stopped at a request", "prompt", ref.PromptID, "approval", approvalID, "by", by)
	return s.Cancel(ctx, ref.PromptID, by)
}

// Close stops taking work and waits for the prompts being advanced to
// pause or end; prompts waiting for approval or for a worker stay as
// saved, for the next start. When ctx ends first, the steps under way are
// cancelled (their state stays as last saved) and Close returns ctx's
// error without waiting further.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		close(s.quit)
	}
	s.closing = true
	s.wake.Broadcast()
	s.mu.Unlock()
	select { // the deadline loop sees closing
	case s.deadlines <- struct{}{}:
	default:
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.stopBase()
		return nil
	case <-ctx.Done():
		s.stopBase()
		return fmt.Errorf("close prompt service: %w", ctx.Err())
	}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomID returns n random bytes as lower-case base32: 10 bytes give 16
// characters and 80 bits, enough that nobody guesses a live approval.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b)
}
