package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors returned by the service and by stores.
var (
	// ErrNotPending means the call was already decided (or never asked for
	// a decision): a caller can say "already decided".
	ErrNotPending = errors.New("not pending")
	// ErrUnknownCall means no call of that ID exists in the prompt.
	ErrUnknownCall = errors.New("unknown tool call")
	// ErrNotFound means the store holds no such record.
	ErrNotFound = errors.New("not found")
	// ErrBusy means the conversation already has a prompt running or waiting.
	ErrBusy = errors.New("conversation busy")
	// ErrClosed means the service is shutting down and takes no new work.
	ErrClosed = errors.New("service closed")
)

// ApprovalRef locates an approval and tells where it stands.
type ApprovalRef struct {
	ID             string
	PromptID       string
	ConversationID string
	CallID         string
	Status         CallStatus
	DecidedBy      string    // empty while pending
	DecidedAt      time.Time // zero while pending
}

// Store keeps prompts. The service saves before it tells anyone of a
// change, so whatever a listener reports is already durable.
// Implementations must be safe for concurrent use and must not keep the
// *Prompt they are given after returning.
type Store interface {
	// SavePrompt inserts or updates p. Only items whose Rev is above the
	// revision last stored need be written.
	SavePrompt(ctx context.Context, p *Prompt) error
	// DecideApproval saves p, in which call callID has just left pending,
	// as one compare-and-set on the stored approval: it writes only if that
	// approval is still pending, and returns ErrNotPending (writing nothing)
	// if it is not.
	DecideApproval(ctx context.Context, p *Prompt, callID string) error
	// UnfinishedPrompts returns every prompt running or waiting for
	// approval, oldest first.
	UnfinishedPrompts(ctx context.Context) ([]*Prompt, error)
	// History returns up to limit of the latest prompts of conversationID
	// created before prompt beforeID (all of them, if beforeID is ""),
	// oldest first. Returns ErrNotFound if beforeID is not a prompt of
	// that conversation.
	History(ctx context.Context, conversationID, beforeID string, limit int) ([]*Prompt, error)
	// FindApproval returns the approval with the given ID, or ErrNotFound.
	FindApproval(ctx context.Context, approvalID string) (ApprovalRef, error)
}

// MemStore is a Store in memory, for tests and for running without a
// database. It keeps JSON copies, so what it returns shares nothing with
// what was saved, as with a real database, and like one it refuses a
// save whose Rev is not above the stored one: it would overwrite newer
// state.
type MemStore struct {
	mu        sync.Mutex
	order     []string            // prompt IDs, oldest first
	byConv    map[string][]string // prompt IDs of a conversation, oldest first
	approvals map[string]string   // approval ID → prompt ID
	data      map[string][]byte
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{data: map[string][]byte{}, byConv: map[string][]string{}, approvals: map[string]string{}}
}

// SavePrompt implements Store.
func (m *MemStore) SavePrompt(ctx context.Context, p *Prompt) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode prompt %s: %w", p.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkRev(p); err != nil {
		return err
	}
	m.put(p, b)
	return nil
}

func (m *MemStore) checkRev(p *Prompt) error {
	b, ok := m.data[p.ID]
	if !ok {
		return nil
	}
	var stored struct {
		Rev int64 `json:"rev"`
	}
	if err := json.Unmarshal(b, &stored); err != nil {
		return fmt.Errorf("decode prompt %s: %w", p.ID, err)
	}
	if p.Rev <= stored.Rev {
		return fmt.Errorf("save prompt %s: revision %d is not above stored %d", p.ID, p.Rev, stored.Rev)
	}
	return nil
}

func (m *MemStore) put(p *Prompt, b []byte) {
	if _, ok := m.data[p.ID]; !ok {
		m.order = append(m.order, p.ID)
		m.byConv[p.ConversationID] = append(m.byConv[p.ConversationID], p.ID)
	}
	m.data[p.ID] = b
	for _, it := range p.Output {
		if it.Call != nil && it.Call.Approval != nil {
			m.approvals[it.Call.Approval.ID] = p.ID
		}
	}
}

// DecideApproval implements Store.
func (m *MemStore) DecideApproval(ctx context.Context, p *Prompt, callID string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode prompt %s: %w", p.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, err := m.load(p.ID)
	if err != nil {
		return err
	}
	var c *Call
	for _, it := range stored.Output {
		if it.Call != nil && it.Call.ID == callID {
			c = it.Call
		}
	}
	if c == nil {
		return fmt.Errorf("decide %s in prompt %s: %w", callID, p.ID, ErrUnknownCall)
	}
	if c.Status != CallPending {
		return fmt.Errorf("decide %s in prompt %s: %w", callID, p.ID, ErrNotPending)
	}
	if err := m.checkRev(p); err != nil {
		return err
	}
	m.put(p, b)
	return nil
}

// UnfinishedPrompts implements Store.
func (m *MemStore) UnfinishedPrompts(ctx context.Context) ([]*Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Prompt
	for _, id := range m.order {
		p, err := m.load(id)
		if err != nil {
			return nil, err
		}
		if !p.State.Final() {
			out = append(out, p)
		}
	}
	return out, nil
}

// History implements Store.
func (m *MemStore) History(ctx context.Context, conversationID, beforeID string, limit int) ([]*Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.byConv[conversationID]
	if beforeID != "" {
		i := slices.Index(ids, beforeID)
		if i < 0 {
			return nil, fmt.Errorf("history before %s: %w", beforeID, ErrNotFound)
		}
		ids = ids[:i]
	}
	var out []*Prompt
	for i := len(ids) - 1; i >= 0 && len(out) < limit; i-- {
		p, err := m.load(ids[i])
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Reverse(out)
	return out, nil
}

// FindApproval implements Store.
func (m *MemStore) FindApproval(ctx context.Context, approvalID string) (ApprovalRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.approvals[approvalID]; ok {
		p, err := m.load(id)
		if err != nil {
			return ApprovalRef{}, err
		}
		for _, it := range p.Output {
			if c := it.Call; c != nil && c.Approval != nil && c.Approval.ID == approvalID {
				return ApprovalRef{
					ID: approvalID, PromptID: p.ID, ConversationID: p.ConversationID, CallID: c.ID,
					Status: c.Status, DecidedBy: c.Approval.DecidedBy, DecidedAt: c.Approval.DecidedAt,
				}, nil
			}
		}
	}
	return ApprovalRef{}, fmt.Errorf("approval %s: %w", approvalID, ErrNotFound)
}

// Prompt returns a copy of the stored prompt id, or ErrNotFound.
func (m *MemStore) Prompt(id string) (*Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.load(id)
}

func (m *MemStore) load(id string) (*Prompt, error) {
	b, ok := m.data[id]
	if !ok {
		return nil, fmt.Errorf("prompt %s: %w", id, ErrNotFound)
	}
	var p Prompt
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode prompt %s: %w", id, err)
	}
	return &p, nil
}
