package prompttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"tollgate/prompt"
)

// Store is a prompt.Store in memory with the semantics of the SQLite one:
// saves are compare-and-sets on the revision, decisions compare-and-sets
// on the approval, one unfinished prompt per conversation, approvals kept
// apart from the items. What it returns shares nothing with what it keeps.
// Safe for concurrent use.
type Store struct {
	mu        sync.Mutex
	seq       int64
	prompts   map[string]*stored
	order     []string             // prompt IDs, oldest first
	byConv    map[string][]string  // prompt IDs of a conversation, oldest first
	approvals map[string]*approval // by approval ID
	outbox    []*entry
	byCall    map[[2]string]string // prompt ID, call ID → its latest approval's ID
	grants    []*prompt.Grant      // oldest first
	leases    map[string]lease
	audit     []prompt.AuditEntry // oldest first
	audited   map[[3]string]bool  // prompt, call, approval ID of each audit entry
}

type stored struct {
	seq int64
	p   *prompt.Prompt // items without approvals
}

type entry struct {
	prompt.OutboxEntry
	done   bool
	note   string
	heldTo time.Time
}

type approval struct {
	promptID, callID string
	tool, input      string
	a                prompt.Approval
	votes            []vote // in order
}

type vote struct{ voterID, by string }

var _ prompt.Store = (*Store)(nil)

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{prompts: map[string]*stored{}, byConv: map[string][]string{}, approvals: map[string]*approval{}, byCall: map[[2]string]string{}}
}

// CreatePrompt implements prompt.Store.
func (m *Store) CreatePrompt(_ context.Context, p *prompt.Prompt) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.prompts[p.ID]; ok {
		return fmt.Errorf("create prompt %s: %w", p.ID, prompt.ErrExists)
	}
	if m.activeLocked(p.ConversationID) != nil {
		return fmt.Errorf("create prompt in %s: %w", p.ConversationID, prompt.ErrBusy)
	}
	m.seq++
	m.prompts[p.ID] = &stored{seq: m.seq}
	m.order = append(m.order, p.ID)
	m.byConv[p.ConversationID] = append(m.byConv[p.ConversationID], p.ID)
	all := make([]int, len(p.Output))
	for i := range all {
		all[i] = i
	}
	return m.putLocked(p, all)
}

func (m *Store) activeLocked(conv string) *stored {
	for _, id := range m.byConv[conv] {
		if s := m.prompts[id]; s.p != nil && !s.p.State.Final() {
			return s
		}
	}
	return nil
}

// putLocked keeps p and writes the approvals of the changed items, and
// the audit entries of their rulings and of approvals the prompt's end
// expired.
func (m *Store) putLocked(p *prompt.Prompt, changed []int) error {
	var audit []prompt.AuditEntry
	for _, i := range changed {
		if i < 0 || i >= len(p.Output) {
			return fmt.Errorf("save prompt %s: no item %d", p.ID, i)
		}
		c := p.Output[i].Call
		if c != nil && c.Ruling != nil {
			rl := c.Ruling
			audit = append(audit, prompt.AuditEntry{At: rl.At, ConversationID: p.ConversationID, PromptID: p.ID,
				CallID: c.ID, Tool: c.Name, InputHash: prompt.InputHash(c.Input()), Outcome: prompt.RulingOutcome(rl),
				SourceKind: prompt.SourceKind(rl.Kind), Source: rl.By, Feedback: rl.Why})
		}
		if c == nil || c.Approval == nil {
			continue
		}
		a, ok := m.approvals[c.Approval.ID]
		switch {
		case !ok:
			if c.Approval.Status != prompt.ApprovalPending {
				return fmt.Errorf("save approval %s: a new approval must be pending", c.Approval.ID)
			}
			if old, ok := m.byCall[[2]string{p.ID, c.ID}]; ok && m.approvals[old].a.Status != prompt.ApprovalEdited {
				return fmt.Errorf("save approval %s: call %s has approval %s already", c.Approval.ID, c.ID, old)
			}
			m.approvals[c.Approval.ID] = &approval{promptID: p.ID, callID: c.ID, tool: c.Name, input: c.Input(), a: *c.Approval}
			m.byCall[[2]string{p.ID, c.ID}] = c.Approval.ID
		case a.promptID != p.ID || a.callID != c.ID:
			return fmt.Errorf("save approval %s: it belongs to another call", c.Approval.ID)
		default:
			a.a.Note = c.Approval.Note
			if a.a.Status == prompt.ApprovalPending && c.Approval.Status == prompt.ApprovalExpired {
				a.a.Status = prompt.ApprovalExpired
			}
			if a.a.Status == prompt.ApprovalExpired {
				audit = append(audit, prompt.AuditEntry{At: p.UpdatedAt, ConversationID: p.ConversationID, PromptID: p.ID,
					CallID: c.ID, ApprovalID: c.Approval.ID, Tool: a.tool, InputHash: a.a.InputHash,
					Outcome: prompt.OutcomeExpired, SourceKind: prompt.SourceSystem, Source: "prompt ended", Feedback: a.a.Note})
			}
		}
	}
	for _, e := range audit {
		m.auditLocked(e)
	}
	q := p.Clone()
	for i := range q.Output {
		if q.Output[i].Call != nil {
			q.Output[i].Call.Approval = nil
		}
	}
	m.prompts[p.ID].p = q
	return nil
}

// LoadPrompt implements prompt.Store.
func (m *Store) LoadPrompt(_ context.Context, id string) (*prompt.Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loadLocked(id)
}

func (m *Store) loadLocked(id string) (*prompt.Prompt, error) {
	s, ok := m.prompts[id]
	if !ok || s.p == nil {
		return nil, fmt.Errorf("prompt %s: %w", id, prompt.ErrNotFound)
	}
	p := s.p.Clone()
	for i := range p.Output {
		if c := p.Output[i].Call; c != nil {
			if aid, ok := m.byCall[[2]string{p.ID, c.ID}]; ok {
				a := m.approvals[aid].a
				c.Approval = &a
			}
		}
	}
	return p, nil
}

// ActivePrompt implements prompt.Store.
func (m *Store) ActivePrompt(_ context.Context, conv string) (*prompt.Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.activeLocked(conv)
	if s == nil {
		return nil, fmt.Errorf("active prompt of %s: %w", conv, prompt.ErrNotFound)
	}
	return m.loadLocked(s.p.ID)
}

// SavePrompt implements prompt.Store.
func (m *Store) SavePrompt(_ context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.prompts[p.ID]
	if !ok {
		return fmt.Errorf("save prompt %s: %w", p.ID, prompt.ErrNotFound)
	}
	if s.p.Rev != p.Rev-1 {
		return fmt.Errorf("save prompt %s at revision %d over %d: %w", p.ID, p.Rev, s.p.Rev, prompt.ErrConflict)
	}
	if err := m.putLocked(p, changed); err != nil {
		return err
	}
	for _, n := range notices {
		m.noticeLocked(n, false)
	}
	return nil
}

func (m *Store) noticeLocked(n prompt.Notice, resend bool) {
	m.outbox = append(m.outbox, &entry{OutboxEntry: prompt.OutboxEntry{Notice: n, Seq: int64(len(m.outbox) + 1), Resend: resend}})
}

// Decide implements prompt.Store.
func (m *Store) Decide(_ context.Context, id string, d prompt.Decision) (prompt.ApprovalRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.approvals[id]
	if !ok {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", id, prompt.ErrNotFound)
	}
	if a.a.Status != prompt.ApprovalPending {
		return m.refLocked(id), fmt.Errorf("approval %s is %s: %w", id, a.a.Status, prompt.ErrNotPending)
	}
	a.a.Status, a.a.DecidedBy, a.a.DecidedAt, a.a.Note = d.Status, d.By, d.At.UTC(), d.Note
	if d.Status == prompt.ApprovalEdited {
		a.a.EditedInput = d.Input
	}
	if d.Grant != nil {
		g := *d.Grant
		m.grants = append(m.grants, &g)
	}
	s := m.prompts[a.promptID]
	s.p.State = prompt.StateRunning
	s.p.Rev++
	outcome, kind, source, feedback := prompt.DecisionAudit(d)
	m.auditLocked(prompt.AuditEntry{At: d.At, ConversationID: s.p.ConversationID, PromptID: s.p.ID, CallID: a.callID,
		ApprovalID: id, Tool: a.tool, InputHash: a.a.InputHash, Outcome: outcome, SourceKind: kind, Source: source,
		Feedback: feedback})
	m.noticeLocked(prompt.Notice{Kind: prompt.NoticeDecided, ConversationID: s.p.ConversationID, PromptID: s.p.ID, ApprovalID: id}, false)
	return m.refLocked(id), nil
}

// Vote implements prompt.Store.
func (m *Store) Vote(_ context.Context, id, voterID, by string, at time.Time, quorum int) (prompt.ApprovalRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.approvals[id]
	if !ok {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", id, prompt.ErrNotFound)
	}
	if a.a.Status != prompt.ApprovalPending {
		return m.refLocked(id), fmt.Errorf("approval %s is %s: %w", id, a.a.Status, prompt.ErrNotPending)
	}
	for _, v := range a.votes {
		if v.voterID == voterID {
			return m.refLocked(id), fmt.Errorf("approval %s by %s: %w", id, voterID, prompt.ErrAlreadyVoted)
		}
	}
	a.votes = append(a.votes, vote{voterID: voterID, by: by})
	s := m.prompts[a.promptID]
	if len(a.votes) < quorum {
		m.noticeLocked(prompt.Notice{Kind: prompt.NoticeVotes, ConversationID: s.p.ConversationID, PromptID: s.p.ID, ApprovalID: id}, false)
		return m.refLocked(id), nil
	}
	names := make([]string, len(a.votes))
	for i, v := range a.votes {
		names[i] = v.by
	}
	a.a.Status, a.a.DecidedBy, a.a.DecidedAt, a.a.Note = prompt.ApprovalApproved, strings.Join(names, ", "), at.UTC(), ""
	s.p.State = prompt.StateRunning
	s.p.Rev++
	outcome, kind, source, feedback := prompt.DecisionAudit(prompt.Decision{Status: prompt.ApprovalApproved, By: a.a.DecidedBy, At: at})
	m.auditLocked(prompt.AuditEntry{At: at, ConversationID: s.p.ConversationID, PromptID: s.p.ID, CallID: a.callID,
		ApprovalID: id, Tool: a.tool, InputHash: a.a.InputHash, Outcome: outcome, SourceKind: kind, Source: source,
		Feedback: feedback})
	m.noticeLocked(prompt.Notice{Kind: prompt.NoticeDecided, ConversationID: s.p.ConversationID, PromptID: s.p.ID, ApprovalID: id}, false)
	return m.refLocked(id), nil
}

// CancelPrompt implements prompt.Store.
func (m *Store) CancelPrompt(_ context.Context, id, by string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.prompts[id]
	if !ok {
		return fmt.Errorf("cancel prompt %s: %w", id, prompt.ErrNotFound)
	}
	if s.p.State.Final() {
		return fmt.Errorf("cancel prompt %s: %w", id, prompt.ErrNotPending)
	}
	for aid, a := range m.approvals {
		if a.promptID == id && a.a.Status == prompt.ApprovalPending {
			a.a.Status, a.a.DecidedBy, a.a.DecidedAt, a.a.Note = prompt.ApprovalRejected, by, at.UTC(), "cancelled"
			m.auditLocked(prompt.AuditEntry{At: at, ConversationID: s.p.ConversationID, PromptID: id, CallID: a.callID,
				ApprovalID: aid, Tool: a.tool, InputHash: a.a.InputHash, Outcome: prompt.OutcomeCancelled,
				SourceKind: prompt.SourcePerson, Source: by})
			m.noticeLocked(prompt.Notice{Kind: prompt.NoticeDecided, ConversationID: s.p.ConversationID, PromptID: id, ApprovalID: aid}, false)
		}
	}
	s.p.CancelledBy = by
	s.p.State = prompt.StateRunning
	s.p.Rev++
	return nil
}

func (m *Store) refLocked(id string) prompt.ApprovalRef {
	a := m.approvals[id]
	p := m.prompts[a.promptID].p
	var votes []string
	for _, v := range a.votes {
		votes = append(votes, v.by)
	}
	return prompt.ApprovalRef{ID: id, PromptID: a.promptID, ConversationID: p.ConversationID,
		CallID: a.callID, Status: a.a.Status, DecidedBy: a.a.DecidedBy, DecidedAt: a.a.DecidedAt, Note: a.a.Note,
		ToolName: a.tool, Input: a.input, Reason: a.a.Reason, InputHash: a.a.InputHash, RequestedAt: a.a.RequestedAt,
		Author: p.Author, Votes: votes}
}

// RunningPrompts implements prompt.Store.
func (m *Store) RunningPrompts(_ context.Context, cur prompt.Cursor, limit int) ([]string, prompt.Cursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	cur = m.pageLocked(cur, limit, prompt.StateRunning, func(s *stored) { ids = append(ids, s.p.ID) })
	return ids, cur, nil
}

// ResendWaiting implements prompt.Store.
func (m *Store) ResendWaiting(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, id := range m.order {
		s := m.prompts[id]
		if s.p.State != prompt.StateWaiting {
			continue
		}
		for _, c := range s.p.Output {
			if c.Call == nil {
				continue
			}
			aid, ok := m.byCall[[2]string{id, c.Call.ID}]
			if !ok || m.approvals[aid].a.Status != prompt.ApprovalPending || m.undeliveredRequestLocked(aid) {
				continue
			}
			m.noticeLocked(prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: s.p.ConversationID, PromptID: id, ApprovalID: aid}, true)
			n++
		}
	}
	return n, nil
}

func (m *Store) undeliveredRequestLocked(approvalID string) bool {
	for _, e := range m.outbox {
		if !e.done && e.Kind == prompt.NoticeRequest && e.ApprovalID == approvalID {
			return true
		}
	}
	return false
}

// DueNotices returns up to limit outbox entries to deliver at now: the
// oldest undelivered entry of each conversation, unless it is held until
// later; re-sends after the rest, then oldest first.
func (m *Store) DueNotices(_ context.Context, now time.Time, limit int) ([]prompt.OutboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var live, resent []prompt.OutboxEntry
	for _, e := range m.outbox {
		if e.done || seen[e.ConversationID] {
			continue
		}
		seen[e.ConversationID] = true
		if e.heldTo.After(now) {
			continue
		}
		if e.Resend {
			resent = append(resent, e.OutboxEntry)
		} else {
			live = append(live, e.OutboxEntry)
		}
	}
	out := append(live, resent...)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// NextNoticeAt returns when the earliest held entry becomes due.
func (m *Store) NextNoticeAt(context.Context) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, e := range m.outbox {
		if !e.done && !e.heldTo.IsZero() && (next.IsZero() || e.heldTo.Before(next)) {
			next = e.heldTo
		}
	}
	return next, !next.IsZero(), nil
}

// MarkNotice records that entry seq was delivered, or given up for good
// (note says why).
func (m *Store) MarkNotice(_ context.Context, seq int64, note string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.entryLocked(seq)
	if err != nil {
		return err
	}
	e.done, e.note = true, note
	return nil
}

func (m *Store) entryLocked(seq int64) (*entry, error) {
	if seq < 1 || int(seq) > len(m.outbox) {
		return nil, fmt.Errorf("outbox entry %d: %w", seq, prompt.ErrNotFound)
	}
	return m.outbox[seq-1], nil
}

// HoldNotice counts a failed delivery of entry seq and holds it, and so its
// conversation, until until.
func (m *Store) HoldNotice(_ context.Context, seq int64, until time.Time, note string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.entryLocked(seq)
	if err != nil {
		return err
	}
	e.heldTo, e.note = until, note
	e.Attempts++
	return nil
}

// OutboxNote tells whether entry seq was marked delivered (or given up),
// and its note.
func (m *Store) OutboxNote(seq int64) (note string, done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq < 1 || int(seq) > len(m.outbox) {
		return "", false
	}
	e := m.outbox[seq-1]
	return e.note, e.done
}

// Outbox returns every entry, delivered or not, oldest first: tests read
// what a change recorded.
func (m *Store) Outbox() []prompt.OutboxEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]prompt.OutboxEntry, len(m.outbox))
	for i, e := range m.outbox {
		out[i] = e.OutboxEntry
	}
	return out
}

func (m *Store) pageLocked(cur prompt.Cursor, limit int, state prompt.State, f func(*stored)) prompt.Cursor {
	if cur.Bound == 0 {
		cur.Bound = m.seq
	}
	n := 0
	for _, id := range m.order {
		s := m.prompts[id]
		if s.seq <= cur.After || s.seq > cur.Bound || s.p.State != state {
			continue
		}
		if n == limit {
			break
		}
		f(s)
		cur.After = s.seq
		n++
	}
	return cur
}

// History implements prompt.Store.
func (m *Store) History(_ context.Context, conv, beforeID string, limit int) ([]*prompt.Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.byConv[conv]
	if beforeID != "" {
		i := slices.Index(ids, beforeID)
		if i < 0 {
			return nil, fmt.Errorf("history before %s: %w", beforeID, prompt.ErrNotFound)
		}
		ids = ids[:i]
	}
	var out []*prompt.Prompt
	for i := len(ids) - 1; i >= 0 && len(out) < limit; i-- {
		p, err := m.loadLocked(ids[i])
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Reverse(out)
	return out, nil
}

// FindApproval implements prompt.Store.
func (m *Store) FindApproval(_ context.Context, id string) (prompt.ApprovalRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.approvals[id]; !ok {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", id, prompt.ErrNotFound)
	}
	return m.refLocked(id), nil
}

// Prompt returns a copy of the stored prompt id, or ErrNotFound: tests read
// what was saved with it.
func (m *Store) Prompt(id string) (*prompt.Prompt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loadLocked(id)
}

// NextDeadline implements prompt.Store.
func (m *Store) NextDeadline(context.Context) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, a := range m.approvals {
		if a.a.Status != prompt.ApprovalPending {
			continue
		}
		for _, t := range []time.Time{a.a.ExpiresAt, a.a.RemindAt} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next, !next.IsZero(), nil
}

// DueApprovals implements prompt.Store.
func (m *Store) DueApprovals(_ context.Context, now time.Time) (expired, remind []prompt.ApprovalRef, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, a := range m.approvals {
		if a.a.Status != prompt.ApprovalPending {
			continue
		}
		if !a.a.ExpiresAt.IsZero() && !a.a.ExpiresAt.After(now) {
			expired = append(expired, m.refLocked(id))
		}
		if !a.a.RemindAt.IsZero() && !a.a.RemindAt.After(now) {
			remind = append(remind, m.refLocked(id))
		}
	}
	return expired, remind, nil
}

// Remind implements prompt.Store.
func (m *Store) Remind(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.approvals[id]
	if !ok {
		return false, fmt.Errorf("approval %s: %w", id, prompt.ErrNotFound)
	}
	if a.a.RemindAt.IsZero() || a.a.Status != prompt.ApprovalPending {
		return false, nil
	}
	a.a.RemindAt = time.Time{}
	conv := m.prompts[a.promptID].p.ConversationID
	m.noticeLocked(prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: conv, PromptID: a.promptID, ApprovalID: id}, true)
	return true, nil
}

// FindGrant implements prompt.Store.
func (m *Store) FindGrant(_ context.Context, conv, tool, scope string, now time.Time) (prompt.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.grants) - 1; i >= 0; i-- {
		g := m.grants[i]
		if g.Tool == tool && g.Scope == scope && inForce(g, conv, now) {
			return *g, nil
		}
	}
	return prompt.Grant{}, fmt.Errorf("grant of %s %s: %w", tool, scope, prompt.ErrNotFound)
}

func inForce(g *prompt.Grant, conv string, now time.Time) bool {
	return (g.ConversationID == "" || g.ConversationID == conv) && g.RevokedAt.IsZero() &&
		(g.ExpiresAt.IsZero() || now.Before(g.ExpiresAt))
}

// Grants implements prompt.Store.
func (m *Store) Grants(_ context.Context, conv string, now time.Time) ([]prompt.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gs []prompt.Grant
	for i := len(m.grants) - 1; i >= 0; i-- {
		if g := m.grants[i]; inForce(g, conv, now) {
			gs = append(gs, *g)
		}
	}
	return gs, nil
}

// RevokeGrant implements prompt.Store.
func (m *Store) RevokeGrant(_ context.Context, id, by string, at time.Time) (prompt.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.grants {
		if g.ID != id {
			continue
		}
		if !g.RevokedAt.IsZero() {
			return *g, fmt.Errorf("revoke grant %s: %w", id, prompt.ErrNotPending)
		}
		g.RevokedBy, g.RevokedAt = by, at.UTC()
		return *g, nil
	}
	return prompt.Grant{}, fmt.Errorf("revoke grant %s: %w", id, prompt.ErrNotFound)
}

// auditLocked records e unless an entry for the same prompt, call and
// approval exists, as the SQLite store's unique key does; times are kept
// to the millisecond, as there.
func (m *Store) auditLocked(e prompt.AuditEntry) {
	key := [3]string{e.PromptID, e.CallID, e.ApprovalID}
	if m.audited[key] {
		return
	}
	if m.audited == nil {
		m.audited = map[[3]string]bool{}
	}
	m.audited[key] = true
	e.Seq = int64(len(m.audit) + 1)
	e.At = e.At.UTC().Truncate(time.Millisecond)
	m.audit = append(m.audit, e)
}

// Audit implements prompt.Store.
func (m *Store) Audit(_ context.Context, q prompt.AuditQuery) ([]prompt.AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since := q.Since.UTC().Truncate(time.Millisecond)
	var out []prompt.AuditEntry
	for i := len(m.audit) - 1; i >= 0 && (q.Limit <= 0 || len(out) < q.Limit); i-- {
		e := m.audit[i]
		if (q.ConversationID == "" || e.ConversationID == q.ConversationID) && !e.At.Before(since) {
			out = append(out, e)
		}
	}
	return out, nil
}

type lease struct {
	holder string
	until  time.Time
}

var _ prompt.Leases = (*Store)(nil)

// Lease implements prompt.Leases.
func (m *Store) Lease(_ context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases == nil {
		m.leases = map[string]lease{}
	}
	if l, ok := m.leases[name]; ok && l.holder != holder && now.Before(l.until) {
		return false, nil
	}
	m.leases[name] = lease{holder: holder, until: now.Add(ttl)}
	return true, nil
}

// Release implements prompt.Leases.
func (m *Store) Release(_ context.Context, name, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[name]; ok && l.holder == holder {
		delete(m.leases, name)
	}
	return nil
}

// LeaseHolder implements prompt.Leases.
func (m *Store) LeaseHolder(_ context.Context, name string, now time.Time) (string, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[name]; ok && now.Before(l.until) {
		return l.holder, l.until, nil
	}
	return "", time.Time{}, nil
}
