// Package prompttest holds fakes for testing code built on package prompt.
package prompttest

import (
	"context"
	"fmt"
	"sync"

	"tollgate/prompt"
)

// Step is one scripted model turn: a response, or an error.
type Step struct {
	Text      string
	ToolCalls []prompt.ToolCall
	Err       error
	// Check, when set, inspects the request of this turn; its error fails
	// the turn, so a test sees what the model was shown.
	Check func(req prompt.Request) error
}

// Model answers with its steps in order and records every request. It
// fails a turn past the end of the script. Safe for concurrent use.
type Model struct {
	mu       sync.Mutex
	steps    []Step
	requests []prompt.Request
}

var _ prompt.Model = (*Model)(nil)

// NewModel returns a model that plays steps in order.
func NewModel(steps ...Step) *Model { return &Model{steps: steps} }

// Add appends steps to the script.
func (m *Model) Add(steps ...Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, steps...)
}

// Complete implements prompt.Model.
func (m *Model) Complete(ctx context.Context, req prompt.Request) (prompt.Response, error) {
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	var step Step
	ok := n < len(m.steps)
	if ok {
		step = m.steps[n]
	}
	m.mu.Unlock()
	if !ok {
		return prompt.Response{}, fmt.Errorf("scripted model: no step %d", n+1)
	}
	if step.Check != nil {
		if err := step.Check(req); err != nil {
			return prompt.Response{}, fmt.Errorf("scripted model: step %d: %w", n+1, err)
		}
	}
	if step.Err != nil {
		return prompt.Response{}, step.Err
	}
	return prompt.Response{Text: step.Text, ToolCalls: step.ToolCalls}, nil
}

// Requests returns the requests seen so far.
func (m *Model) Requests() []prompt.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]prompt.Request(nil), m.requests...)
}

// Calls is a convenience for a step that asks for tool calls.
func Calls(calls ...prompt.ToolCall) Step { return Step{ToolCalls: calls} }

// Call builds a tool call.
func Call(id, name, args string) prompt.ToolCall {
	return prompt.ToolCall{ID: id, Name: name, Arguments: args}
}

// Answer is a final text step.
func Answer(text string) Step { return Step{Text: text} }
