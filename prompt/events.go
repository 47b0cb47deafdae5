package prompt

import (
	"context"
	"encoding/json"
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
	// Queued are the calls of the same batch that run after this one, in
	// order, once it is decided.
	Queued []ToolCall
}

// Listener is told of a change to a completion after it was saved.
type Listener func(ctx context.Context, c *Completion)

// ApprovalListener is told that a completion waits for a human.
type ApprovalListener func(ctx context.Context, c *Completion, req ApprovalRequest)

// listeners is a registration-ordered list, safe for concurrent use.
type listeners[F any] struct {
	mu  sync.Mutex
	fns []F
}

func (l *listeners[F]) add(f F) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fns = append(l.fns, f)
}

// snapshot lets emitters call listeners without holding the lock, so a
// listener may register another.
func (l *listeners[F]) snapshot() []F {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]F(nil), l.fns...)
}
