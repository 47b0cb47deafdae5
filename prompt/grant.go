package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNoGrant means the call's tool offers no "always": its approval is a
// grant already (the web-fetch add-domain tool), or the tool is gone.
var ErrNoGrant = errors.New("no grant offered")

// Scope is what an "always" approval of a call covers: every later call
// of the same tool whose scope has the same Key.
type Scope struct {
	// Key is compared exactly; the tool chooses it (web-fetch: the URL's
	// host). Without a Scope func it is the call's exact canonical input.
	Key string
	// Label says what it covers, for the person choosing: "fetches from
	// example.com".
	Label string
}

// Grant lets calls run without asking: a person chose "always" on a
// request, for one chat or all, for a while or until revoked.
type Grant struct {
	ID    string `json:"id"`
	Tool  string `json:"tool"`
	Scope string `json:"scope"` // Scope.Key
	Label string `json:"label"` // Scope.Label
	// ConversationID is the chat it covers; empty: every chat.
	ConversationID string    `json:"conversation_id,omitempty"`
	By             string    `json:"by"`
	CreatedAt      time.Time `json:"created_at"`
	// ExpiresAt is when it lapses; zero: when revoked.
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	ApprovalID string    `json:"approval_id"` // the request it was chosen on
	RevokedBy  string    `json:"revoked_by,omitempty"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
}

// GrantSpec is the choice a person makes under "Always…".
type GrantSpec struct {
	AllChats bool
	// For is how long the grant lasts; zero: until revoked.
	For time.Duration
}

// exactScope is the scope of a tool that names none: this input, exactly.
func exactScope(input string) Scope {
	h := InputHash(input)
	return Scope{Key: "input:" + h, Label: "exactly this input (hash " + h[:12] + ")"}
}

// scopeOf returns what an "always" for a call of t with input would
// cover, and false if t offers none.
func scopeOf(t *preparedTool, input string) (Scope, bool, error) {
	if t == nil || t.NoGrants {
		return Scope{}, false, nil
	}
	if t.Scope == nil {
		return exactScope(input), true, nil
	}
	sc, err := t.Scope(json.RawMessage(input))
	if err != nil {
		return Scope{}, false, fmt.Errorf("scope of %s: %w", t.Name, err)
	}
	if sc.Key == "" {
		return Scope{}, false, fmt.Errorf("scope of %s: empty key", t.Name)
	}
	return sc, true, nil
}

// ApproveAlways approves the call of approval approvalID as Approve does
// and, in the same transaction, records a grant of spec over the call's
// scope, so that later calls it covers run without asking. Returns
// ErrNoGrant if the tool offers no "always", or if the service needs a
// quorum of approvals (a grant would let one person approve for many
// later calls what takes several to approve once), and the errors of
// Approve.
func (s *Service) ApproveAlways(ctx context.Context, approvalID, by string, spec GrantSpec) (Grant, error) {
	if spec.For < 0 {
		return Grant{}, fmt.Errorf("approve always %s: negative duration", approvalID)
	}
	if s.quorum > 1 {
		return Grant{}, fmt.Errorf("approve always %s: a quorum of %d approvals: %w", approvalID, s.quorum, ErrNoGrant)
	}
	req, ref, err := s.Request(ctx, approvalID)
	if err != nil {
		return Grant{}, fmt.Errorf("approve always %s: %w", approvalID, err)
	}
	if ref.Status != ApprovalPending {
		return Grant{}, fmt.Errorf("approve always %s: it is %s: %w", approvalID, ref.Status, ErrNotPending)
	}
	if req.Scope == nil {
		return Grant{}, fmt.Errorf("approve always %s: %s: %w", approvalID, req.ToolName, ErrNoGrant)
	}
	now := s.now()
	g := Grant{
		ID: "g" + randomID(10), Tool: req.ToolName, Scope: req.Scope.Key, Label: req.Scope.Label,
		By: by, CreatedAt: now, ApprovalID: approvalID,
	}
	if !spec.AllChats {
		g.ConversationID = req.ConversationID
	}
	if spec.For > 0 {
		g.ExpiresAt = now.Add(spec.For)
	}
	err = s.decide(ctx, approvalID, Decision{Status: ApprovalApproved, By: by, At: now, Note: GrantNote(g), Grant: &g})
	if err != nil {
		return Grant{}, err
	}
	return g, nil
}

// GrantNote says what a grant covers, where and for how long, in one
// line: "and from now on: fetches from example.com, in this chat, until
// 2026-11-24 15:04 UTC".
func GrantNote(g Grant) string {
	return "and from now on: " + g.Label + ", in " + g.Where() + ", " + g.Until()
}

// Where says which chats g covers: "this chat" or "every chat".
func (g Grant) Where() string {
	if g.ConversationID == "" {
		return "every chat"
	}
	return "this chat"
}

// Until says how long g lasts: "until revoked", or "until" and its
// expiry in UTC to the minute.
func (g Grant) Until() string {
	if g.ExpiresAt.IsZero() {
		return "until revoked"
	}
	return "until " + g.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
}

// Grants returns the grants in force for conversationID: its own and
// those for every chat, newest first.
func (s *Service) Grants(ctx context.Context, conversationID string) ([]Grant, error) {
	gs, err := s.store.Grants(ctx, conversationID, s.now())
	if err != nil {
		return nil, fmt.Errorf("grants of %s: %w", conversationID, err)
	}
	return gs, nil
}

// Revoke ends grant id, seen from conversationID: calls it covered ask
// again. Returns ErrNotFound if no grant in force there has that ID.
func (s *Service) Revoke(ctx context.Context, conversationID, id, by string) (Grant, error) {
	gs, err := s.Grants(ctx, conversationID)
	if err != nil {
		return Grant{}, err
	}
	found := false
	for _, g := range gs {
		found = found || g.ID == id
	}
	if !found {
		return Grant{}, fmt.Errorf("revoke grant %s: %w", id, ErrNotFound)
	}
	g, err := s.store.RevokeGrant(ctx, id, by, s.now())
	if err != nil {
		return Grant{}, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	s.log.Info("grant revoked", "grant", id, "tool", g.Tool, "by", by)
	return g, nil
}

// granted returns the grant that lets call c of t run without asking in
// p's conversation, if one is in force. A store failure asks rather than
// runs.
func (r *run) granted(ctx context.Context, t *preparedTool, c *Call) *Grant {
	if c.Edit != nil {
		return nil // an edited call is approved on its own
	}
	sc, ok, err := scopeOf(t, c.Input())
	if err != nil {
		r.s.log.Warn("no grant looked up", "tool", t.Name, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	g, err := r.s.store.FindGrant(sctx, r.p.ConversationID, t.Name, sc.Key, r.s.now())
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		r.s.log.Error("look up grants; asking instead", "prompt", r.p.ID, "err", err)
		return nil
	}
	return &g
}

// GrantedCall is a call a grant let run without asking.
type GrantedCall struct {
	PromptID       string
	ConversationID string
	CallID         string
	ToolName       string
	Input          string
	Grant          Grant
}

// GrantedCall returns call callID of prompt promptID and the grant that let
// it run, for the line that tells the chat. Returns ErrNotFound if there
// is no such call or no grant ran it.
func (s *Service) GrantedCall(ctx context.Context, promptID, callID string) (GrantedCall, error) {
	p, err := s.store.LoadPrompt(ctx, promptID)
	if err != nil {
		return GrantedCall{}, fmt.Errorf("granted call %s: %w", callID, err)
	}
	i := findCall(p, callID)
	if i < 0 || p.Output[i].Call.Grant == nil {
		return GrantedCall{}, fmt.Errorf("granted call %s of %s: %w", callID, promptID, ErrNotFound)
	}
	c := p.Output[i].Call
	return GrantedCall{PromptID: p.ID, ConversationID: p.ConversationID, CallID: c.ID, ToolName: c.Name,
		Input: c.Input(), Grant: *c.Grant}, nil
}
