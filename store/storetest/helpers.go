package storetest

import (
	"time"

	"tollgate/prompt"
)

// T0 is the time the suite's hand-built records start at: not UTC and
// with nanoseconds, so a store that loses either is caught.
var T0 = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))

// GatedPrompt is a prompt waiting on call "c1", built by hand as the
// service would leave it, at revision 1 so CreatePrompt can insert it.
func GatedPrompt(id, conv, approvalID string) *prompt.Prompt {
	return &prompt.Prompt{
		ID: id, ConversationID: conv, State: prompt.StateWaiting, Input: "delete the logs",
		Turns: 1, Rev: 1, CreatedAt: T0, UpdatedAt: T0.Add(time.Second),
		Output: []prompt.Item{
			{Type: prompt.ItemText, Turn: 1, Text: "I will delete them."},
			{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
				ID: "c1", Name: "shell.run", Arguments: `{"cmd": "rm -rf /var/log/x"}`,
				Status: prompt.CallPending,
				Approval: &prompt.Approval{ID: approvalID, Status: prompt.ApprovalPending, Reason: "runs a shell command",
					RequestedAt: T0.Add(time.Second)},
				Result: &prompt.Result{Type: prompt.ResultPending, Reason: "runs a shell command"},
			}},
			{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
				ID: "c2", Name: "web.fetch", Arguments: `{"url":"https://example.com"}`, Status: prompt.CallQueued,
			}},
		},
	}
}

// InUTC returns a copy of p with every time in UTC and without a
// monotonic reading, as the store returns them.
func InUTC(p *prompt.Prompt) *prompt.Prompt {
	q := p.Clone()
	if p.Output == nil {
		q.Output = nil // Clone makes an empty slice; the store returns none
	}
	q.CreatedAt, q.UpdatedAt = q.CreatedAt.UTC(), q.UpdatedAt.UTC()
	for _, it := range q.Output {
		if it.Call != nil && it.Call.Approval != nil {
			a := it.Call.Approval
			a.RequestedAt = a.RequestedAt.UTC()
			if !a.DecidedAt.IsZero() {
				a.DecidedAt = a.DecidedAt.UTC()
			}
		}
	}
	return q
}
