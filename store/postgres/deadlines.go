package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// NextDeadline implements prompt.Store.
func (db *DB) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	var ms *int64
	err := db.pool.QueryRow(ctx, `SELECT min(x) FROM (
		SELECT min(expires_at) AS x FROM approvals WHERE status = 'pending' AND expires_at IS NOT NULL
		UNION ALL
		SELECT min(remind_at) FROM approvals WHERE status = 'pending' AND remind_at IS NOT NULL) d`).Scan(&ms)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next approval deadline: %w", err)
	}
	if ms == nil {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(*ms), true, nil
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
	rows, err := db.pool.Query(ctx, `SELECT a.id, a.prompt_id, p.conversation_id, a.tool_call_id
		FROM approvals a JOIN prompts p ON p.id = a.prompt_id
		WHERE a.status = 'pending' AND a.`+column+` IS NOT NULL AND a.`+column+` <= $1
		ORDER BY a.`+column+`, a.seq`, now.UnixMilli())
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due approvals (%s): %w", column, err)
	}
	return refs, nil
}

// Remind implements prompt.Store.
func (db *DB) Remind(ctx context.Context, id string) (bool, error) {
	var sent bool
	err := db.write(ctx, func(tx pgx.Tx) error {
		if err := lockPromptOf(ctx, tx, id); err != nil {
			return err
		}
		var promptID, conv string
		err := tx.QueryRow(ctx, `UPDATE approvals a SET remind_at = NULL
			FROM prompts p
			WHERE a.id = $1 AND a.status = 'pending' AND a.remind_at IS NOT NULL AND p.id = a.prompt_id
			RETURNING a.prompt_id, p.conversation_id`, id).Scan(&promptID, &conv)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // decided, or reminded already
		}
		if err != nil {
			return err
		}
		if err := db.insertNotice(ctx, tx, prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: conv,
			PromptID: promptID, ApprovalID: id}, resend); err != nil {
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
