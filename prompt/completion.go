package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Completion is one prompt being worked on: it runs the loop, pauses at a
// gated call and resumes on a decision. Its methods are safe for
// concurrent use.
type Completion struct {
	svc     *Service
	history []*Prompt
	// id and conv are copies of the prompt's, read without the lock: c.p
	// itself is replaced when a failed Cancel restores the saved prompt.
	id, conv string

	mu sync.Mutex
	p  *Prompt
	// idle is closed while no loop runs; a started loop gets a fresh one.
	idle chan struct{}
	// stop cancels the running loop, for Cancel.
	stop context.CancelFunc
	// cancelledBy is set by Cancel while a loop runs; the loop ends the
	// prompt when it sees it.
	cancelledBy string

	onUpdated   listeners[Listener]
	onCompleted listeners[Listener]
	onApproval  listeners[ApprovalListener]
}

func newCompletion(s *Service, p *Prompt, history []*Prompt) *Completion {
	idle := make(chan struct{})
	close(idle)
	return &Completion{svc: s, p: p, history: history, idle: idle, id: p.ID, conv: p.ConversationID}
}

// ID returns the prompt ID.
func (c *Completion) ID() string { return c.id }

// ConversationID returns the prompt's conversation.
func (c *Completion) ConversationID() string { return c.conv }

// Prompt returns a copy of the prompt as it is now.
func (c *Completion) Prompt() *Prompt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p.Clone()
}

// OnUpdated registers f to run after every saved change.
func (c *Completion) OnUpdated(f Listener) { c.onUpdated.add(f) }

// OnCompleted registers f to run once the prompt is completed or failed.
func (c *Completion) OnCompleted(f Listener) { c.onCompleted.add(f) }

// OnApprovalRequested registers f to run when a call waits for a human.
func (c *Completion) OnApprovalRequested(f ApprovalListener) { c.onApproval.add(f) }

// Wait blocks until no loop runs for this completion: it is waiting for
// approval, completed or failed. ctx bounds the wait.
func (c *Completion) Wait(ctx context.Context) error {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for prompt %s: %w", c.id, ctx.Err())
	}
}

// PendingRequest returns the request of the call now waiting, if any.
func (c *Completion) PendingRequest() (ApprovalRequest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.p.Output {
		if call := c.p.Output[i].Call; call != nil && call.Status == CallPending {
			return c.requestLocked(i), true
		}
	}
	return ApprovalRequest{}, false
}

// Approve records that a human allowed call toolCallID, then runs it and
// resumes the loop in the background. It returns once the decision is
// saved. Returns ErrNotPending if the call was already decided,
// ErrUnknownCall if there is no such call, ErrClosed during shutdown.
func (c *Completion) Approve(ctx context.Context, toolCallID, by string) error {
	return c.decide(ctx, toolCallID, true, "", by)
}

// Reject records that a human refused call toolCallID; the model gets the
// error result "Rejected by user: <reason>" and the loop resumes in the
// background. Errors are as for Approve.
func (c *Completion) Reject(ctx context.Context, toolCallID, reason, by string) error {
	return c.decide(ctx, toolCallID, false, reason, by)
}

// RejectedPrefix starts the result a rejected call gives the model.
const RejectedPrefix = "Rejected by user"

func (c *Completion) decide(ctx context.Context, callID string, approve bool, reason, by string) error {
	s := c.svc
	c.mu.Lock()
	idx := c.findCall(callID)
	if idx < 0 {
		c.mu.Unlock()
		return fmt.Errorf("decide %s in prompt %s: %w", callID, c.p.ID, ErrUnknownCall)
	}
	call := c.p.Output[idx].Call
	if call.Status != CallPending || c.p.State != StateWaiting {
		c.mu.Unlock()
		return fmt.Errorf("decide %s in prompt %s: %w", callID, c.p.ID, ErrNotPending)
	}
	before, beforeState := *call, c.p.State
	approval := *call.Approval
	approval.DecidedBy, approval.DecidedAt = by, s.now()
	call.Approval = &approval
	if approve {
		call.Status, call.Result = CallApproved, nil
	} else {
		msg := RejectedPrefix
		if reason != "" {
			msg += ": " + reason
		}
		approval.Note = reason
		call.Status, call.Result = CallRejected, &Result{Type: ResultError, Error: msg}
	}
	c.p.State = StateRunning
	c.touch(idx)
	if err := s.store.DecideApproval(ctx, c.p, callID); err != nil {
		*call, c.p.State = before, beforeState
		c.mu.Unlock()
		return fmt.Errorf("decide %s in prompt %s: %w", callID, c.id, err)
	}
	c.mu.Unlock()
	s.forgetApproval(approval.ID)
	s.log.Info("approval decided", "prompt", c.id, "call", callID, "tool", call.Name,
		"approved", approve, "by", by)
	// Reported before the loop starts, so no listener hears of the tool or
	// the answer before the decision that allowed them. Until then the
	// prompt runs with no loop: a Cancel in between ends it, and start
	// then refuses.
	c.emitUpdated(ctx)
	c.mu.Lock()
	// During shutdown no loop starts; the saved decision is resumed by the
	// next start's Recover.
	c.startLocked()
	c.mu.Unlock()
	return nil
}

// Cancel ends the prompt at the user's request: a pending call is
// rejected, queued calls never run, and a running model turn or tool is
// cancelled through its context; a prompt whose loop has not started (or
// cannot, during shutdown) is ended at once. Returns ErrNotPending if the
// prompt has already ended.
func (c *Completion) Cancel(ctx context.Context, by string) error {
	c.mu.Lock()
	switch {
	case c.p.State.Final():
		c.mu.Unlock()
		return fmt.Errorf("cancel prompt %s: %w", c.p.ID, ErrNotPending)
	case c.p.State == StateRunning && c.loopRunningLocked():
		// The loop ends the prompt at its next step, or on its way out.
		c.cancelledBy = by
		c.stop()
		c.mu.Unlock()
		return nil
	}
	// Waiting, or running with no loop yet (Create has not started it, or
	// a decision came during shutdown): no loop will see a flag, so end it
	// here, as a decision would.
	before := c.p.Clone()
	idx := c.findPending()
	var approvalID string
	if idx >= 0 {
		call := c.p.Output[idx].Call
		approval := *call.Approval
		approval.DecidedBy, approval.DecidedAt, approval.Note = by, c.svc.now(), "cancelled"
		call.Approval = &approval
		call.Status = CallRejected
		call.Result = &Result{Type: ResultError, Error: RejectedPrefix + ": cancelled"}
		approvalID = approval.ID
	}
	c.endLocked(StateFailed, "Cancelled by "+by+".")
	var err error
	if idx >= 0 {
		err = c.svc.store.DecideApproval(ctx, c.p, c.p.Output[idx].Call.ID)
	} else {
		err = c.svc.store.SavePrompt(ctx, c.p)
	}
	if err != nil {
		// The stored prompt still waits, and so does this one.
		c.p = before
		c.mu.Unlock()
		return fmt.Errorf("cancel prompt %s: %w", before.ID, err)
	}
	c.mu.Unlock()
	c.svc.forgetApproval(approvalID)
	c.finish(ctx)
	return nil
}

// startLocked starts the loop in the background under the service's
// ownership. It reports false when the service is closing.
func (c *Completion) startLocked() bool {
	if c.p.State.Final() {
		return false // cancelled before it started
	}
	s := c.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	ctx, cancel := context.WithCancel(s.base)
	c.idle = make(chan struct{})
	c.stop = cancel
	c.cancelledBy = ""
	s.wg.Add(1)
	go func(idle chan struct{}) {
		defer s.wg.Done()
		defer close(idle)
		defer cancel()
		c.loop(ctx)
		// A Cancel that came as the loop was returning for another reason
		// (shutdown) would otherwise be lost with the prompt still running.
		c.interrupted(ctx)
	}(c.idle)
	return true
}

// loopRunningLocked reports whether a loop runs that will see cancelledBy.
func (c *Completion) loopRunningLocked() bool {
	select {
	case <-c.idle:
		return false
	default:
		return c.stop != nil
	}
}

// loop runs model turns and tool calls until the prompt pauses or ends.
func (c *Completion) loop(ctx context.Context) {
	for {
		if c.interrupted(ctx) {
			return
		}
		c.mu.Lock()
		idx := c.nextCall()
		c.mu.Unlock()
		if idx >= 0 {
			if !c.runCall(ctx, idx) {
				return
			}
			continue
		}
		if !c.modelTurn(ctx) {
			return
		}
	}
}

// interrupted handles a cancelled loop context: a user's Cancel ends the
// prompt; shutdown leaves it as saved, for the next start to resume.
func (c *Completion) interrupted(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	c.mu.Lock()
	by := c.cancelledBy
	if by == "" || c.p.State != StateRunning {
		// Shutdown, or a Cancel the prompt already ended by.
		c.mu.Unlock()
		return true
	}
	c.endLocked(StateFailed, "Cancelled by "+by+".")
	c.saveFinalLocked(ctx)
	c.mu.Unlock()
	c.finish(ctx)
	return true
}

// modelTurn asks the model for the next step. It reports whether the loop
// goes on.
func (c *Completion) modelTurn(ctx context.Context) bool {
	s := c.svc
	c.mu.Lock()
	if c.p.Turns >= s.maxTurns {
		c.endLocked(StateFailed, fmt.Sprintf("Stopped after %d model turns without a final answer.", s.maxTurns))
		c.saveFinalLocked(ctx)
		c.mu.Unlock()
		c.finish(ctx)
		return false
	}
	req := Request{
		System:   s.system,
		Messages: Messages(append(c.history[:len(c.history):len(c.history)], c.p)...),
		Tools:    s.tools.defs,
	}
	c.mu.Unlock()

	resp, err := s.model.Complete(ctx, req)
	if c.interrupted(ctx) {
		return false
	}
	c.mu.Lock()
	if ctx.Err() != nil {
		// Cancelled since the check above: drop the answer, nothing of it ran.
		c.mu.Unlock()
		c.interrupted(ctx)
		return false
	}
	if err != nil {
		s.log.Error("model turn", "prompt", c.id, "err", err)
		c.endLocked(StateFailed, "The model failed: "+err.Error())
		c.saveFinalLocked(ctx)
		c.mu.Unlock()
		c.finish(ctx)
		return false
	}
	c.p.Turns++
	turn := c.p.Turns
	first := len(c.p.Output)
	if resp.Text != "" {
		c.p.Output = append(c.p.Output, Item{Type: ItemText, Turn: turn, Text: resp.Text})
	}
	for _, tc := range resp.ToolCalls {
		id := tc.ID
		if id == "" || c.findCall(id) >= 0 {
			// Some servers reuse or omit IDs; decisions need them unique.
			id = "call_" + randomID(8)
		}
		c.p.Output = append(c.p.Output, Item{Type: ItemTool, Turn: turn, Call: &Call{
			ID: id, Name: tc.Name, Arguments: tc.Arguments, Status: CallQueued,
		}})
	}
	done := len(resp.ToolCalls) == 0
	if done {
		c.p.State = StateCompleted
	}
	c.touch(rangeIdx(first, len(c.p.Output))...)
	if err := c.saveLocked(ctx); err != nil {
		c.failSaveLocked(ctx, err)
		c.mu.Unlock()
		c.finish(ctx)
		return false
	}
	c.mu.Unlock()
	c.emitUpdated(ctx)
	if done {
		c.finish(ctx)
		return false
	}
	return true
}

// runCall takes call idx one step: validation, the gate, execution. It
// reports whether the loop goes on.
func (c *Completion) runCall(ctx context.Context, idx int) bool {
	s := c.svc
	c.mu.Lock()
	call := c.p.Output[idx].Call
	approved := call.Status == CallApproved
	var approvedBy string
	if approved {
		approvedBy = call.Approval.DecidedBy
	}
	tool, input, err := s.tools.validate(call)
	c.mu.Unlock()
	if err != nil {
		return c.record(ctx, idx, CallDone, &Result{Type: ResultError, Error: err.Error()})
	}
	if !approved && tool.Gate != nil {
		req, err := c.safeGate(ctx, tool, input)
		if c.interrupted(ctx) {
			return false
		}
		if err != nil {
			return c.record(ctx, idx, CallDone, &Result{Type: ResultError, Error: "approval check failed: " + err.Error()})
		}
		if req.Required {
			c.pause(ctx, idx, req.Reason)
			return false
		}
	}

	// Saved before the tool runs: after a crash, executing means "may have
	// run" and is never run again.
	if !c.record(ctx, idx, CallExecuting, nil) {
		return false
	}
	if ctx.Err() != nil {
		// Cancelled or shut down while executing was saved: the tool has
		// not started. Put the call back as it was, so that the next start
		// may run it rather than call its outcome unknown (shutdown), or
		// the end records it as not run (Cancel).
		prev := CallQueued
		if approved {
			prev = CallApproved
		}
		if c.record(ctx, idx, prev, nil) {
			c.interrupted(ctx)
		}
		return false
	}
	info := CallInfo{PromptID: c.id, CallID: call.ID, Approved: approved, ApprovedBy: approvedBy}
	out, err := c.safeInvoke(ContextWithCall(ctx, info), tool, input)
	if ctx.Err() != nil && c.cancelled() == "" {
		// Shutdown cut the tool short: the stored executing status tells
		// the next start that the outcome is unknown.
		return false
	}
	if err != nil {
		return c.record(ctx, idx, CallDone, &Result{Type: ResultError, Error: err.Error()})
	}
	return c.record(ctx, idx, CallDone, &Result{Type: ResultSuccess, Output: out})
}

func (c *Completion) cancelled() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelledBy
}

// record saves a new status and result of call idx and reports whether the
// loop goes on. A failed save ends the prompt: going on would act on state
// nobody could recover.
//
// Executing is not saved once ctx is cancelled: a cancelled loop starts no
// tool.
func (c *Completion) record(ctx context.Context, idx int, status CallStatus, res *Result) bool {
	c.mu.Lock()
	if status == CallExecuting && ctx.Err() != nil {
		c.mu.Unlock()
		c.interrupted(ctx)
		return false
	}
	call := c.p.Output[idx].Call
	prevStatus, prevResult := call.Status, call.Result
	call.Status, call.Result = status, res
	c.touch(idx)
	if err := c.saveLocked(ctx); err != nil {
		if status == CallExecuting {
			// The tool never started: let the end say "not run", not
			// "executing" forever.
			call.Status, call.Result = prevStatus, prevResult
		}
		c.failSaveLocked(ctx, err)
		c.mu.Unlock()
		c.finish(ctx)
		return false
	}
	c.mu.Unlock()
	c.emitUpdated(ctx)
	return true
}

// pause saves call idx as pending and the prompt as waiting, then asks for
// a human. If the save fails nobody is asked: the prompt fails instead.
func (c *Completion) pause(ctx context.Context, idx int, reason string) {
	s := c.svc
	c.mu.Lock()
	if ctx.Err() != nil {
		// Cancelled (or shut down) after the gate: ask nobody.
		c.mu.Unlock()
		c.interrupted(ctx)
		return
	}
	call := c.p.Output[idx].Call
	call.Status = CallPending
	call.Approval = &Approval{ID: randomID(10), Reason: reason, RequestedAt: s.now()}
	call.Result = &Result{Type: ResultPending, Reason: reason}
	c.p.State = StateWaiting
	c.touch(idx)
	if err := c.saveLocked(ctx); err != nil {
		call.Status = CallDone
		call.Result = &Result{Type: ResultError, Error: "the approval request could not be saved, so it was not asked"}
		call.Approval.Note = "not asked: the request could not be saved"
		c.failSaveLocked(ctx, err)
		c.mu.Unlock()
		c.finish(ctx)
		return
	}
	req := c.requestLocked(idx)
	c.mu.Unlock()
	s.rememberApproval(req.ApprovalID, c, call.ID)
	c.emitUpdated(ctx)
	c.emitApproval(ctx, req)
}

func (c *Completion) requestLocked(idx int) ApprovalRequest {
	call := c.p.Output[idx].Call
	req := ApprovalRequest{
		PromptID:       c.p.ID,
		ConversationID: c.p.ConversationID,
		ApprovalID:     call.Approval.ID,
		ToolCallID:     call.ID,
		ToolName:       call.Name,
		Input:          json.RawMessage(call.Arguments),
		Reason:         call.Approval.Reason,
		RequestedAt:    call.Approval.RequestedAt,
	}
	for _, it := range c.p.Output[idx+1:] {
		if q := it.Call; q != nil && q.Status == CallQueued {
			req.Queued = append(req.Queued, ToolCall{ID: q.ID, Name: q.Name, Arguments: q.Arguments})
		}
	}
	return req
}

// endLocked moves the prompt to a final state; calls that were never run
// get an error result so the record reads true.
func (c *Completion) endLocked(state State, why string) {
	c.p.State = state
	c.p.Error = why
	var touched []int
	for i := range c.p.Output {
		call := c.p.Output[i].Call
		if call == nil {
			continue
		}
		switch call.Status {
		case CallQueued, CallApproved, CallPending:
			call.Status = CallDone
			call.Result = &Result{Type: ResultError, Error: "not run: " + why}
			if call.Approval != nil && call.Approval.Note == "" {
				// The approval is the audit trail: "approved, done" alone
				// would read as if the tool ran.
				a := *call.Approval
				a.Note = "not run: " + why
				call.Approval = &a
			}
			touched = append(touched, i)
		}
	}
	c.touch(touched...)
}

func (c *Completion) failSaveLocked(ctx context.Context, err error) {
	c.svc.log.Error("save prompt", "prompt", c.id, "err", err)
	c.endLocked(StateFailed, "Tollgate could not save this request, so it stopped.")
	c.saveFinalLocked(ctx)
}

// saveTimeout bounds a save the loop makes.
const saveTimeout = 5 * time.Second

// saveLocked saves a step the loop has taken. It does not honour ctx's
// cancellation: once the loop decided to take a step (checking ctx under
// c.mu), a Cancel or a shutdown landing during the save must not turn it
// into a storage failure that ends the prompt; the loop sees ctx at its
// next step instead.
func (c *Completion) saveLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	return c.svc.store.SavePrompt(ctx, c.p)
}

// saveFinalLocked saves an ended prompt on a best-effort basis: if this
// fails too, the stored state is older and a restart redoes from there.
func (c *Completion) saveFinalLocked(ctx context.Context) {
	if err := c.saveLocked(ctx); err != nil {
		c.svc.log.Error("save ended prompt", "prompt", c.id, "state", c.p.State, "err", err)
	}
}

// finish tells everyone that the prompt ended. The service forgets the
// completion first, so a listener already sees the conversation free.
func (c *Completion) finish(ctx context.Context) {
	// The loop's context may be cancelled by now (Cancel, shutdown); the
	// listeners still have I/O to do for this ending.
	ctx = context.WithoutCancel(ctx)
	c.svc.forget(c)
	c.emitUpdated(ctx)
	for _, f := range c.onCompleted.snapshot() {
		f(ctx, c)
	}
	for _, f := range c.svc.onCompleted.snapshot() {
		f(ctx, c)
	}
}

func (c *Completion) emitUpdated(ctx context.Context) {
	for _, f := range c.onUpdated.snapshot() {
		f(ctx, c)
	}
}

func (c *Completion) emitApproval(ctx context.Context, req ApprovalRequest) {
	for _, f := range c.onApproval.snapshot() {
		f(ctx, c, req)
	}
	for _, f := range c.svc.onApproval.snapshot() {
		f(ctx, c, req)
	}
}

// touch bumps the prompt revision and stamps the changed items with it.
func (c *Completion) touch(idx ...int) {
	c.p.Rev++
	c.p.UpdatedAt = c.svc.now()
	for _, i := range idx {
		c.p.Output[i].Rev = c.p.Rev
	}
}

// nextCall is the first call the loop still has to take a step on.
func (c *Completion) nextCall() int {
	for i := range c.p.Output {
		if call := c.p.Output[i].Call; call != nil && (call.Status == CallQueued || call.Status == CallApproved) {
			return i
		}
	}
	return -1
}

func (c *Completion) findCall(id string) int {
	for i := range c.p.Output {
		if call := c.p.Output[i].Call; call != nil && call.ID == id {
			return i
		}
	}
	return -1
}

func (c *Completion) findPending() int {
	for i := range c.p.Output {
		if call := c.p.Output[i].Call; call != nil && call.Status == CallPending {
			return i
		}
	}
	return -1
}

func rangeIdx(from, to int) []int {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	return idx
}

// CallInfo tells a tool about the call it serves.
type CallInfo struct {
	PromptID string
	CallID   string
	// Approved is true when a human approved this very call: a tool may
	// then do, once, what its gate would otherwise not allow.
	Approved   bool
	ApprovedBy string
}

type callKey struct{}

// ContextWithCall returns ctx carrying ci, as Invoke receives it; tools'
// tests use it to call Invoke directly.
func ContextWithCall(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, ci)
}

// CallFromContext returns the call a tool's Invoke serves.
func CallFromContext(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callKey{}).(CallInfo)
	return ci, ok
}

// safeGate and safeInvoke turn a tool's panic into an error result: one
// buggy tool, or one page that trips a parser, must not take the bot and
// every pending approval down with it.
func (c *Completion) safeGate(ctx context.Context, t *preparedTool, input json.RawMessage) (req Requirement, err error) {
	defer c.recoverTool(t.Name, "gate", &err)
	return t.Gate(ctx, input)
}

func (c *Completion) safeInvoke(ctx context.Context, t *preparedTool, input json.RawMessage) (out string, err error) {
	defer c.recoverTool(t.Name, "invoke", &err)
	return t.Invoke(ctx, input)
}

func (c *Completion) recoverTool(name, stage string, err *error) {
	if r := recover(); r != nil {
		c.svc.log.Error("tool panicked", "tool", name, "stage", stage, "panic", r, "stack", string(debug.Stack()))
		*err = fmt.Errorf("the tool %s failed with an internal error", name)
	}
}
