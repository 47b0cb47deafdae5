package prompt

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// ApprovalRequest tells that a call waits for a human decision.
type ApprovalRequest struct {
	PromptID       string
	ConversationID string
	ApprovalID     string
	ToolCallID     string
	ToolName       string
	Input          json.RawMessage // validated JSON, as the model sent it
	Reason         string
	RequestedAt    time.Time
	// InputHash identifies the input shown, so two people comparing a
	// request can tell it is the same one (see prompt.InputHash).
	InputHash string
	// Queued are the calls of the same batch that run after this one, in
	// order, once it is decided.
	Queued []ToolCall
	// Scope is what "always" would cover; nil: the tool offers none.
	Scope *Scope
	// Edit is set when this request shows a call a human edited.
	Edit *Edit
	// Parts are the pieces of the call rules judge one by one (a shell
	// chain's commands), each marked with whether a rule allows it.
	Parts []ShownPart
	// Preview is what the call will do, to show whole (a diff), and
	// PreviewName its file name when attached.
	Preview, PreviewName string
	// Author is the person whose message started the prompt.
	Author string
	// Quorum is how many different people must approve (1: anyone
	// deciding decides); Votes names who approved so far.
	Quorum int
	Votes  []string
}

// NoticeKind says what a conversation must be told.
type NoticeKind string

// The kinds of notice.
const (
	// NoticeRequest: an approval waits; show the request with its buttons.
	NoticeRequest NoticeKind = "request"
	// NoticeDecided: an approval left pending (decided, cancelled or
	// expired); every copy of the request shows the outcome.
	NoticeDecided NoticeKind = "decided"
	// NoticeAnswer: the prompt ended; send its answer, or why it failed.
	NoticeAnswer NoticeKind = "answer"
	// NoticeGranted: a call ran without asking because a grant covers
	// it; one line says which.
	NoticeGranted NoticeKind = "granted"
	// NoticeVotes: an approval under a quorum got a vote and is still
	// pending; every copy of the request shows who approved so far.
	NoticeVotes NoticeKind = "votes"
)

// Notice is something a change obliges Tollgate to tell a conversation.
// The store records it in the same transaction as the change (an outbox),
// so a crash between the change and the telling loses nothing; a sender
// reads it back and delivers it.
type Notice struct {
	Kind           NoticeKind
	ConversationID string
	PromptID       string
	ApprovalID     string // for requests and decisions
	CallID         string // for grants used
}

// OutboxEntry is a notice as the outbox keeps it, for a sender.
type OutboxEntry struct {
	Notice
	Seq int64 // its place in the outbox; a conversation's are told in this order
	// Resend marks a request shown again after a restart: it goes after
	// the notices of changes made since.
	Resend   bool
	Attempts int // deliveries tried and held back so far
}

// Answer is how a prompt ended: its final text, or why it failed.
type Answer struct {
	PromptID       string
	ConversationID string
	State          State  // completed or failed
	Text           string // the model's final text, when completed
	Error          string // why it failed, safe to show the user
}

// Activity tells whether the agent is working on a prompt right now (a
// model turn or a tool), so a chat can show it is busy.
type Activity struct {
	PromptID       string
	ConversationID string
	Working        bool
}

// Status is where a conversation's active prompt stands.
type Status struct {
	PromptID string
	State    State
	// Author is the person whose message started the prompt.
	Author string
	// Pending is the request waiting for a human, when State is waiting.
	Pending *ApprovalRequest
}

// Created tells about a prompt Create saved.
type Created struct {
	PromptID string
	// Position is the prompt's place in the line for a worker: 0 when a
	// worker takes it at once, 1 when it is next, and so on.
	Position int
}

// listeners is a registration-ordered list, safe for concurrent use.
type listeners[T any] struct {
	mu  sync.Mutex
	fns []func(context.Context, T)
}

func (l *listeners[T]) add(f func(context.Context, T)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fns = append(l.fns, f)
}

// emit calls the listeners without holding the lock, so a listener may
// register another.
func (l *listeners[T]) emit(ctx context.Context, v T) {
	l.mu.Lock()
	fns := slices.Clone(l.fns)
	l.mu.Unlock()
	for _, f := range fns {
		f(ctx, v)
	}
}

// requestOf builds the request of call idx of p, which must be pending.
func requestOf(p *Prompt, idx int) ApprovalRequest {
	call := p.Output[idx].Call
	req := ApprovalRequest{
		PromptID:       p.ID,
		ConversationID: p.ConversationID,
		ApprovalID:     call.Approval.ID,
		ToolCallID:     call.ID,
		ToolName:       call.Name,
		Input:          json.RawMessage(call.Input()),
		Reason:         call.Approval.Reason,
		RequestedAt:    call.Approval.RequestedAt,
		InputHash:      call.Approval.InputHash,
		Edit:           call.Edit,
		Preview:        call.Preview,
		PreviewName:    call.PreviewName,
		Author:         p.Author,
	}
	for _, it := range p.Output[idx+1:] {
		if q := it.Call; q != nil && q.Status == CallQueued {
			req.Queued = append(req.Queued, ToolCall{ID: q.ID, Name: q.Name, Arguments: q.Input()})
		}
	}
	return req
}

// PendingRequest returns the request of the call waiting for a human, if
// any.
func (p *Prompt) PendingRequest() (ApprovalRequest, bool) {
	for i := range p.Output {
		if c := p.Output[i].Call; c != nil && c.Status == CallPending && c.Approval != nil &&
			c.Approval.Status == ApprovalPending {
			return requestOf(p, i), true
		}
	}
	return ApprovalRequest{}, false
}

func answerOf(p *Prompt) Answer {
	return Answer{PromptID: p.ID, ConversationID: p.ConversationID, State: p.State, Text: p.FinalText(), Error: p.Error}
}
