package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// saveTimeout bounds a save or load a step makes.
const saveTimeout = 5 * time.Second

// maxConflicts bounds how often one change is applied again after losing
// the compare-and-set; past it the store is taken to be failing.
const maxConflicts = 20

// A change is one transition of a prompt: it edits p in place and returns
// the indexes of the items it changed, or false when p (as freshly loaded)
// no longer allows it.
type change func(p *Prompt) (changed []int, ok bool)

// commit applies ch to a copy of p and saves it as the next revision. When
// the save loses the compare-and-set (someone else moved the prompt on),
// it loads the prompt again and applies ch to that, for as long as ch
// still applies. The notices the transition obliges (see noticesOf) are
// saved with it. It returns the prompt as now stored, those notices, and
// whether ch was saved. Nothing is undone by hand: a failed save leaves p
// untouched.
func (s *Service) commit(ctx context.Context, p *Prompt, ch change) (*Prompt, []Notice, bool, error) {
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	for range maxConflicts {
		q := p.Clone()
		changed, ok := ch(q)
		if !ok {
			return p, nil, false, nil
		}
		q.Rev++
		q.UpdatedAt = s.now()
		notices := noticesOf(p, q)
		err := s.store.SavePrompt(sctx, q, changed, notices...)
		if err == nil {
			return q, notices, true, nil
		}
		if !errors.Is(err, ErrConflict) {
			return p, nil, false, fmt.Errorf("save prompt %s: %w", p.ID, err)
		}
		if p, err = s.store.LoadPrompt(sctx, p.ID); err != nil {
			return nil, nil, false, fmt.Errorf("reload prompt after a conflict: %w", err)
		}
	}
	return p, nil, false, fmt.Errorf("save prompt %s: %d conflicts in a row: %w", p.ID, maxConflicts, ErrConflict)
}

// noticesOf says what the move from before to after obliges Tollgate to
// tell the conversation: a request when the prompt starts waiting, the
// outcome of every approval that expired, and the answer when it ends.
func noticesOf(before, after *Prompt) []Notice {
	var ns []Notice
	mk := func(k NoticeKind, approvalID string) {
		ns = append(ns, Notice{Kind: k, ConversationID: after.ConversationID, PromptID: after.ID, ApprovalID: approvalID})
	}
	if after.State == StateWaiting && before.State != StateWaiting {
		if req, ok := after.PendingRequest(); ok {
			mk(NoticeRequest, req.ApprovalID)
		}
	}
	for _, it := range after.Output {
		c := it.Call
		if c == nil || c.Approval == nil || c.Approval.Status != ApprovalExpired {
			continue
		}
		if j := findCall(before, c.ID); j < 0 || before.Output[j].Call.Approval == nil ||
			before.Output[j].Call.Approval.Status != ApprovalExpired {
			mk(NoticeDecided, c.Approval.ID)
		}
	}
	for _, it := range after.Output {
		c := it.Call
		if c == nil || c.Grant == nil {
			continue
		}
		if j := findCall(before, c.ID); j < 0 || before.Output[j].Call.Grant == nil {
			ns = append(ns, Notice{Kind: NoticeGranted, ConversationID: after.ConversationID, PromptID: after.ID, CallID: c.ID})
		}
	}
	if after.State.Final() && !before.State.Final() {
		mk(NoticeAnswer, "")
	}
	return ns
}

// advance takes prompt id through its steps until it pauses, ends, ctx
// is cut by shutdown, or the pass's lease h lapses. Each step loads
// nothing new unless its save lost the compare-and-set: the worker's copy
// is the cache. It reports whether the prompt was left paused.
func (s *Service) advance(ctx context.Context, h *hold, id string) (paused bool) {
	lctx, cancel := storeCtx(ctx)
	p, err := s.store.LoadPrompt(lctx, id)
	cancel()
	if err != nil {
		s.log.Error("load prompt", "prompt", id, "err", err)
		return false
	}
	if p.State != StateRunning {
		return false
	}
	act := Activity{PromptID: p.ID, ConversationID: p.ConversationID, Working: true}
	s.onActivity.emit(context.WithoutCancel(ctx), act)
	defer func() {
		act.Working = false
		s.onActivity.emit(context.WithoutCancel(ctx), act)
	}()
	r := &run{s: s, p: p}
	defer func() { paused = r.p.State == StateWaiting }()
	for r.p.State == StateRunning && !shutdown(ctx) && h.holds() {
		if !r.step(ctx) {
			return
		}
	}
	return
}

// run is one worker's pass over a prompt.
type run struct {
	s       *Service
	p       *Prompt
	history []*Prompt
	loaded  bool // history
}

// step takes one transition and reports whether the pass goes on.
func (r *run) step(ctx context.Context) bool {
	s := r.s
	if len(decided(r.p)) > 0 {
		return r.save(ctx, settle)
	}
	if r.p.CancelledBy != "" {
		return r.end(ctx, StateFailed, "Cancelled by "+r.p.CancelledBy+".")
	}
	if cancelled(ctx) {
		// The Cancel is in the store; take it from there.
		return r.reload(ctx)
	}
	if i := nextCall(r.p); i >= 0 {
		return r.runCall(ctx, i)
	}
	if r.p.Turns >= s.maxTurns {
		return r.end(ctx, StateFailed, fmt.Sprintf("Stopped after %d model turns without a final answer.", s.maxTurns))
	}
	return r.modelTurn(ctx)
}

// save commits ch, reports the change, and says whether the pass goes on.
func (r *run) save(ctx context.Context, ch change) bool {
	p, notices, ok, err := r.s.commit(ctx, r.p, ch)
	if err != nil {
		r.failSave(ctx, err)
		return false
	}
	r.p = p
	if ok {
		r.notify(ctx, notices)
	}
	return true
}

func (r *run) reload(ctx context.Context) bool {
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	p, err := r.s.store.LoadPrompt(sctx, r.p.ID)
	if err != nil {
		r.s.log.Error("reload prompt", "prompt", r.p.ID, "err", err)
		return false
	}
	r.p = p
	return true
}

// notify tells the listeners of the notices a saved change recorded.
func (r *run) notify(ctx context.Context, notices []Notice) {
	ctx = context.WithoutCancel(ctx)
	for _, n := range notices {
		switch n.Kind {
		case NoticeRequest:
			if req, ok := r.p.PendingRequest(); ok {
				r.s.onApproval.emit(ctx, r.s.describe(req))
			}
			r.s.watchDeadlines()
		case NoticeAnswer:
			r.s.log.Info("prompt ended", "prompt", r.p.ID, "state", r.p.State)
			r.s.onEnded.emit(ctx, answerOf(r.p))
		}
	}
	if len(notices) > 0 {
		r.s.onOutbox.emit(ctx, struct{}{})
	}
}

func (r *run) end(ctx context.Context, state State, why string) bool {
	r.save(ctx, func(p *Prompt) ([]int, bool) {
		if p.State.Final() {
			return nil, false
		}
		return endPrompt(p, state, why), true
	})
	return false
}

// failSave ends the prompt after a failed save: going on would act on
// state nobody could recover. If this save fails too, the stored state is
// older and a restart redoes from there.
func (r *run) failSave(ctx context.Context, err error) {
	s := r.s
	s.log.Error("save prompt", "prompt", r.p.ID, "err", err)
	p, notices, ok, err := s.commit(ctx, r.p, func(p *Prompt) ([]int, bool) {
		if p.State.Final() {
			return nil, false
		}
		return endPrompt(p, StateFailed, "Tollgate could not save this request, so it stopped."), true
	})
	if err != nil {
		s.log.Error("save ended prompt", "prompt", r.p.ID, "err", err)
		return
	}
	if ok {
		r.p = p
		r.notify(ctx, notices)
	}
}

// modelTurn asks the model for the next step and saves its answer.
func (r *run) modelTurn(ctx context.Context) bool {
	s := r.s
	if !r.loaded {
		hctx, cancel := storeCtx(ctx)
		h, err := s.store.History(hctx, r.p.ConversationID, r.p.ID, s.historyLimit)
		cancel()
		if err != nil {
			s.log.Error("read history", "prompt", r.p.ID, "err", err)
			return r.end(ctx, StateFailed, "Tollgate could not read this chat's earlier messages, so it stopped.")
		}
		r.history, r.loaded = h, true
	}
	turns := r.p.Turns
	// The answer belongs to this turn only while nothing moved the prompt on.
	sameTurn := func(p *Prompt) bool { return p.State == StateRunning && p.Turns == turns && p.CancelledBy == "" }
	req := Request{
		System:   s.system,
		Messages: Messages(append(r.history[:len(r.history):len(r.history)], r.p)...),
		Tools:    s.toolset().defs,
	}
	resp, err := s.model.Complete(ctx, req)
	switch {
	case shutdown(ctx):
		return false // nothing of the answer ran: the next start asks again
	case cancelled(ctx):
		return r.reload(ctx)
	case err != nil:
		s.log.Error("model turn", "prompt", r.p.ID, "err", err)
		return r.save(ctx, func(p *Prompt) ([]int, bool) {
			if !sameTurn(p) {
				return nil, false
			}
			return endPrompt(p, StateFailed, "The model failed: "+err.Error()), true
		})
	}
	return r.save(ctx, func(p *Prompt) ([]int, bool) {
		if !sameTurn(p) {
			return nil, false
		}
		p.Turns++
		first := len(p.Output)
		if resp.Text != "" {
			p.Output = append(p.Output, Item{Type: ItemText, Turn: p.Turns, Text: resp.Text})
		}
		for _, tc := range resp.ToolCalls {
			id := tc.ID
			if id == "" || findCall(p, id) >= 0 {
				// Some servers reuse or omit IDs; decisions need them unique.
				id = "call_" + randomID(8)
			}
			p.Output = append(p.Output, Item{Type: ItemTool, Turn: p.Turns, Call: &Call{
				ID: id, Name: tc.Name, Arguments: tc.Arguments, Status: CallQueued,
			}})
		}
		if len(resp.ToolCalls) == 0 {
			p.State = StateCompleted
		}
		return rangeIdx(first, len(p.Output)), true
	})
}

// runCall takes call i one step: validation, the gate, execution.
func (r *run) runCall(ctx context.Context, i int) bool {
	s := r.s
	call := r.p.Output[i].Call
	callID, from := call.ID, call.Status
	approved := from == CallApproved
	var approvedBy string
	if approved && call.Approval != nil {
		approvedBy = call.Approval.DecidedBy
	}
	tool, input, err := s.toolset().validate(call)
	if err != nil {
		return r.save(ctx, setResult(callID, from, &Result{Type: ResultError, Error: err.Error()}))
	}
	var ruling *Ruling
	var grant *Grant
	if !approved {
		j, err := r.judge(ctx, tool, call, input)
		switch {
		case shutdown(ctx):
			return false
		case cancelled(ctx):
			return r.reload(ctx)
		case err != nil:
			return r.save(ctx, setResult(callID, from, &Result{Type: ResultError, Error: "approval check failed: " + err.Error()}))
		case j.ask:
			return r.save(ctx, r.pause(callID, j.req))
		case j.ruling != nil && !j.ruling.Allowed:
			return r.save(ctx, denied(callID, from, j.ruling))
		case j.ruling != nil:
			// A rule, a grant or the mode stands in for a person's approval.
			ruling, grant = j.ruling, j.grant
			approved, approvedBy = true, ruling.By
		}
	}

	if from == CallApproved && call.Approval != nil && call.Approval.InputHash != "" && InputHash(call.Input()) != call.Approval.InputHash {
		// An edit, a bug or a tampered row: what would run is not what the
		// human saw.
		s.log.Error("approved input changed; not run", "prompt", r.p.ID, "call", callID, "approval", call.Approval.ID)
		return r.save(ctx, setResult(callID, from, &Result{Type: ResultError,
			Error: "not run: the input to run differs from the input that was approved"}))
	}

	// Saved before the tool runs: after a crash, executing means "may have
	// run" and is never run again.
	if ctx.Err() != nil {
		return !shutdown(ctx) && r.reload(ctx)
	}
	p, _, ok, err := s.commit(ctx, r.p, func(p *Prompt) ([]int, bool) {
		j := findCall(p, callID)
		if j < 0 || p.Output[j].Call.Status != from || p.CancelledBy != "" || p.State != StateRunning {
			return nil, false
		}
		p.Output[j].Call.Status = CallExecuting
		if grant != nil {
			g := *grant
			p.Output[j].Call.Grant = &g
		}
		if ruling != nil {
			rl := *ruling
			p.Output[j].Call.Ruling = &rl
		}
		return []int{j}, true
	})
	if err != nil {
		r.failSave(ctx, err)
		return false
	}
	r.p = p
	if !ok {
		return true // moved on meanwhile: look again
	}
	if ctx.Err() != nil {
		// Cut while executing was saved: the tool has not started. Put the
		// call back, so that the next start may run it (shutdown) or the
		// end records it as not run (Cancel).
		return r.save(ctx, setResult(callID, CallExecuting, nil, from)) && !shutdown(ctx)
	}
	info := CallInfo{PromptID: r.p.ID, CallID: callID, Approved: approved, ApprovedBy: approvedBy}
	if from == CallApproved {
		// What the person saw when approving; the tool checks it still holds.
		info.Expect = call.Expect
	}
	out, err := r.safeInvoke(ContextWithCall(ctx, info), tool, input)
	if shutdown(ctx) {
		// The stored executing status tells the next start that the
		// outcome is unknown.
		return false
	}
	res := &Result{Type: ResultSuccess, Output: out}
	if err != nil {
		res = &Result{Type: ResultError, Error: err.Error()}
	}
	return r.save(ctx, setResult(callID, CallExecuting, res))
}

// setResult moves call id from status from to done with res, or, when a
// status is given, to that status with no result.
func setResult(id string, from CallStatus, res *Result, to ...CallStatus) change {
	return func(p *Prompt) ([]int, bool) {
		j := findCall(p, id)
		if j < 0 || p.Output[j].Call.Status != from || p.State.Final() {
			return nil, false
		}
		c := p.Output[j].Call
		c.Status, c.Result = CallDone, res
		if len(to) > 0 {
			c.Status = to[0]
		}
		return []int{j}, true
	}
}

// denied records that a ruling refused call id, with its error result.
func denied(id string, from CallStatus, rl *Ruling) change {
	return func(p *Prompt) ([]int, bool) {
		j := findCall(p, id)
		if j < 0 || p.Output[j].Call.Status != from || p.State.Final() {
			return nil, false
		}
		c := p.Output[j].Call
		r := *rl
		c.Status, c.Result, c.Ruling = CallDone, &Result{Type: ResultError, Error: deniedText(rl)}, &r
		return []int{j}, true
	}
}

// pause saves call id as pending and the prompt as waiting.
func (r *run) pause(id string, req Requirement) change {
	reason := req.Reason
	now := r.s.now()
	approvalID := randomID(10)
	return func(p *Prompt) ([]int, bool) {
		j := findCall(p, id)
		if j < 0 || p.Output[j].Call.Status != CallQueued || p.CancelledBy != "" || p.State != StateRunning {
			return nil, false
		}
		c := p.Output[j].Call
		c.Status = CallPending
		c.Approval = &Approval{ID: approvalID, Status: ApprovalPending, Reason: reason, RequestedAt: now,
			InputHash: InputHash(c.Input())}
		if r.s.timeout > 0 {
			c.Approval.ExpiresAt = now.Add(r.s.timeout)
		}
		if r.s.remind > 0 && (r.s.timeout == 0 || r.s.remind < r.s.timeout) {
			c.Approval.RemindAt = now.Add(r.s.remind)
		}
		c.Result = &Result{Type: ResultPending, Reason: reason}
		c.Preview, c.PreviewName, c.Expect = req.Preview, req.PreviewName, req.Expect
		p.State = StateWaiting
		return []int{j}, true
	}
}

// endCancelled ends a prompt a Cancel marked, for a prompt no worker has
// here. A prompt another replica holds is left to it: its next step sees
// the Cancel.
func (s *Service) endCancelled(ctx context.Context, id string) {
	ctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	h, ok := s.take(ctx, id, cut)
	if !ok {
		return
	}
	defer h.release()
	sctx, cancel := storeCtx(ctx)
	p, err := s.store.LoadPrompt(sctx, id)
	cancel()
	if err != nil {
		s.log.Error("load cancelled prompt", "prompt", id, "err", err)
		return
	}
	r := &run{s: s, p: p}
	for r.p.State == StateRunning && r.p.CancelledBy != "" && h.holds() {
		if !r.step(ctx) {
			return
		}
	}
}

// decided lists the pending calls whose approval a human has decided.
func decided(p *Prompt) []int {
	var idx []int
	for i := range p.Output {
		c := p.Output[i].Call
		if c != nil && c.Status == CallPending && c.Approval != nil && c.Approval.Status != ApprovalPending {
			idx = append(idx, i)
		}
	}
	return idx
}

// settle applies the decisions stored on the approvals to their calls.
func settle(p *Prompt) ([]int, bool) {
	idx := decided(p)
	for _, i := range idx {
		c := p.Output[i].Call
		a := c.Approval
		switch a.Status {
		case ApprovalApproved:
			c.Status, c.Result = CallApproved, nil
		case ApprovalRejected:
			msg := RejectedPrefix
			if a.Note != "" {
				msg += ": " + a.Note
			}
			c.Status, c.Result = CallRejected, &Result{Type: ResultError, Error: msg}
		case ApprovalEdited:
			// The edited input asks again, under an approval of its own.
			c.Status, c.Result = CallQueued, nil
			c.Edit = &Edit{Arguments: a.EditedInput, By: a.DecidedBy, At: a.DecidedAt, ApprovalID: a.ID}
		default:
			// Expired: not a rejection; nobody decided in time.
			c.Status, c.Result = CallDone, &Result{Type: ResultError, Error: a.Note + ": not run"}
		}
	}
	return idx, len(idx) > 0
}

// endPrompt moves p to a final state; calls that were never run get an
// error result, and calls left executing an "outcome unknown" one, so the
// record reads true.
func endPrompt(p *Prompt, state State, why string) []int {
	p.State = state
	p.Error = why
	var changed []int
	for i := range p.Output {
		call := p.Output[i].Call
		if call == nil {
			continue
		}
		switch call.Status {
		case CallQueued, CallApproved, CallPending:
			if call.Status == CallPending && call.Approval != nil && call.Approval.Status == ApprovalPending {
				call.Approval.Status = ApprovalExpired
			}
			call.Status = CallDone
			call.Result = &Result{Type: ResultError, Error: "not run: " + why}
			if call.Approval != nil && call.Approval.Note == "" {
				// The approval is the audit trail: "approved, done" alone
				// would read as if the tool ran.
				call.Approval.Note = "not run: " + why
			}
			changed = append(changed, i)
		case CallExecuting:
			// The pass that ran it could not save its result (or a
			// shutdown cut it): it may have run, and an ended prompt is
			// never repaired, so say so now rather than "not run".
			call.Status = CallInterrupted
			call.Result = &Result{Type: ResultError, Error: InterruptedError}
			if call.Approval != nil && call.Approval.Note == "" {
				call.Approval.Note = InterruptedError
			}
			changed = append(changed, i)
		}
	}
	return changed
}

// nextCall is the first call the loop still has to take a step on.
func nextCall(p *Prompt) int {
	for i := range p.Output {
		if call := p.Output[i].Call; call != nil && (call.Status == CallQueued || call.Status == CallApproved) {
			return i
		}
	}
	return -1
}

func findCall(p *Prompt, id string) int {
	for i := range p.Output {
		if call := p.Output[i].Call; call != nil && call.ID == id {
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
	// Expect is the gate's Requirement.Expect from the request a person
	// approved; empty when nobody was asked.
	Expect string
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
func (r *run) safeGate(ctx context.Context, t *preparedTool, input json.RawMessage) (req Requirement, err error) {
	defer r.recoverTool(t.Name, "gate", &err)
	return t.Gate(ctx, input)
}

func (r *run) safeInvoke(ctx context.Context, t *preparedTool, input json.RawMessage) (out string, err error) {
	defer r.recoverTool(t.Name, "invoke", &err)
	return t.Invoke(ctx, input)
}

func (r *run) recoverTool(name, stage string, err *error) {
	if v := recover(); v != nil {
		r.s.log.Error("tool panicked", "tool", name, "stage", stage, "panic", v, "stack", string(debug.Stack()))
		*err = fmt.Errorf("the tool %s failed with an internal error", name)
	}
}
