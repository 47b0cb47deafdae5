package prompt

import "time"

// State is where a prompt is in its life.
type State string

// The states of a prompt. Completed and failed are final.
const (
	StateRunning   State = "running"
	StateWaiting   State = "waiting_for_approval"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
)

// Final reports whether no further change can happen to a prompt in state s.
func (s State) Final() bool { return s == StateCompleted || s == StateFailed }

// ItemType tells the kinds of output item apart.
type ItemType string

// The kinds of output item.
const (
	ItemText ItemType = "text" // assistant text
	ItemTool ItemType = "tool" // a tool call with its status and result
)

// CallStatus is the life of one tool call (see docs/design.md):
//
//	queued ─► executing ─► done
//	queued ─► pending ─► approved ─► executing ─► done
//	                 └─► rejected
//
// A call found executing after a restart becomes interrupted: it may have
// run, so it is never run again.
type CallStatus string

// The statuses of a tool call.
const (
	CallQueued      CallStatus = "queued"
	CallPending     CallStatus = "pending"
	CallApproved    CallStatus = "approved"
	CallRejected    CallStatus = "rejected"
	CallExecuting   CallStatus = "executing"
	CallDone        CallStatus = "done"
	CallInterrupted CallStatus = "interrupted"
)

// ApprovalStatus is where a human decision stands. Only a decision moves an
// approval off pending, as a compare-and-set in the store; an approval
// whose prompt ended without a decision is expired.
type ApprovalStatus string

// The statuses of an approval.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
	// ApprovalEdited: a human changed the call's input instead of
	// deciding it; the edited call asks again under a new approval.
	ApprovalEdited ApprovalStatus = "edited"
)

// ResultType tells the kinds of tool result apart.
type ResultType string

// The kinds of tool result.
const (
	ResultSuccess ResultType = "success"
	ResultError   ResultType = "error"
	ResultPending ResultType = "pending"
)

// InterruptedError is the result a call gets when the process died while it
// ran: it may or may not have had its effect, so it is never run again.
const InterruptedError = "interrupted before a result was recorded: outcome unknown"

// Prompt is one user input and everything the agent did for it. It holds
// all that is needed to resume, and it round-trips through JSON, so a
// completion can be rebuilt from storage alone.
type Prompt struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	State          State  `json:"state"`
	Input          string `json:"input"`
	Output         []Item `json:"output"`
	Error          string `json:"error,omitempty"` // why it failed, safe to show the user
	Turns          int    `json:"turns"`           // model calls made so far
	// CancelledBy is set by Cancel; the next step ends the prompt.
	CancelledBy string `json:"cancelled_by,omitempty"`
	// Author identifies the person whose message started the prompt (a
	// Telegram user ID); empty if unknown.
	Author string `json:"author,omitempty"`
	// Rev is the stored revision: every save is a compare-and-set from Rev
	// to Rev+1, so of two writers that loaded the same revision one loses.
	Rev       int64     `json:"rev"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Item is one entry of a prompt's ordered output.
type Item struct {
	Type ItemType `json:"type"`
	// Turn is the model turn that produced the item; items of one turn form
	// one assistant message.
	Turn int    `json:"turn"`
	Text string `json:"text,omitempty"` // ItemText
	Call *Call  `json:"call,omitempty"` // ItemTool
}

// Call is a tool call as the model asked for it, with its progress.
type Call struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the argument text exactly as the model sent it; it is
	// kept raw because it may not even be valid JSON.
	Arguments string     `json:"arguments"`
	Status    CallStatus `json:"status"`
	Approval  *Approval  `json:"approval,omitempty"` // set once a gate asked for a human
	Result    *Result    `json:"result,omitempty"`   // nil while queued, approved or executing
	// Edit is set when a human changed the input before approving: what
	// runs is Edit.Arguments, and the model is told so with the result.
	Edit *Edit `json:"edit,omitempty"`
	// Grant is set when a grant let the call run without asking.
	Grant *Grant `json:"grant,omitempty"`
	// Ruling is set when the call was allowed or denied without asking a
	// person: by a rule, a grant or the mode.
	Ruling *Ruling `json:"ruling,omitempty"`
	// Preview, PreviewName and Expect are the gate's, kept with the
	// request (see Requirement): shown with it, and handed to the tool
	// when the approved call runs.
	Preview     string `json:"preview,omitempty"`
	PreviewName string `json:"preview_name,omitempty"`
	Expect      string `json:"expect,omitempty"`
}

// Input is the argument text the call runs with: the edited one, if a
// human edited it, else the model's.
func (c *Call) Input() string {
	if c.Edit != nil {
		return c.Edit.Arguments
	}
	return c.Arguments
}

// Edit is a human's change to a call's input, made instead of a decision.
type Edit struct {
	Arguments string    `json:"arguments"` // compact JSON, validated against the tool's schema
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	// ApprovalID is the request the edit closed.
	ApprovalID string `json:"approval_id"`
}

// Approval is the human side of a gated call.
type Approval struct {
	// ID is short (16 characters) and random: it travels in chat buttons, so
	// it must not be guessable and must not reveal the call.
	ID          string         `json:"id"`
	Status      ApprovalStatus `json:"status"`
	Reason      string         `json:"reason"`
	RequestedAt time.Time      `json:"requested_at"`
	// InputHash is InputHash of the arguments the request showed; the call
	// runs only if its arguments still hash the same.
	InputHash string `json:"input_hash,omitempty"`
	// ExpiresAt is when the request expires undecided; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// RemindAt is when the request is shown once more if still pending;
	// zero: never, or already reminded.
	RemindAt  time.Time `json:"remind_at,omitzero"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Note      string    `json:"note,omitempty"` // the reject reason, or why it ended without a decision
	// EditedInput is the input a human gave instead, when Status is edited.
	EditedInput string `json:"edited_input,omitempty"`
}

// Result is the outcome of a tool call as the model sees it.
type Result struct {
	Type   ResultType `json:"type"`
	Output string     `json:"output,omitempty"` // success
	Error  string     `json:"error,omitempty"`  // error
	Reason string     `json:"reason,omitempty"` // pending
}

// FinalText is the assistant text of the last model turn: the answer.
func (p *Prompt) FinalText() string {
	var text string
	last := -1
	for _, it := range p.Output {
		if it.Type != ItemText {
			continue
		}
		if it.Turn != last {
			text, last = it.Text, it.Turn
		} else {
			text += "\n" + it.Text
		}
	}
	return text
}

// Clone returns a deep copy of p, safe to keep and change.
func (p *Prompt) Clone() *Prompt {
	c := *p
	c.Output = make([]Item, len(p.Output))
	for i, it := range p.Output {
		if it.Call != nil {
			call := *it.Call
			if call.Approval != nil {
				a := *call.Approval
				call.Approval = &a
			}
			if call.Result != nil {
				r := *call.Result
				call.Result = &r
			}
			if call.Edit != nil {
				e := *call.Edit
				call.Edit = &e
			}
			if call.Grant != nil {
				g := *call.Grant
				call.Grant = &g
			}
			if call.Ruling != nil {
				rl := *call.Ruling
				call.Ruling = &rl
			}
			it.Call = &call
		}
		c.Output[i] = it
	}
	return &c
}
