package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// resend marks a notice as a request shown again.
const resend = true

// outboxLock is the class of the transaction-level advisory locks that
// order a conversation's outbox rows; resendLock keys the one that keeps
// two ResendWaiting from both recording a request.
const (
	outboxLock = 0x746f6c6c // "toll"
	resendLock = 0x67617465 // "gate"
)

// insertNotice records n in the outbox within tx. A sequence hands out
// seq when the row is inserted, not when it commits; so that a
// conversation's rows become visible in seq order, which is the order the
// sender delivers them in, the insert first takes a lock on the
// conversation that is held until the transaction ends.
func (db *DB) insertNotice(ctx context.Context, tx pgx.Tx, n prompt.Notice, resend ...bool) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(outboxLock), n.ConversationID); err != nil {
		return fmt.Errorf("record %s notice: lock conversation: %w", n.Kind, err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO outbox (conversation_id, kind, prompt_id, approval_id, call_id, resend, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		n.ConversationID, string(n.Kind), n.PromptID, n.ApprovalID, n.CallID, len(resend) > 0 && resend[0],
		formatTime(db.now()))
	if err != nil {
		return fmt.Errorf("record %s notice: %w", n.Kind, err)
	}
	return nil
}

// ResendWaiting implements prompt.Store in one statement: a request shown
// again for every pending approval of a waiting prompt that has no request
// still undelivered. A lock keeps two processes starting at once from
// both recording them.
func (db *DB) ResendWaiting(ctx context.Context) (int, error) {
	var n int64
	err := db.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(outboxLock), int32(resendLock)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO outbox (conversation_id, kind, prompt_id, approval_id, resend, created_at)
			SELECT p.conversation_id, 'request', p.id, a.id, true, $1
			FROM approvals a JOIN prompts p ON p.id = a.prompt_id
			WHERE a.status = 'pending' AND p.state = 'waiting_for_approval'
			  AND NOT EXISTS (SELECT 1 FROM outbox o
			                  WHERE o.approval_id = a.id AND o.kind = 'request' AND o.done_at IS NULL)
			ORDER BY a.seq`, formatTime(db.now()))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("re-send waiting requests: %w", err)
	}
	return int(n), nil
}

// DueNotices returns up to limit outbox entries to deliver at now: the
// oldest undelivered entry of each conversation, unless it is held until
// later; re-sends after the rest, then oldest first.
func (db *DB) DueNotices(ctx context.Context, now time.Time, limit int) ([]prompt.OutboxEntry, error) {
	rows, err := db.pool.Query(ctx, `SELECT o.seq, o.conversation_id, o.kind, o.prompt_id, o.approval_id, o.call_id,
			o.resend, o.attempts
		FROM outbox o
		JOIN (SELECT min(seq) AS seq FROM outbox WHERE done_at IS NULL GROUP BY conversation_id) h ON h.seq = o.seq
		WHERE o.held_until IS NULL OR o.held_until <= $1
		ORDER BY o.resend, o.seq LIMIT $2`, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("due notices: %w", err)
	}
	defer rows.Close()
	var out []prompt.OutboxEntry
	for rows.Next() {
		var e prompt.OutboxEntry
		var kind string
		if err := rows.Scan(&e.Seq, &e.ConversationID, &kind, &e.PromptID, &e.ApprovalID, &e.CallID, &e.Resend, &e.Attempts); err != nil {
			return nil, fmt.Errorf("due notices: %w", err)
		}
		e.Kind = prompt.NoticeKind(kind)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due notices: %w", err)
	}
	return out, nil
}

// NextNoticeAt returns when the earliest held entry becomes due, and false
// if none is held.
func (db *DB) NextNoticeAt(ctx context.Context) (time.Time, bool, error) {
	var ms *int64
	if err := db.pool.QueryRow(ctx, `SELECT min(held_until) FROM outbox
		WHERE done_at IS NULL AND held_until IS NOT NULL`).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next held notice: %w", err)
	}
	if ms == nil {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(*ms), true, nil
}

// MarkNotice records that outbox entry seq was delivered, or given up for
// good (note says why). Returns an error wrapping prompt.ErrNotFound if
// there is no such entry.
func (db *DB) MarkNotice(ctx context.Context, seq int64, note string) error {
	return db.updateNotice(ctx, "mark", seq, `UPDATE outbox SET done_at = $1, note = $2 WHERE seq = $3`,
		formatTime(db.now()), note, seq)
}

// HoldNotice counts a failed delivery of outbox entry seq and holds it, and
// so its conversation, until until. It ends the entry's claim: whichever
// sender holds the outbox then tries it again.
func (db *DB) HoldNotice(ctx context.Context, seq int64, until time.Time, note string) error {
	return db.updateNotice(ctx, "hold", seq, `UPDATE outbox SET held_until = $1, attempts = attempts + 1, note = $2,
		claimed_by = '', claimed_until = NULL WHERE seq = $3`, until.UnixMilli(), note, seq)
}

func (db *DB) updateNotice(ctx context.Context, what string, seq int64, sql string, args ...any) error {
	tag, err := db.pool.Exec(ctx, sql, args...)
	if err == nil && tag.RowsAffected() == 0 {
		err = prompt.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s outbox entry %d: %w", what, seq, err)
	}
	return nil
}

// ClaimNotice gives outbox entry seq to holder until now+ttl, if it is
// undelivered and not claimed by another holder whose claim has not
// lapsed, and reports whether holder now holds it: a compare-and-set on
// the row. Returns an error wrapping prompt.ErrNotFound if there is no
// such entry.
func (db *DB) ClaimNotice(ctx context.Context, seq int64, holder string, now time.Time, ttl time.Duration) (bool, error) {
	var claimed bool
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE outbox SET claimed_by = $1, claimed_until = $2
			WHERE seq = $3 AND done_at IS NULL
			  AND (claimed_by = $1 OR claimed_until IS NULL OR claimed_until <= $4)`,
			holder, now.Add(ttl).UnixMilli(), seq, now.UnixMilli())
		if err != nil {
			return err
		}
		if claimed = tag.RowsAffected() == 1; claimed {
			return nil
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE seq = $1)`, seq).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return prompt.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("claim outbox entry %d: %w", seq, err)
	}
	return claimed, nil
}
