package prompt

import (
	"context"
	"errors"
	"time"
)

// Errors returned by the service and by stores.
var (
	// ErrNotPending means the approval was already decided (or the prompt
	// already ended): a caller can say "already decided".
	ErrNotPending = errors.New("not pending")
	// ErrNotFound means the store holds no such record.
	ErrNotFound = errors.New("not found")
	// ErrBusy means the conversation already has a prompt running or waiting.
	ErrBusy = errors.New("conversation busy")
	// ErrClosed means the service is shutting down and takes no new work.
	ErrClosed = errors.New("service closed")
	// ErrExists means a prompt with that ID was created already.
	ErrExists = errors.New("already exists")
	// ErrConflict means a save lost its compare-and-set: the stored prompt
	// is no longer at the revision the save started from, because someone
	// else (a decision, a cancel, another process) moved it on.
	ErrConflict = errors.New("revision conflict")
	// ErrAlreadyVoted means the person approved that request already: under
	// a quorum, approvals must come from different people.
	ErrAlreadyVoted = errors.New("already voted")
)

// ApprovalRef locates an approval and tells where it stands.
type ApprovalRef struct {
	ID             string
	PromptID       string
	ConversationID string
	CallID         string
	Status         ApprovalStatus
	DecidedBy      string    // empty while pending
	DecidedAt      time.Time // zero while pending
	Note           string
	// What the request showed: enough to rebuild a request the call has
	// left behind (an edited one).
	ToolName    string
	Input       string
	Reason      string
	InputHash   string
	RequestedAt time.Time
	// Author is the person whose message started the prompt (Prompt.Author).
	Author string
	// Votes names who approved so far under a quorum, in order.
	Votes []string
}

// Decision is what a human (or the end of a prompt) says of an approval.
type Decision struct {
	Status ApprovalStatus // approved, rejected or expired
	By     string
	At     time.Time
	Note   string // the reject reason, or why it ended without a decision
	// Grant, with an approval, is recorded in the same transaction: the
	// person chose "always".
	Grant *Grant
	// Input, with an edit, is the input the person gave instead.
	Input string
}

// Cursor pages through a listing. The zero Cursor starts one; a store
// fills it in with positions only it reads, and with the end of the
// listing as it stood at the first page, so that a listing taken at a
// restart never runs into what was added after it.
type Cursor struct {
	After, Bound int64
}

// Store keeps prompts. It is the truth: the service holds no prompt in
// memory longer than one worker advances it, and every change is a
// compare-and-set on the stored revision. Implementations must be safe for
// concurrent use and must not keep the *Prompt they are given.
type Store interface {
	// CreatePrompt inserts p, a new running prompt. Returns ErrExists if
	// a prompt with p's ID exists (checked first), ErrBusy if p's
	// conversation already has a prompt running or waiting.
	CreatePrompt(ctx context.Context, p *Prompt) error
	// LoadPrompt returns prompt id with the approvals of its calls, or
	// ErrNotFound.
	LoadPrompt(ctx context.Context, id string) (*Prompt, error)
	// ActivePrompt returns the conversation's prompt that is running or
	// waiting, or ErrNotFound.
	ActivePrompt(ctx context.Context, conversationID string) (*Prompt, error)
	// SavePrompt writes p as revision p.Rev over the stored revision
	// p.Rev-1: the prompt's own fields and the items at the indexes in
	// changed (with their calls' approvals; a new approval is inserted
	// pending, and a stored one only changes its note, or from pending to
	// expired), and records notices in the outbox, all in one transaction.
	// Returns ErrConflict, writing nothing, if the stored revision is not
	// p.Rev-1.
	SavePrompt(ctx context.Context, p *Prompt, changed []int, notices ...Notice) error
	// Decide records d on approval id if it is still pending (an edit
	// keeps d.Input as the approval's EditedInput), with d.Grant if set,
	// and in the same transaction marks its prompt running at the next
	// revision, so that the prompt's next step sees the decision, and
	// records a NoticeDecided for it. Returns the approval as it now stands;
	// ErrNotPending (with the ref of where it stands) if it was not
	// pending, ErrNotFound if there is no such approval.
	Decide(ctx context.Context, id string, d Decision) (ApprovalRef, error)
	// Vote records that the person voterID (shown as by) approves approval
	// id, if it is still pending, and counts the approvals: at quorum it
	// decides the approval approved as Decide does (By naming every voter,
	// in order: "Alice (1), Bob (2)"), below it records a NoticeVotes so
	// every copy shows who approved so far; all in one transaction.
	// Returns the approval as it now stands, with its Votes;
	// ErrAlreadyVoted if that person voted on it already, ErrNotPending if
	// it was not pending, ErrNotFound if there is no such approval.
	Vote(ctx context.Context, id, voterID, by string, at time.Time, quorum int) (ApprovalRef, error)
	// CancelPrompt records that by cancelled prompt id: it rejects the
	// prompt's pending approval (note "cancelled", with a NoticeDecided)
	// and marks the prompt running at the next revision, for its next step
	// to end it. Returns ErrNotPending if the prompt already ended,
	// ErrNotFound if there is no such prompt.
	CancelPrompt(ctx context.Context, id, by string, at time.Time) error
	// ResendWaiting records a NoticeRequest, marked as a re-send, for
	// every approval still pending that has none undelivered, so that a
	// restart shows every waiting request again, once. It returns how many
	// it recorded.
	ResendWaiting(ctx context.Context) (int, error)
	// RunningPrompts returns up to limit IDs of running prompts, oldest
	// first, from cur on, and the cursor of the next page (its Bound is
	// kept from the first page).
	RunningPrompts(ctx context.Context, cur Cursor, limit int) ([]string, Cursor, error)
	// History returns up to limit of the latest prompts of conversationID
	// created before prompt beforeID (all of them, if beforeID is ""),
	// oldest first. Returns ErrNotFound if beforeID is not a prompt of
	// that conversation.
	History(ctx context.Context, conversationID, beforeID string, limit int) ([]*Prompt, error)
	// NextDeadline returns the earliest ExpiresAt or RemindAt among the
	// pending approvals, and false if none has one.
	NextDeadline(ctx context.Context) (time.Time, bool, error)
	// DueApprovals returns the pending approvals whose ExpiresAt, and
	// those whose RemindAt, is at or before now.
	DueApprovals(ctx context.Context, now time.Time) (expired, remind []ApprovalRef, err error)
	// Remind clears approval id's RemindAt and, if it is still pending,
	// records a NoticeRequest re-send for it, in one transaction. It
	// reports whether it recorded one.
	Remind(ctx context.Context, id string) (bool, error)
	// FindApproval returns the approval with the given ID, or ErrNotFound.
	FindApproval(ctx context.Context, approvalID string) (ApprovalRef, error)

	// FindGrant returns the newest grant in force at now for tool and
	// scope in conversationID (its own, or one for every chat), or
	// ErrNotFound.
	FindGrant(ctx context.Context, conversationID, tool, scope string, now time.Time) (Grant, error)
	// Grants returns the grants in force at now in conversationID (its
	// own and those for every chat), newest first.
	Grants(ctx context.Context, conversationID string, now time.Time) ([]Grant, error)
	// RevokeGrant ends grant id and returns it as revoked. Returns
	// ErrNotFound if there is no such grant, ErrNotPending if it was
	// revoked already.
	RevokeGrant(ctx context.Context, id, by string, at time.Time) (Grant, error)

	// Audit returns the audit entries q selects, newest first. The
	// writers record them in the transaction of the decision itself:
	// Decide one as DecisionAudit says; CancelPrompt one "cancelled" by
	// the person for each approval it rejects; SavePrompt one for each
	// changed item whose call has a Ruling (once per call: saving it again
	// records nothing) and one "expired" (SourceSystem, the note as
	// feedback) for each approval it moves from pending to expired.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}
