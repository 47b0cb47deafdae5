package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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
	err := db.write(ctx, func(tx *sql.Tx) error { return db.createPrompt(ctx, tx, p) })
	if err != nil {
		return fmt.Errorf("create prompt %s in %s: %w", p.ID, p.ConversationID, err)
	}
	return nil
}

func (db *DB) createPrompt(ctx context.Context, tx *sql.Tx, p *prompt.Prompt) error {
	var rev int64
	switch err := tx.StmtContext(ctx, db.stmt.rev).QueryRowContext(ctx, p.ID).Scan(&rev); {
	case err == nil:
		return prompt.ErrExists
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("look for prompt: %w", err)
	}
	_, err := tx.StmtContext(ctx, db.stmt.insertPrompt).ExecContext(ctx,
		p.ID, p.ConversationID, string(p.State), p.Input, p.Error, p.Turns, p.CancelledBy, p.Rev,
		formatTime(p.CreatedAt), formatTime(p.UpdatedAt), p.Author)
	if isUnique(err, "prompts.conversation_id") {
		return prompt.ErrBusy
	}
	if err != nil {
		return fmt.Errorf("insert prompt: %w", err)
	}
	all := make([]int, len(p.Output))
	for i := range all {
		all[i] = i
	}
	return db.saveItems(ctx, tx, p, all)
}

// isUnique reports whether err is a unique-constraint failure on the given
// "table.column".
func isUnique(err error, column string) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE &&
		strings.Contains(se.Error(), column)
}

// SavePrompt implements prompt.Store: one transaction updates the prompt
// row if it is still at revision p.Rev-1, then the changed items and their
// approvals, and records the notices. Its cost depends on what changed,
// not on the prompt's length.
func (db *DB) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	if err := checkPrompt(p); err != nil {
		return fmt.Errorf("save prompt: %w", err)
	}
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, db.stmt.updatePrompt).ExecContext(ctx,
			string(p.State), p.Error, p.Turns, p.Rev, formatTime(p.UpdatedAt), p.ID, p.Rev-1)
		if err != nil {
			return fmt.Errorf("update prompt: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var rev int64
			err := tx.StmtContext(ctx, db.stmt.rev).QueryRowContext(ctx, p.ID).Scan(&rev)
			if errors.Is(err, sql.ErrNoRows) {
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
func (db *DB) saveItems(ctx context.Context, tx *sql.Tx, p *prompt.Prompt, changed []int) error {
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
		_, err = tx.StmtContext(ctx, db.stmt.saveItem).ExecContext(ctx, p.ID, i, string(it.Type), it.Turn, callID, string(body))
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
// Decide and CancelPrompt, as a compare-and-set.
func (db *DB) saveApproval(ctx context.Context, tx *sql.Tx, promptID string, c *prompt.Call, now string) error {
	a := c.Approval
	if a.ID == "" {
		return fmt.Errorf("call %s: approval without ID", c.ID)
	}
	res, err := tx.StmtContext(ctx, db.stmt.updateApproval).ExecContext(ctx,
		a.Note, string(a.Status), now, a.ID, promptID, c.ID)
	if err != nil {
		return fmt.Errorf("update approval %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n > 0 {
		return nil
	}
	if a.Status != prompt.ApprovalPending {
		return fmt.Errorf("save approval %s: a new approval must be pending, not %s", a.ID, a.Status)
	}
	_, err = tx.StmtContext(ctx, db.stmt.insertApproval).ExecContext(ctx,
		a.ID, promptID, c.ID, c.Name, c.Input(), a.Reason, formatTime(a.RequestedAt), a.Note, now, now,
		nullMillis(a.ExpiresAt), nullMillis(a.RemindAt), a.InputHash)
	if isUnique(err, "approvals.id") {
		return fmt.Errorf("save approval %s: the ID belongs to another call", a.ID)
	}
	if isUnique(err, "approvals.prompt_id") { // approvals_one_live
		return fmt.Errorf("save approval %s: call %s has a live approval already", a.ID, c.ID)
	}
	if err != nil {
		return fmt.Errorf("insert approval %s: %w", a.ID, err)
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
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := formatTime(db.now())
		res, err := tx.StmtContext(ctx, db.stmt.decide).ExecContext(ctx,
			string(d.Status), d.By, nullTime(d.At), d.Note, now, d.Input, id)
		if err != nil {
			return fmt.Errorf("update approval: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if ref, err = findApproval(ctx, tx.StmtContext(ctx, db.stmt.findApprovalW), id); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("it is %s: %w", ref.Status, prompt.ErrNotPending)
		}
		if _, err = tx.StmtContext(ctx, db.stmt.resume).ExecContext(ctx, now, ref.PromptID); err != nil {
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
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, db.stmt.cancel).ExecContext(ctx, by, formatTime(at), id)
		if err != nil {
			return fmt.Errorf("update prompt: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var rev int64
			err := tx.StmtContext(ctx, db.stmt.rev).QueryRowContext(ctx, id).Scan(&rev)
			if errors.Is(err, sql.ErrNoRows) {
				return prompt.ErrNotFound
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("it has ended: %w", prompt.ErrNotPending)
		}
		var conv string
		if err := tx.StmtContext(ctx, db.stmt.conversation).QueryRowContext(ctx, id).Scan(&conv); err != nil {
			return fmt.Errorf("%w: %w", errNoConversation, err)
		}
		rows, err := tx.StmtContext(ctx, db.stmt.cancelApproval).QueryContext(ctx, by, formatTime(at), formatTime(db.now()), id)
		if err != nil {
			return err
		}
		var rejected []string
		for rows.Next() {
			var aid string
			if err := rows.Scan(&aid); err != nil {
				rows.Close()
				return err
			}
			rejected = append(rejected, aid)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
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

func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// LoadPrompt implements prompt.Store, in one statement and so from one
// snapshot.
func (db *DB) LoadPrompt(ctx context.Context, id string) (*prompt.Prompt, error) {
	ps, _, err := scanPrompts(db.stmt.load.QueryContext(ctx, id))
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
	ps, _, err := scanPrompts(db.stmt.active.QueryContext(ctx, conversationID))
	if err != nil {
		return nil, fmt.Errorf("active prompt of %s: %w", conversationID, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("active prompt of %s: %w", conversationID, prompt.ErrNotFound)
	}
	return ps[0], nil
}

// bound fills in the end of a listing at its first page.
func (db *DB) bound(ctx context.Context, cur prompt.Cursor) (prompt.Cursor, error) {
	if cur.Bound != 0 {
		return cur, nil
	}
	err := db.stmt.maxSeq.QueryRowContext(ctx).Scan(&cur.Bound)
	return cur, err
}

// RunningPrompts implements prompt.Store.
func (db *DB) RunningPrompts(ctx context.Context, cur prompt.Cursor, limit int) ([]string, prompt.Cursor, error) {
	cur, err := db.bound(ctx, cur)
	if err != nil {
		return nil, cur, fmt.Errorf("running prompts: %w", err)
	}
	rows, err := db.stmt.running.QueryContext(ctx, cur.After, cur.Bound, limit)
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
	ps, _, err := scanPrompts(db.stmt.history.QueryContext(ctx, conversationID, bound, limit))
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", conversationID, err)
	}
	return ps, nil
}

// FindApproval implements prompt.Store.
func (db *DB) FindApproval(ctx context.Context, approvalID string) (prompt.ApprovalRef, error) {
	return findApproval(ctx, db.stmt.findApproval, approvalID)
}

func findApproval(ctx context.Context, st *sql.Stmt, approvalID string) (prompt.ApprovalRef, error) {
	ref := prompt.ApprovalRef{ID: approvalID}
	var (
		status, requested, votes string
		decidedAt                sql.NullString
	)
	err := st.QueryRowContext(ctx, approvalID).Scan(&ref.PromptID, &ref.ConversationID,
		&ref.CallID, &status, &ref.DecidedBy, &decidedAt, &ref.Note,
		&ref.ToolName, &ref.Input, &ref.Reason, &ref.InputHash, &requested, &ref.Author, &votes)
	if errors.Is(err, sql.ErrNoRows) {
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
	if decidedAt.Valid && decidedAt.String != "" {
		if ref.DecidedAt, err = parseTime(decidedAt.String); err != nil {
			return prompt.ApprovalRef{}, fmt.Errorf("approval %s: decided_at: %w", approvalID, err)
		}
	}
	return ref, nil
}

// scanPrompts reads rows of promptColumns, one per item (or one with NULL
// item columns for a prompt without items), ordered by prompt then item.
// It returns the prompts and the seq of the last one.
func scanPrompts(rows *sql.Rows, err error) ([]*prompt.Prompt, int64, error) {
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var (
		out  []*prompt.Prompt
		cur  *prompt.Prompt
		last int64
	)
	for rows.Next() {
		var (
			p                           prompt.Prompt
			seq                         int64
			state, created, updated     string
			body                        sql.NullString
			aID, aStatus, aReason       sql.NullString
			aRequested, aBy, aAt, aNote sql.NullString
			aHash, aEdited              sql.NullString
			aExpires, aRemind           sql.NullInt64
		)
		if err := rows.Scan(&seq, &p.ID, &p.ConversationID, &state, &p.Input, &p.Error, &p.Turns, &p.CancelledBy, &p.Rev,
			&created, &updated, &p.Author, &body, &aID, &aStatus, &aReason, &aRequested, &aBy, &aAt, &aNote, &aExpires, &aRemind, &aHash, &aEdited); err != nil {
			return nil, 0, err
		}
		if cur == nil || cur.ID != p.ID {
			var err error
			p.State = prompt.State(state)
			if p.CreatedAt, err = parseTime(created); err != nil {
				return nil, 0, fmt.Errorf("prompt %s: %w", p.ID, err)
			}
			if p.UpdatedAt, err = parseTime(updated); err != nil {
				return nil, 0, fmt.Errorf("prompt %s: %w", p.ID, err)
			}
			cur, last = &p, seq
			out = append(out, cur)
		}
		if !body.Valid {
			continue
		}
		var it prompt.Item
		if err := json.Unmarshal([]byte(body.String), &it); err != nil {
			return nil, 0, fmt.Errorf("prompt %s: decode item %d: %w", cur.ID, len(cur.Output), err)
		}
		if it.Call != nil && aID.Valid {
			a := &prompt.Approval{ID: aID.String, Status: prompt.ApprovalStatus(aStatus.String), Reason: aReason.String,
				DecidedBy: aBy.String, Note: aNote.String, InputHash: aHash.String, EditedInput: aEdited.String}
			if a.RequestedAt, err = parseTime(aRequested.String); err != nil {
				return nil, 0, fmt.Errorf("approval %s: %w", a.ID, err)
			}
			if aAt.Valid && aAt.String != "" {
				if a.DecidedAt, err = parseTime(aAt.String); err != nil {
					return nil, 0, fmt.Errorf("approval %s: %w", a.ID, err)
				}
			}
			if aExpires.Valid {
				a.ExpiresAt = time.UnixMilli(aExpires.Int64).UTC()
			}
			if aRemind.Valid {
				a.RemindAt = time.UnixMilli(aRemind.Int64).UTC()
			}
			it.Call.Approval = a
		}
		cur.Output = append(cur.Output, it)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, last, nil
}

// statements are prepared once at Open: parsing the SQL would otherwise
// cost more than running it.
type statements struct {
	// writer
	rev, insertPrompt, updatePrompt, saveItem, updateApproval, insertApproval,
	decide, findApprovalW, resume, cancel, cancelApproval, conversation,
	insertNotice, resend, markNotice, holdNotice, insertVote *sql.Stmt
	// reader
	load, active, maxSeq, running, seq, history, findApproval, due, nextHeld *sql.Stmt
}

func (st *statements) all() []*sql.Stmt {
	return []*sql.Stmt{st.rev, st.insertPrompt, st.updatePrompt, st.saveItem, st.updateApproval, st.insertApproval,
		st.decide, st.findApprovalW, st.resume, st.cancel, st.cancelApproval, st.conversation,
		st.insertNotice, st.resend, st.markNotice, st.holdNotice, st.insertVote,
		st.load, st.active, st.maxSeq, st.running, st.seq, st.history, st.findApproval, st.due, st.nextHeld}
}

// promptSelect reads prompts of the subquery p (which must have every
// column of prompts) with their items and the items' approvals, in the
// shape scanPrompts reads.
func promptSelect(p string) string {
	return `SELECT p.seq, p.id, p.conversation_id, p.state, p.input, p.error, p.turns, p.cancelled_by, p.rev,
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

const findApprovalSQL = `SELECT a.prompt_id, p.conversation_id, a.tool_call_id, a.status, a.decided_by, a.decided_at, a.note,
		a.tool_name, a.input, a.reason, a.input_hash, a.requested_at, p.author,
		(SELECT json_group_array(v.voter ORDER BY v.rowid) FROM approval_votes v WHERE v.approval_id = a.id)
	FROM approvals a JOIN prompts p ON p.id = a.prompt_id WHERE a.id = ?`

func (db *DB) prepare(ctx context.Context) error {
	for _, s := range []struct {
		dst  **sql.Stmt
		on   *sql.DB
		text string
	}{
		{&db.stmt.rev, db.writer, `SELECT rev FROM prompts WHERE id = ?`},
		{&db.stmt.insertPrompt, db.writer, `INSERT INTO prompts
			(id, conversation_id, state, input, error, turns, cancelled_by, rev, created_at, updated_at, author)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&db.stmt.updatePrompt, db.writer, `UPDATE prompts
			SET state = ?, error = ?, turns = ?, rev = ?, updated_at = ? WHERE id = ? AND rev = ?`},
		{&db.stmt.saveItem, db.writer, `INSERT INTO prompt_items (prompt_id, seq, type, turn, call_id, body)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (prompt_id, seq) DO UPDATE
			SET type = excluded.type, turn = excluded.turn, call_id = excluded.call_id, body = excluded.body`},
		{&db.stmt.updateApproval, db.writer, `UPDATE approvals
			SET note = ?1,
			    status = CASE WHEN status = 'pending' AND ?2 = 'expired' THEN 'expired' ELSE status END,
			    updated_at = ?3
			WHERE id = ?4 AND prompt_id = ?5 AND tool_call_id = ?6`},
		{&db.stmt.insertApproval, db.writer, `INSERT INTO approvals
			(id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at, note, created_at, updated_at,
			 expires_at, remind_at, input_hash)
			VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)`},
		{&db.stmt.decide, db.writer, `UPDATE approvals
			SET status = ?, decided_by = ?, decided_at = ?, note = ?, updated_at = ?, edited_input = ?
			WHERE id = ? AND status = 'pending'`},
		{&db.stmt.findApprovalW, db.writer, findApprovalSQL},
		{&db.stmt.resume, db.writer, `UPDATE prompts
			SET state = 'running', rev = rev + 1, updated_at = ? WHERE id = ?`},
		{&db.stmt.cancel, db.writer, `UPDATE prompts
			SET cancelled_by = CASE WHEN cancelled_by = '' THEN ?1 ELSE cancelled_by END,
			    state = 'running', rev = rev + 1, updated_at = ?2
			WHERE id = ?3 AND state IN ('running', 'waiting_for_approval')`},
		{&db.stmt.cancelApproval, db.writer, `UPDATE approvals
			SET status = 'rejected', decided_by = ?1, decided_at = ?2, note = 'cancelled', updated_at = ?3
			WHERE prompt_id = ?4 AND status = 'pending' RETURNING id`},
		{&db.stmt.conversation, db.writer, `SELECT conversation_id FROM prompts WHERE id = ?`},
		{&db.stmt.insertNotice, db.writer, `INSERT INTO outbox (conversation_id, kind, prompt_id, approval_id, call_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`},
		{&db.stmt.resend, db.writer, `INSERT INTO outbox (conversation_id, kind, prompt_id, approval_id, resend, created_at)
			SELECT p.conversation_id, 'request', p.id, a.id, 1, ?
			FROM approvals a JOIN prompts p ON p.id = a.prompt_id
			WHERE a.status = 'pending' AND p.state = 'waiting_for_approval'
			  AND NOT EXISTS (SELECT 1 FROM outbox o
			                  WHERE o.approval_id = a.id AND o.kind = 'request' AND o.done_at IS NULL)
			ORDER BY a.rowid`},
		{&db.stmt.insertVote, db.writer, `INSERT INTO approval_votes (approval_id, voter_id, voter, at) VALUES (?, ?, ?, ?)`},
		{&db.stmt.markNotice, db.writer, `UPDATE outbox SET done_at = ?, note = ? WHERE seq = ?`},
		{&db.stmt.holdNotice, db.writer, `UPDATE outbox SET held_until = ?, attempts = attempts + 1, note = ?,
			claimed_by = '', claimed_until = NULL WHERE seq = ?`},
		{&db.stmt.load, db.reader, promptSelect(`SELECT * FROM prompts WHERE id = ?`)},
		{&db.stmt.active, db.reader, promptSelect(`SELECT * FROM prompts
			WHERE conversation_id = ? AND state IN ('running', 'waiting_for_approval')`)},
		{&db.stmt.maxSeq, db.reader, `SELECT coalesce(max(seq), 0) FROM prompts`},
		{&db.stmt.running, db.reader, `SELECT id, seq FROM prompts
			WHERE state = 'running' AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`},
		{&db.stmt.due, db.reader, `SELECT o.seq, o.conversation_id, o.kind, o.prompt_id, o.approval_id, o.call_id, o.resend, o.attempts
			FROM outbox o
			JOIN (SELECT min(seq) AS seq FROM outbox WHERE done_at IS NULL GROUP BY conversation_id) h ON h.seq = o.seq
			WHERE o.held_until IS NULL OR o.held_until <= ?
			ORDER BY o.resend, o.seq LIMIT ?`},
		{&db.stmt.nextHeld, db.reader, `SELECT min(held_until) FROM outbox WHERE done_at IS NULL AND held_until IS NOT NULL`},
		{&db.stmt.seq, db.reader, `SELECT seq FROM prompts WHERE id = ? AND conversation_id = ?`},
		{&db.stmt.history, db.reader, promptSelect(`SELECT * FROM prompts
			WHERE conversation_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`)},
		{&db.stmt.findApproval, db.reader, findApprovalSQL},
	} {
		st, err := s.on.PrepareContext(ctx, s.text)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.text, err)
		}
		*s.dst = st
	}
	return nil
}
