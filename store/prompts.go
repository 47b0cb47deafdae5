package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"tollgate/prompt"
)

var _ prompt.Store = (*DB)(nil)

// SavePrompt implements prompt.Store. It writes the prompt row and only the
// output items whose Rev is above the stored revision, so a save costs the
// same whatever the prompt's length. It returns ErrStaleRevision if p.Rev is
// not above the stored revision.
func (db *DB) SavePrompt(ctx context.Context, p *prompt.Prompt) error {
	if err := checkPrompt(p); err != nil {
		return fmt.Errorf("save prompt: %w", err)
	}
	err := db.write(ctx, func(tx *sql.Tx) error { return db.savePrompt(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("save prompt %s: %w", p.ID, err)
	}
	return nil
}

// DecideApproval implements prompt.Store: the compare-and-set on the
// approval's status and the save of p commit together or not at all.
// Returns prompt.ErrNotPending if the approval was already decided,
// prompt.ErrUnknownCall if p has no such call or the store no such
// approval.
func (db *DB) DecideApproval(ctx context.Context, p *prompt.Prompt, callID string) error {
	if err := checkPrompt(p); err != nil {
		return fmt.Errorf("decide %s: %w", callID, err)
	}
	var call *prompt.Call
	for _, it := range p.Output {
		if it.Call != nil && it.Call.ID == callID {
			call = it.Call
		}
	}
	switch {
	case call == nil:
		return fmt.Errorf("decide %s in prompt %s: %w", callID, p.ID, prompt.ErrUnknownCall)
	case call.Approval == nil:
		return fmt.Errorf("decide %s in prompt %s: no approval asked: %w", callID, p.ID, prompt.ErrNotPending)
	case call.Status == prompt.CallPending:
		return fmt.Errorf("decide %s in prompt %s: the call is still pending in the given prompt", callID, p.ID)
	}
	a := call.Approval
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, db.stmt.decide).ExecContext(ctx,
			string(call.Status), a.DecidedBy, nullTime(a.DecidedAt), a.Note, formatTime(db.now()),
			a.ID, p.ID, call.ID)
		if err != nil {
			return fmt.Errorf("update approval %s: %w", a.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM approvals WHERE id = ? AND prompt_id = ? AND tool_call_id = ?`,
				a.ID, p.ID, call.ID).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("approval %s: %w", a.ID, prompt.ErrUnknownCall)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("approval %s is %s: %w", a.ID, status, prompt.ErrNotPending)
		}
		return db.savePrompt(ctx, tx, p)
	})
	if err != nil {
		return fmt.Errorf("decide %s in prompt %s: %w", callID, p.ID, err)
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

// savePrompt writes p within tx: the prompt row, then the items and
// approvals that changed after the stored revision.
func (db *DB) savePrompt(ctx context.Context, tx *sql.Tx, p *prompt.Prompt) error {
	stored := int64(math.MinInt64) // a new prompt: every item is written
	err := tx.StmtContext(ctx, db.stmt.rev).QueryRowContext(ctx, p.ID).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.StmtContext(ctx, db.stmt.insertPrompt).ExecContext(ctx,
			p.ID, p.ConversationID, string(p.State), p.Input, p.Error, p.Turns, p.Rev,
			formatTime(p.CreatedAt), formatTime(p.UpdatedAt))
		if err != nil {
			return fmt.Errorf("insert prompt: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read revision: %w", err)
	case p.Rev <= stored:
		return fmt.Errorf("revision %d is not above stored %d: %w", p.Rev, stored, ErrStaleRevision)
	default:
		_, err = tx.StmtContext(ctx, db.stmt.updatePrompt).ExecContext(ctx,
			string(p.State), p.Error, p.Turns, p.Rev, formatTime(p.UpdatedAt), p.ID)
		if err != nil {
			return fmt.Errorf("update prompt: %w", err)
		}
	}
	now := formatTime(db.now())
	for i, it := range p.Output {
		if it.Rev <= stored {
			continue
		}
		body, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("encode item %d: %w", i, err)
		}
		_, err = tx.StmtContext(ctx, db.stmt.saveItem).ExecContext(ctx,
			p.ID, i, string(it.Type), it.Turn, it.Rev, string(body))
		if err != nil {
			return fmt.Errorf("save item %d: %w", i, err)
		}
		if c := it.Call; c != nil && c.Approval != nil {
			if err := db.saveApproval(ctx, tx, p.ID, c, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// saveApproval inserts the approval of call c, or brings its row up to the
// call's status. It refuses what would falsify the audit trail: an
// approval ID that belongs to another call, and a decision on a pending
// approval, which only DecideApproval's compare-and-set may record.
func (db *DB) saveApproval(ctx context.Context, tx *sql.Tx, promptID string, c *prompt.Call, now string) error {
	a := c.Approval
	if a.ID == "" {
		return fmt.Errorf("call %s: approval without ID", c.ID)
	}
	res, err := tx.StmtContext(ctx, db.stmt.saveApproval).ExecContext(ctx,
		a.ID, promptID, c.ID, c.Name, c.Arguments, a.Reason, string(c.Status), formatTime(a.RequestedAt),
		a.DecidedBy, nullTime(a.DecidedAt), a.Note, now, now)
	if err != nil {
		return fmt.Errorf("save approval %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("save approval %s: it belongs to another call, or is pending and can only be decided by DecideApproval", a.ID)
	}
	return nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// UnfinishedPrompts implements prompt.Store: every prompt running or
// waiting for approval, oldest first, in one read.
func (db *DB) UnfinishedPrompts(ctx context.Context) ([]*prompt.Prompt, error) {
	rows, err := db.stmt.unfinished.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("unfinished prompts: %w", err)
	}
	ps, err := scanPrompts(rows)
	if err != nil {
		return nil, fmt.Errorf("unfinished prompts: %w", err)
	}
	return ps, nil
}

// History implements prompt.Store. "Before" is in the order prompts were
// first saved. Returns an error wrapping prompt.ErrNotFound if beforeID is
// not "" and is not a prompt of conversationID.
func (db *DB) History(ctx context.Context, conversationID, beforeID string, limit int) ([]*prompt.Prompt, error) {
	if limit <= 0 {
		return nil, nil
	}
	bound := int64(math.MaxInt64)
	if beforeID != "" {
		// Two statements need no common snapshot: a prompt's seq never
		// changes and prompts are never deleted.
		err := db.stmt.seq.QueryRowContext(ctx, beforeID, conversationID).Scan(&bound)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("history of %s before prompt %s: %w", conversationID, beforeID, prompt.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", conversationID, err)
		}
	}
	rows, err := db.stmt.history.QueryContext(ctx, conversationID, bound, limit)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", conversationID, err)
	}
	ps, err := scanPrompts(rows)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", conversationID, err)
	}
	return ps, nil
}

// FindApproval implements prompt.Store.
func (db *DB) FindApproval(ctx context.Context, approvalID string) (prompt.ApprovalRef, error) {
	ref := prompt.ApprovalRef{ID: approvalID}
	var (
		status    string
		decidedAt sql.NullString
	)
	err := db.stmt.findApproval.QueryRowContext(ctx, approvalID).Scan(&ref.PromptID, &ref.ConversationID,
		&ref.CallID, &status, &ref.DecidedBy, &decidedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", approvalID, prompt.ErrNotFound)
	}
	if err != nil {
		return prompt.ApprovalRef{}, fmt.Errorf("approval %s: %w", approvalID, err)
	}
	ref.Status = prompt.CallStatus(status)
	if decidedAt.Valid && decidedAt.String != "" {
		if ref.DecidedAt, err = parseTime(decidedAt.String); err != nil {
			return prompt.ApprovalRef{}, fmt.Errorf("approval %s: decided_at: %w", approvalID, err)
		}
	}
	return ref, nil
}

// scanPrompts reads rows of promptColumns, one per item (or one with a NULL
// body for a prompt without items), ordered by prompt then item.
func scanPrompts(rows *sql.Rows) ([]*prompt.Prompt, error) {
	defer rows.Close()
	var (
		out  []*prompt.Prompt
		cur  *prompt.Prompt
		body sql.NullString
	)
	for rows.Next() {
		var (
			p                prompt.Prompt
			state            string
			created, updated string
		)
		if err := rows.Scan(&p.ID, &p.ConversationID, &state, &p.Input, &p.Error, &p.Turns, &p.Rev,
			&created, &updated, &body); err != nil {
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
		if !body.Valid {
			continue
		}
		var it prompt.Item
		if err := json.Unmarshal([]byte(body.String), &it); err != nil {
			return nil, fmt.Errorf("prompt %s: decode item %d: %w", cur.ID, len(cur.Output), err)
		}
		if a := it.Call; a != nil && a.Approval != nil {
			a.Approval.RequestedAt = utc(a.Approval.RequestedAt)
			a.Approval.DecidedAt = utc(a.Approval.DecidedAt)
		}
		cur.Output = append(cur.Output, it)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// statements are prepared once at Open: parsing the SQL would otherwise
// cost more than running it, and Recover runs History once per prompt.
type statements struct {
	// writer
	rev, insertPrompt, updatePrompt, saveItem, saveApproval, decide *sql.Stmt
	// reader
	unfinished, seq, history, findApproval *sql.Stmt
}

// promptColumns are read by scanPrompts.
const promptColumns = `p.id, p.conversation_id, p.state, p.input, p.error, p.turns, p.rev,
	p.created_at, p.updated_at, i.body`

func (db *DB) prepare(ctx context.Context) error {
	for _, s := range []struct {
		dst  **sql.Stmt
		on   *sql.DB
		text string
	}{
		{&db.stmt.rev, db.writer, `SELECT rev FROM prompts WHERE id = ?`},
		{&db.stmt.insertPrompt, db.writer, `INSERT INTO prompts
			(id, conversation_id, state, input, error, turns, rev, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&db.stmt.updatePrompt, db.writer, `UPDATE prompts
			SET state = ?, error = ?, turns = ?, rev = ?, updated_at = ? WHERE id = ?`},
		{&db.stmt.saveItem, db.writer, `INSERT INTO prompt_items (prompt_id, seq, type, turn, rev, body)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (prompt_id, seq) DO UPDATE
			SET type = excluded.type, turn = excluded.turn, rev = excluded.rev, body = excluded.body`},
		{&db.stmt.saveApproval, db.writer, `INSERT INTO approvals
			(id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
			 decided_by, decided_at, note, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE
			SET status = excluded.status, decided_by = excluded.decided_by,
			    decided_at = excluded.decided_at, note = excluded.note, updated_at = excluded.updated_at
			WHERE prompt_id = excluded.prompt_id AND tool_call_id = excluded.tool_call_id
			  AND NOT (status = 'pending' AND excluded.status IN ('approved', 'rejected'))`},
		{&db.stmt.decide, db.writer, `UPDATE approvals
			SET status = ?, decided_by = ?, decided_at = ?, note = ?, updated_at = ?
			WHERE id = ? AND prompt_id = ? AND tool_call_id = ? AND status = 'pending'`},
		{&db.stmt.unfinished, db.reader, `SELECT ` + promptColumns + `
			FROM (SELECT * FROM prompts WHERE state IN ('running', 'waiting_for_approval')) p
			LEFT JOIN prompt_items i ON i.prompt_id = p.id
			ORDER BY p.seq, i.seq`},
		{&db.stmt.seq, db.reader, `SELECT seq FROM prompts WHERE id = ? AND conversation_id = ?`},
		{&db.stmt.history, db.reader, `SELECT ` + promptColumns + `
			FROM (SELECT * FROM prompts WHERE conversation_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?) p
			LEFT JOIN prompt_items i ON i.prompt_id = p.id
			ORDER BY p.seq, i.seq`},
		{&db.stmt.findApproval, db.reader, `SELECT a.prompt_id, p.conversation_id, a.tool_call_id, a.status, a.decided_by, a.decided_at
			FROM approvals a JOIN prompts p ON p.id = a.prompt_id WHERE a.id = ?`},
	} {
		st, err := s.on.PrepareContext(ctx, s.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.text, err)
		}
		*s.dst = st
	}
	return nil
}
