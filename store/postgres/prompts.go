package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

var _ prompt.Store = (*DB)(nil)

// CreatePrompt implements prompt.Store. The database keeps one unfinished
// prompt per conversation (a unique partial index), so two processes, or
// two messages at once, cannot both start one.
func (db *DB) CreatePrompt(ctx context.Context, p *prompt.Prompt) error {
	if err := checkPrompt(p); err != nil {
		return fmt.Errorf("create prompt: %w", err)
	}
	err := db.write(ctx, func(tx pgx.Tx) error { return db.createPrompt(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("create prompt %s in %s: %w", p.ID, p.ConversationID, err)
	}
	return nil
}

func (db *DB) createPrompt(ctx context.Context, tx pgx.Tx, p *prompt.Prompt) error {
	var rev int64
	switch err := tx.QueryRow(ctx, `SELECT rev FROM prompts WHERE id = $1`, p.ID).Scan(&rev); {
	case err == nil:
		return prompt.ErrExists
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("look for prompt: %w", err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO prompts
		(id, conversation_id, state, input, error, turns, cancelled_by, rev, created_at, updated_at, author)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		p.ID, p.ConversationID, string(p.State), p.Input, p.Error, p.Turns, p.CancelledBy, p.Rev,
		formatTime(p.CreatedAt), formatTime(p.UpdatedAt), p.Author)
	switch {
	case isUnique(err, "prompts_id_key"): // created meanwhile by another transaction
		return prompt.ErrExists
	case isUnique(err, "prompts_one_active"):
		return prompt.ErrBusy
	case err != nil:
		return fmt.Errorf("insert prompt: %w", err)
	}
	all := make([]int, len(p.Output))
	for i := range all {
		all[i] = i
	}
	return db.saveItems(ctx, tx, p, all)
}

// SavePrompt implements prompt.Store: one transaction updates the prompt
// row if it is still at revision p.Rev-1 (which locks it, so a decision
// on one of its approvals waits), then the changed items and their
// approvals, and records the notices.
func (db *DB) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	if err := checkPrompt(p); err != nil {
		return fmt.Errorf("save prompt: %w", err)
	}
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE prompts
			SET state = $1, error = $2, turns = $3, rev = $4, updated_at = $5 WHERE id = $6 AND rev = $7`,
			string(p.State), p.Error, p.Turns, p.Rev, formatTime(p.UpdatedAt), p.ID, p.Rev-1)
		if err != nil {
			return fmt.Errorf("update prompt: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var rev int64
			err := tx.QueryRow(ctx, `SELECT rev FROM prompts WHERE id = $1`, p.ID).Scan(&rev)
			if errors.Is(err, pgx.ErrNoRows) {
				return prompt.ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("read revision: %w", err)
			}
			return fmt.Errorf("revision %d is not above stored %d by one: %w", p.Rev, rev, prompt.ErrConflict)
		}
		if err := db.saveItems(ctx, tx, p, changed); err != nil {
			return err
		}
		for _, n := range notices {
			if err := db.insertNotice(ctx, tx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", p.ID, err)
	}
	return nil
}

func checkPrompt(p *prompt.Prompt) error {
	switch {
	case p == nil:
		return errors.New("nil prompt")
	case p.ID == "":
		return errors.New("prompt without ID")
	}
	return nil
}

// saveItems writes the items of p at the indexes in changed, and their
// calls' approvals.
func (db *DB) saveItems(ctx context.Context, tx pgx.Tx, p *prompt.Prompt, changed []int) error {
	now := formatTime(db.now())
	for _, i := range changed {
		if i < 0 || i >= len(p.Output) {
			return fmt.Errorf("no item %d of %d", i, len(p.Output))
		}
		it := p.Output[i]
		var callID any
		if c := it.Call; c != nil {
			callID = c.ID
			// The approval lives in its own row, once.
			call := *c
			call.Approval = nil
			it.Call = &call
		}
		body, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("encode item %d: %w", i, err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (prompt_id, seq) DO UPDATE
			SET type = excluded.type, turn = excluded.turn, call_id = excluded.call_id, body = excluded.body`,
			p.ID, i, string(it.Type), it.Turn, callID, string(body))
		if err != nil {
			return fmt.Errorf("save item %d: %w", i, err)
		}
		if c := p.Output[i].Call; c != nil && c.Approval != nil {
			if err := db.saveApproval(ctx, tx, p.ID, c, now); err != nil {
				return err
			}
		}
		if c := p.Output[i].Call; c != nil {
			if err := auditItem(ctx, tx, p, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// saveApproval inserts the approval of call c as pending, or changes what a
// step may change of a stored one: its note, and pending to expired when
// the prompt ended without a decision. A decision is only ever written by
// Decide, Vote and CancelPrompt, as a compare-and-set.
func (db *DB) saveApproval(ctx context.Context, tx pgx.Tx, promptID string, c *prompt.Call, now string) error {
	a := c.Approval
	if a.ID == "" {
		return fmt.Errorf("call %s: approval without ID", c.ID)
	}
	tag, err := tx.Exec(ctx, `UPDATE approvals
		SET note = $1,
		    status = CASE WHEN status = 'pending' AND $2::text = 'expired' THEN 'expired' ELSE status END,
		    updated_at = $3
		WHERE id = $4 AND prompt_id = $5 AND tool_call_id = $6`,
		a.Note, string(a.Status), now, a.ID, promptID, c.ID)
	if err != nil {
		return fmt.Errorf("update approval %s: %w", a.ID, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	if a.Status != prompt.ApprovalPending {
		return fmt.Errorf("save approval %s: a new approval must be pending, not %s", a.ID, a.Status)
	}
	_, err = tx.Exec(ctx, `INSERT INTO approvals
		(id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at, note, created_at, updated_at,
		 expires_at, remind_at, input_hash)
		VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, $10, $11, $12, $13)`,
		a.ID, promptID, c.ID, c.Name, c.Input(), a.Reason, formatTime(a.RequestedAt), a.Note, now, now,
		nullMillis(a.ExpiresAt), nullMillis(a.RemindAt), a.InputHash)
	if isUnique(err, "approvals_id_key") || isUnique(err, "approvals_one_live") {
		return fmt.Errorf("save approval %s: the ID belongs to another call", a.ID)
	}
	if err != nil {
		return fmt.Errorf("insert approval %s: %w", a.ID, err)
	}
	return nil
}

// lockPromptOf locks the prompt row of approval id, if there is one. A
// change that moves an approval and its prompt takes the prompt first, as
// SavePrompt does, so two such changes wait for each other instead of
// deadlocking.
func lockPromptOf(ctx context.Context, tx pgx.Tx, approvalID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT p.id FROM approvals a JOIN prompts p ON p.id = a.prompt_id
		WHERE a.id = $1 FOR NO KEY UPDATE OF p`, approvalID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the caller's own statements find it missing
	}
	if err != nil {
		return fmt.Errorf("lock prompt: %w", err)
	}
	return nil
}

// decide is the compare-and-set of a decision: it moves approval id from
// pending and reports whether it did.
func (db *DB) decide(ctx context.Context, tx pgx.Tx, id string, status prompt.ApprovalStatus, by string, at time.Time,
	note, input string) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE approvals
		SET status = $1, decided_by = $2, decided_at = $3, note = $4, updated_at = $5, edited_input = $6
		WHERE id = $7 AND status = 'pending'`,
		string(status), by, nullTime(at), note, formatTime(db.now()), input, id)
	if err != nil {
		return false, fmt.Errorf("update approval: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// resume marks prompt id running at its next revision, for its next step
// to see a decision.
func (db *DB) resume(ctx context.Context, tx pgx.Tx, promptID string) error {
	_, err := tx.Exec(ctx, `UPDATE prompts SET state = 'running', rev = rev + 1, updated_at = $1 WHERE id = $2`,
		formatTime(db.now()), promptID)
	if err != nil {
		return fmt.Errorf("resume prompt: %w", err)
	}
	return nil
}

// Decide implements prompt.Store.
func (db *DB) Decide(ctx context.Context, id string, d prompt.Decision) (prompt.ApprovalRef, error) {
	switch d.Status {
	case prompt.ApprovalApproved, prompt.ApprovalRejected, prompt.ApprovalExpired, prompt.ApprovalEdited:
	default:
		return prompt.ApprovalRef{}, fmt.Errorf("decide approval %s: %q is not a decision", id, d.Status)
	}
	var ref prompt.ApprovalRef
	err := db.write(ctx, func(tx pgx.Tx) error {
		if err := lockPromptOf(ctx, tx, id); err != nil {
			return err
		}
		moved, err := db.decide(ctx, tx, id, d.Status, d.By, d.At, d.Note, d.Input)
		if err != nil {
			return err
		}
		if ref, err = findApproval(ctx, tx, id); err != nil {
			return err
		}
		if !moved {
			return fmt.Errorf("it is %s: %w", ref.Status, prompt.ErrNotPending)
		}
		if err := db.resume(ctx, tx, ref.PromptID); err != nil {
			return err
		}
		if err := db.auditDecision(ctx, tx, id, d); err != nil {
			return err
		}
		if d.Grant != nil {
			if err := insertGrant(ctx, tx, d.Grant); err != nil {
				return err
			}
		}
		return db.insertNotice(ctx, tx, prompt.Notice{Kind: prompt.NoticeDecided, ConversationID: ref.ConversationID,
			PromptID: ref.PromptID, ApprovalID: id})
	})
	if err != nil {
		return ref, fmt.Errorf("decide approval %s: %w", id, err)
	}
	return ref, nil
}

// CancelPrompt implements prompt.Store.
func (db *DB) CancelPrompt(ctx context.Context, id, by string, at time.Time) error {
	err := db.write(ctx, func(tx pgx.Tx) error {
		var conv string
		err := tx.QueryRow(ctx, `UPDATE prompts
			SET cancelled_by = CASE WHEN cancelled_by = '' THEN $1 ELSE cancelled_by END,
			    state = 'running', rev = rev + 1, updated_at = $2
			WHERE id = $3 AND state IN ('running', 'waiting_for_approval')
			RETURNING conversation_id`, by, formatTime(at), id).Scan(&conv)
		if errors.Is(err, pgx.ErrNoRows) {
			var rev int64
			err := tx.QueryRow(ctx, `SELECT rev FROM prompts WHERE id = $1`, id).Scan(&rev)
			if errors.Is(err, pgx.ErrNoRows) {
				return prompt.ErrNotFound
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("it has ended: %w", prompt.ErrNotPending)
		}
		if err != nil {
			return fmt.Errorf("update prompt: %w", err)
		}
		rows, err := tx.Query(ctx, `UPDATE approvals
			SET status = 'rejected', decided_by = $1, decided_at = $2, note = 'cancelled', updated_at = $3
			WHERE prompt_id = $4 AND status = 'pending' RETURNING id`,
			by, formatTime(at), formatTime(db.now()), id)
		if err != nil {
			return err
		}
		rejected, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, aid := range rejected {
			if err := auditCancelled(ctx, tx, aid, by, at); err != nil {
				return err
			}
			if err := db.insertNotice(ctx, tx, prompt.Notice{Kind: prompt.NoticeDecided, ConversationID: conv,
				PromptID: id, ApprovalID: aid}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cancel prompt %s: %w", id, err)
	}
	return nil
}

// LoadPrompt implements prompt.Store, in one statement and so from one
// snapshot.
func (db *DB) LoadPrompt(ctx context.Context, id string) (*prompt.Prompt, error) {
	ps, err := scanPrompts(db.pool.Query(ctx, promptSelect(`SELECT * FROM prompts WHERE id = $1`), id))
	if err != nil {
		return nil, fmt.Errorf("load prompt %s: %w", id, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("load prompt %s: %w", id, prompt.ErrNotFound)
	}
	return ps[0], nil
}

// ActivePrompt implements prompt.Store.
func (db *DB) ActivePrompt(ctx context.Context, conversationID string) (*prompt.Prompt, error) {
	ps, err := scanPrompts(db.pool.Query(ctx, promptSelect(`SELECT * FROM prompts
		WHERE conversation_id = $1 AND state IN ('running', 'waiting_for_approval')`), conversationID))
	if err != nil {
		return nil, fmt.Errorf("active prompt of %s: %w", conversationID, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("active prompt of %s: %w", conversationID, prompt.ErrNotFound)
	}
	return ps[0], nil
}

// RunningPrompts implements prompt.Store.
func (db *DB) RunningPrompts(ctx context.Context, cur prompt.Cursor, limit int) ([]string, prompt.Cursor, error) {
	if cur.Bound == 0 {
		if err := db.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM prompts`).Scan(&cur.Bound); err != nil {
			return nil, cur, fmt.Errorf("running prompts: %w", err)
		}
	}
	rows, err := db.pool.Query(ctx, `SELECT id, seq FROM prompts
		WHERE state = 'running' AND seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, cur.After, cur.Bound, limit)
	if err != nil {
		return nil, cur, fmt.Errorf("running prompts: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id, &cur.After); err != nil {
			return nil, cur, fmt.Errorf("running prompts: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, cur, fmt.Errorf("running prompts: %w", err)
	}
	return ids, cur, nil
}

// History implements prompt.Store. "Before" is in the order prompts were
// first saved.
func (db *DB) History(ctx context.Context, conversationID, beforeID string, limit int) ([]*prompt.Prompt, error) {
	if limit <= 0 {
		return nil, nil
	}
	bound := int64(math.MaxInt64)
	if beforeID != "" {
		// Two statements need no common snapshot: a prompt's seq never
		// changes and prompts are never deleted.
		err := db.pool.QueryRow(ctx, `SELECT seq FROM prompts WHERE id = $1 AND conversation_id = $2`,
			beforeID, conversationID).Scan(&bound)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("history of %s before prompt %s: %w", conversationID, beforeID, prompt.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", conversationID, err)
		}
	}
	ps, err := scanPrompts(db.pool.Query(ctx, promptSelect(`SELECT * FROM prompts
		WHERE conversation_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`), conversationID, bound, limit))
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", conversationID, err)
	}
	return ps, nil
}

// FindApproval implements prompt.Store.
func (db *DB) FindApproval(ctx context.Context, approvalID string) (prompt.ApprovalRef, error) {
	return findApproval(ctx, db.pool, approvalID)
}

// querier is what a pool and a transaction share.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func findApproval(ctx context.Context, q querier, approvalID string) (prompt.ApprovalRef, error) {
	ref := prompt.ApprovalRef{ID: approvalID}
	var (
		status, requested, votes string
		decidedAt                *string
	)
	err := q.QueryRow(ctx, `SELECT a.prompt_id, p.conversation_id, a.tool_call_id, a.status, a.decided_by,
			a.decided_at, a.note, a.tool_name, a.input, a.reason, a.input_hash, a.requested_at, p.author,
			coalesce((SELECT json_agg(v.voter ORDER BY v.seq) FROM approval_votes v WHERE v.approval_id = a.id), '[]')::text
		FROM approvals a JOIN prompts p ON p.id = a.prompt_id WHERE a.id = $1`, approvalID).Scan(
		&ref.PromptID, &ref.ConversationID, &ref.CallID, &status, &ref.DecidedBy, &decidedAt, &ref.Note,
		&ref.ToolName, &ref.Input, &ref.Reason, &ref.InputHash, &requested, &ref.Author, &votes)
	if errors.Is(err, pgx.ErrNoRows) {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", approvalID, prompt.ErrNotFound)
	}
	if err != nil {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", approvalID, err)
	}
	ref.Status = prompt.ApprovalStatus(status)
	if err := json.Unmarshal([]byte(votes), &ref.Votes); err != nil {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: votes: %w", approvalID, err)
	}
	if len(ref.Votes) == 0 {
		ref.Votes = nil
	}
	if ref.RequestedAt, err = parseTime(requested); err != nil {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: requested_at: %w", approvalID, err)
	}
	if decidedAt != nil && *decidedAt != "" {
		if ref.DecidedAt, err = parseTime(*decidedAt); err != nil {
			return prompt.ApprovalRef{}, fmt.Errorf("approval %s: decided_at: %w", approvalID, err)
		}
	}
	return ref, nil
}

// promptSelect reads prompts of the subquery p (which must have every
// column of prompts) with their items and the items' approvals, in the
// shape scanPrompts reads.
func promptSelect(p string) string {
	return `SELECT p.id, p.conversation_id, p.state, p.input, p.error, p.turns, p.cancelled_by, p.rev,
		p.created_at, p.updated_at, p.author, i.body,
		a.id, a.status, a.reason, a.requested_at, a.decided_by, a.decided_at, a.note, a.expires_at, a.remind_at, a.input_hash,
		a.edited_input
	FROM (` + p + `) p
	LEFT JOIN prompt_items i ON i.prompt_id = p.id
	-- A call's approval is its latest: an edited one is followed by the
	-- approval of the edited input.
	LEFT JOIN approvals a ON a.seq = (SELECT x.seq FROM approvals x
		WHERE x.prompt_id = i.prompt_id AND x.tool_call_id = i.call_id ORDER BY x.seq DESC LIMIT 1)
	ORDER BY p.seq, i.seq`
}

// scanPrompts reads rows of promptSelect, one per item (or one with NULL
// item columns for a prompt without items), ordered by prompt then item.
func scanPrompts(rows pgx.Rows, err error) ([]*prompt.Prompt, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out []*prompt.Prompt
		cur *prompt.Prompt
	)
	for rows.Next() {
		var (
			p                           prompt.Prompt
			state, created, updated     string
			body                        *string
			aID, aStatus, aReason       *string
			aRequested, aBy, aAt, aNote *string
			aHash, aEdited              *string
			aExpires, aRemind           *int64
		)
		if err := rows.Scan(&p.ID, &p.ConversationID, &state, &p.Input, &p.Error, &p.Turns, &p.CancelledBy, &p.Rev,
			&created, &updated, &p.Author, &body, &aID, &aStatus, &aReason, &aRequested, &aBy, &aAt, &aNote,
			&aExpires, &aRemind, &aHash, &aEdited); err != nil {
			return nil, err
		}
		if cur == nil || cur.ID != p.ID {
			var err error
			p.State = prompt.State(state)
			if p.CreatedAt, err = parseTime(created); err != nil {
				return nil, fmt.Errorf("prompt %s: %w", p.ID, err)
			}
			if p.UpdatedAt, err = parseTime(updated); err != nil {
				return nil, fmt.Errorf("prompt %s: %w", p.ID, err)
			}
			cur = &p
			out = append(out, cur)
		}
		if body == nil {
			continue
		}
		var it prompt.Item
		if err := json.Unmarshal([]byte(*body), &it); err != nil {
			return nil, fmt.Errorf("prompt %s: decode item %d: %w", cur.ID, len(cur.Output), err)
		}
		if it.Call != nil && aID != nil {
			a := &prompt.Approval{ID: *aID, Status: prompt.ApprovalStatus(*aStatus), Reason: *aReason,
				DecidedBy: *aBy, Note: *aNote, InputHash: *aHash, EditedInput: *aEdited}
			if a.RequestedAt, err = parseTime(*aRequested); err != nil {
				return nil, fmt.Errorf("approval %s: %w", a.ID, err)
			}
			if aAt != nil && *aAt != "" {
				if a.DecidedAt, err = parseTime(*aAt); err != nil {
					return nil, fmt.Errorf("approval %s: %w", a.ID, err)
				}
			}
			if aExpires != nil {
				a.ExpiresAt = time.UnixMilli(*aExpires).UTC()
			}
			if aRemind != nil {
				a.RemindAt = time.UnixMilli(*aRemind).UTC()
			}
			it.Call.Approval = a
		}
		cur.Output = append(cur.Output, it)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
