package prompt

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Config configures a Service.
type Config struct {
	Model Model
	Store Store
	Tools []*Tool
	// System is the system prompt.
	System string
	// MaxTurns bounds the model calls of one prompt (default 10).
	MaxTurns int
	// HistoryLimit bounds how many earlier prompts of the conversation the
	// model sees (default 20).
	HistoryLimit int
	Logger       *slog.Logger     // default: discard
	Now          func() time.Time // default: time.Now
}

// Service runs completions and keeps the active ones: those running or
// waiting for approval. Its methods are safe for concurrent use.
type Service struct {
	model        Model
	store        Store
	tools        *toolset
	system       string
	maxTurns     int
	historyLimit int
	log          *slog.Logger
	now          func() time.Time

	// base is the parent of every loop's context; Close cancels it when
	// its deadline passes.
	base     context.Context
	stopBase context.CancelFunc
	wg       sync.WaitGroup

	mu        sync.Mutex
	closing   bool
	active    map[string]*Completion // by prompt ID
	byConv    map[string]*Completion // by conversation ID
	approvals map[string]pendingRef  // by approval ID

	onCreated   listeners[Listener]
	onCompleted listeners[Listener]
	onApproval  listeners[ApprovalListener]
}

type pendingRef struct {
	c      *Completion
	callID string
}

// NewService checks cfg and returns a service. It starts nothing until
// Create or Recover.
func NewService(cfg Config) (*Service, error) {
	if cfg.Model == nil {
		return nil, errors.New("new prompt service: no model")
	}
	if cfg.Store == nil {
		return nil, errors.New("new prompt service: no store")
	}
	ts, err := newToolset(cfg.Tools)
	if err != nil {
		return nil, fmt.Errorf("new prompt service: %w", err)
	}
	s := &Service{
		model:        cfg.Model,
		store:        cfg.Store,
		tools:        ts,
		system:       cfg.System,
		maxTurns:     cfg.MaxTurns,
		historyLimit: cfg.HistoryLimit,
		log:          cfg.Logger,
		now:          cfg.Now,
		active:       map[string]*Completion{},
		byConv:       map[string]*Completion{},
		approvals:    map[string]pendingRef{},
	}
	if s.maxTurns <= 0 {
		s.maxTurns = 10
	}
	if s.historyLimit <= 0 {
		s.historyLimit = 20
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.base, s.stopBase = context.WithCancel(context.Background())
	return s, nil
}

// Tools returns what the model is told about the service's tools.
func (s *Service) Tools() []ToolDef { return append([]ToolDef(nil), s.tools.defs...) }

// Gated returns the names of the tools that can ask for approval.
func (s *Service) Gated() []string {
	var names []string
	for _, d := range s.tools.defs {
		if s.tools.byName[d.Name].Gate != nil {
			names = append(names, d.Name)
		}
	}
	return names
}

// OnCreated registers f to run after a prompt is created and saved.
func (s *Service) OnCreated(f Listener) { s.onCreated.add(f) }

// OnApprovalRequested registers f to run, for every completion, after a
// call was saved as pending (and again for each by Recover).
func (s *Service) OnApprovalRequested(f ApprovalListener) { s.onApproval.add(f) }

// OnCompleted registers f to run after any prompt is saved as completed
// or failed.
func (s *Service) OnCompleted(f Listener) { s.onCompleted.add(f) }

// Create saves a new prompt and starts its loop in the background.
// Returns ErrBusy if the conversation has a prompt running or waiting,
// ErrClosed during shutdown. A prompt saved just as Close began is not
// started: it stays running in the store and the next start's Recover
// resumes it.
func (s *Service) Create(ctx context.Context, conversationID, input string) (*Completion, error) {
	now := s.now()
	p := &Prompt{
		ID:             "p_" + randomID(10),
		ConversationID: conversationID,
		State:          StateRunning,
		Input:          input,
		Rev:            1,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, fmt.Errorf("create prompt: %w", ErrClosed)
	}
	if _, busy := s.byConv[conversationID]; busy {
		s.mu.Unlock()
		return nil, fmt.Errorf("create prompt in %s: %w", conversationID, ErrBusy)
	}
	// Registered before the save so a second message cannot slip in.
	c := newCompletion(s, p, nil)
	s.active[p.ID], s.byConv[conversationID] = c, c
	s.mu.Unlock()

	history, err := s.store.History(ctx, conversationID, "", s.historyLimit)
	if err == nil {
		c.history = history
		err = s.store.SavePrompt(ctx, p)
	}
	if err != nil {
		s.forget(c)
		return nil, fmt.Errorf("create prompt in %s: %w", conversationID, err)
	}
	for _, f := range s.onCreated.snapshot() {
		f(ctx, c)
	}
	c.mu.Lock()
	c.startLocked()
	c.mu.Unlock()
	return c, nil
}

// GetActive returns the completion of a prompt running or waiting, or nil.
func (s *Service) GetActive(promptID string) *Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[promptID]
}

// ActiveIn returns the completion running or waiting in a conversation,
// or nil.
func (s *Service) ActiveIn(conversationID string) *Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byConv[conversationID]
}

// Approve decides approval approvalID: see Completion.Approve. Returns
// ErrNotFound if no approval has that ID, ErrNotPending if it was
// already decided.
func (s *Service) Approve(ctx context.Context, approvalID, by string) error {
	ref, err := s.lookupApproval(ctx, approvalID)
	if err != nil {
		return err
	}
	return ref.c.Approve(ctx, ref.callID, by)
}

// Reject decides approval approvalID: see Completion.Reject. Errors are
// as for Approve.
func (s *Service) Reject(ctx context.Context, approvalID, reason, by string) error {
	ref, err := s.lookupApproval(ctx, approvalID)
	if err != nil {
		return err
	}
	return ref.c.Reject(ctx, ref.callID, reason, by)
}

// LookupApproval returns where approval approvalID stands, from the store:
// ErrNotFound if there is no such approval.
func (s *Service) LookupApproval(ctx context.Context, approvalID string) (ApprovalRef, error) {
	return s.store.FindApproval(ctx, approvalID)
}

func (s *Service) lookupApproval(ctx context.Context, approvalID string) (pendingRef, error) {
	s.mu.Lock()
	ref, ok := s.approvals[approvalID]
	s.mu.Unlock()
	if ok {
		return ref, nil
	}
	found, err := s.store.FindApproval(ctx, approvalID)
	if err != nil {
		return pendingRef{}, fmt.Errorf("approval %s: %w", approvalID, err)
	}
	if found.Status != CallPending {
		return pendingRef{}, fmt.Errorf("approval %s: %w", approvalID, ErrNotPending)
	}
	// Pending in the store but not active here: Recover has not run.
	return pendingRef{}, fmt.Errorf("approval %s is not loaded: %w", approvalID, ErrNotFound)
}

// Recover loads every prompt left running or waiting by an earlier
// process. Calls found executing become interrupted with an "outcome
// unknown" error result and are never run again. Waiting prompts emit
// approval-requested again; running ones resume in the background.
// Prompts already active in this service are left alone, so a second call
// never runs a prompt twice; on error nothing is registered and Recover
// may be called again. It returns how many prompts it recovered.
func (s *Service) Recover(ctx context.Context) (int, error) {
	prompts, err := s.store.UnfinishedPrompts(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	var loaded []*Completion
	for _, p := range prompts {
		if s.GetActive(p.ID) != nil {
			// Created or recovered here: its loop owns it, and repair
			// would take its executing call for a crash.
			continue
		}
		history, err := s.store.History(ctx, p.ConversationID, p.ID, s.historyLimit)
		if err != nil {
			return 0, fmt.Errorf("recover prompt %s: %w", p.ID, err)
		}
		c := newCompletion(s, p, history)
		if err := c.repair(ctx); err != nil {
			return 0, fmt.Errorf("recover prompt %s: %w", p.ID, err)
		}
		loaded = append(loaded, c)
	}
	// Registered all at once, so a failure above leaves no completion that
	// nobody announced or runs, holding its conversation busy.
	var waiting, running []*Completion
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return 0, fmt.Errorf("recover: %w", ErrClosed)
	}
	for _, c := range loaded {
		if s.active[c.id] != nil {
			continue // a concurrent Recover took it
		}
		s.active[c.id], s.byConv[c.conv] = c, c
		if c.p.State == StateWaiting {
			waiting = append(waiting, c)
		} else {
			running = append(running, c)
		}
	}
	s.mu.Unlock()
	for _, c := range waiting {
		if req, ok := c.PendingRequest(); ok {
			s.rememberApproval(req.ApprovalID, c, req.ToolCallID)
			c.emitApproval(ctx, req)
		}
	}
	for _, c := range running {
		c.mu.Lock()
		c.startLocked()
		c.mu.Unlock()
	}
	s.log.Info("recovered prompts", "waiting", len(waiting), "running", len(running))
	return len(waiting) + len(running), nil
}

// repair makes a prompt loaded after a crash consistent before it runs.
func (c *Completion) repair(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var touched []int
	changed := false
	for i := range c.p.Output {
		call := c.p.Output[i].Call
		if call == nil || call.Status != CallExecuting {
			continue
		}
		call.Status = CallInterrupted
		call.Result = &Result{Type: ResultError, Error: InterruptedError}
		if call.Approval != nil {
			call.Approval.Note = InterruptedError
		}
		touched = append(touched, i)
		changed = true
	}
	if c.p.State == StateWaiting && c.findPending() < 0 {
		// Waiting with nothing to decide cannot resume by a press.
		c.p.State = StateRunning
		changed = true
	}
	if !changed {
		return nil
	}
	c.touch(touched...)
	return c.svc.store.SavePrompt(ctx, c.p)
}

// Close stops taking work and waits for running loops to pause or end;
// prompts waiting for approval stay as saved. When ctx ends first, the
// loops are cancelled (their state stays as last saved, for the next
// start) and Close returns ctx's error without waiting further.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
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

func (s *Service) forget(c *Completion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, c.id)
	if s.byConv[c.conv] == c {
		delete(s.byConv, c.conv)
	}
	for id, ref := range s.approvals {
		if ref.c == c {
			delete(s.approvals, id)
		}
	}
}

func (s *Service) rememberApproval(id string, c *Completion, callID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals[id] = pendingRef{c: c, callID: callID}
}

func (s *Service) forgetApproval(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.approvals, id)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomID returns n random bytes as lower-case base32: 10 bytes give 16
// characters and 80 bits, enough that nobody guesses a live approval.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b)
}
