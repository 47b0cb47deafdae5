package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"tollgate/prompt"
)

// insertNotice records n in the outbox within tx.
func (db *DB) insertNotice(ctx context.Context, tx *sql.Tx, n prompt.Notice) error {
	_, err := tx.StmtContext(ctx, db.stmt.insertNotice).ExecContext(ctx,
		n.ConversationID, string(n.Kind), n.PromptID, n.ApprovalID, n.CallID, formatTime(db.now()))
	if err != nil {
		return fmt.Errorf("record %s notice: %w", n.Kind, err)
	}
	return nil
}

// ResendWaiting implements prompt.Store in one statement: a request shown
// again for every pending approval of a waiting prompt that has no request
// still undelivered.
func (db *DB) ResendWaiting(ctx context.Context) (int, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, db.stmt.resend).ExecContext(ctx, formatTime(db.now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
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
	rows, err := db.stmt.due.QueryContext(ctx, now.UnixMilli(), limit)
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
	var ms sql.NullInt64
	if err := db.stmt.nextHeld.QueryRowContext(ctx).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next held notice: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64), true, nil
}

// MarkNotice records that outbox entry seq was delivered, or given up for
// good (note says why). Returns an error wrapping prompt.ErrNotFound if
// there is no such entry.
func (db *DB) MarkNotice(ctx context.Context, seq int64, note string) error {
	return db.updateNotice(ctx, "mark", db.stmt.markNotice, formatTime(db.now()), note, seq)
}

// HoldNotice counts a failed delivery of outbox entry seq and holds it, and
// so its conversation, until until. It ends the entry's claim: whichever
// sender holds the outbox then tries it again.
func (db *DB) HoldNotice(ctx context.Context, seq int64, until time.Time, note string) error {
	return db.updateNotice(ctx, "hold", db.stmt.holdNotice, until.UnixMilli(), note, seq)
}

func (db *DB) updateNotice(ctx context.Context, what string, st *sql.Stmt, args ...any) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return prompt.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s outbox entry %v: %w", what, args[len(args)-1], err)
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
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET claimed_by = ?1, claimed_until = ?2
			WHERE seq = ?3 AND done_at IS NULL
			  AND (claimed_by = ?1 OR claimed_until IS NULL OR claimed_until <= ?4)`,
			holder, now.Add(ttl).UnixMilli(), seq, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if claimed = n == 1; claimed {
			return nil
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM outbox WHERE seq = ?)`, seq).Scan(&exists); err != nil {
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

// errNoConversation is returned when a cancelled prompt vanished mid-way;
// it cannot happen while prompts are never deleted.
var errNoConversation = errors.New("prompt has no conversation")
