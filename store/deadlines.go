package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"tollgate/prompt"
)

// NextDeadline implements prompt.Store.
func (db *DB) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	var ms sql.NullInt64
	err := db.reader.QueryRowContext(ctx, `SELECT min(x) FROM (
		SELECT min(expires_at) AS x FROM approvals WHERE status = 'pending' AND expires_at IS NOT NULL
		UNION ALL
		SELECT min(remind_at) FROM approvals WHERE status = 'pending' AND remind_at IS NOT NULL)`).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next approval deadline: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64), true, nil
}

// DueApprovals implements prompt.Store.
func (db *DB) DueApprovals(ctx context.Context, now time.Time) (expired, remind []prompt.ApprovalRef, err error) {
	if expired, err = db.dueRefs(ctx, "expires_at", now); err != nil {
		return nil, nil, err
	}
	if remind, err = db.dueRefs(ctx, "remind_at", now); err != nil {
		return nil, nil, err
	}
	return expired, remind, nil
}

// dueRefs lists the pending approvals whose column (expires_at or
// remind_at, never user input) is at or before now.
func (db *DB) dueRefs(ctx context.Context, column string, now time.Time) ([]prompt.ApprovalRef, error) {
	rows, err := db.reader.QueryContext(ctx, `SELECT a.id, a.prompt_id, p.conversation_id, a.tool_call_id
		FROM approvals a JOIN prompts p ON p.id = a.prompt_id
		WHERE a.status = 'pending' AND a.`+column+` IS NOT NULL AND a.`+column+` <= ?
		ORDER BY a.`+column, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("due approvals (%s): %w", column, err)
	}
	defer rows.Close()
	var refs []prompt.ApprovalRef
	for rows.Next() {
		ref := prompt.ApprovalRef{Status: prompt.ApprovalPending}
		if err := rows.Scan(&ref.ID, &ref.PromptID, &ref.ConversationID, &ref.CallID); err != nil {
			return nil, fmt.Errorf("due approvals (%s): %w", column, err)
		}
		refs = append(refs, ref)
	}
	return refs, rows.Err()
}

// Remind implements prompt.Store.
func (db *DB) Remind(ctx context.Context, id string) (bool, error) {
	var sent bool
	err := db.write(ctx, func(tx *sql.Tx) error {
		var promptID, conv string
		err := tx.QueryRowContext(ctx, `UPDATE approvals SET remind_at = NULL
			WHERE id = ? AND status = 'pending' AND remind_at IS NOT NULL
			RETURNING prompt_id, (SELECT conversation_id FROM prompts WHERE prompts.id = approvals.prompt_id)`, id).
			Scan(&promptID, &conv)
		if err == sql.ErrNoRows {
			return nil // decided, or reminded already
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (conversation_id, kind, prompt_id, approval_id, resend, created_at)
			VALUES (?, 'request', ?, ?, 1, ?)`, conv, promptID, id, formatTime(db.now())); err != nil {
			return err
		}
		sent = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("remind of approval %s: %w", id, err)
	}
	return sent, nil
}
