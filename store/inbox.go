package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"tollgate/prompt"
)

// RecordUpdates records Telegram updates, each the JSON of one Update as
// Telegram sent it, all in one transaction: either every update is
// recorded or, with the error, none. It returns the IDs of the updates not
// recorded before, in the order given; one recorded before, handled or
// not, is left as it was, since Telegram delivers an update again until it
// learns that it arrived. An update without a positive update_id is an
// error: it could not be recognised when it comes again.
func (db *DB) RecordUpdates(ctx context.Context, updates []json.RawMessage) ([]int64, error) {
	ids := make([]int64, len(updates))
	for i, u := range updates {
		var head struct {
			ID int64 `json:"update_id"`
		}
		if err := json.Unmarshal(u, &head); err != nil {
			return nil, fmt.Errorf("record updates: update %d of %d: %w", i+1, len(updates), err)
		}
		if head.ID <= 0 {
			return nil, fmt.Errorf("record updates: update %d of %d has no update_id", i+1, len(updates))
		}
		ids[i] = head.ID
	}
	var fresh []int64
	now := formatTime(db.now())
	err := db.write(ctx, func(tx *sql.Tx) error {
		fresh = fresh[:0]
		for i, u := range updates {
			res, err := tx.ExecContext(ctx, `INSERT INTO inbox (update_id, body, received_at) VALUES (?, ?, ?)
				ON CONFLICT (update_id) DO NOTHING`, ids[i], string(u), now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 1 {
				fresh = append(fresh, ids[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %d updates: %w", len(updates), err)
	}
	return fresh, nil
}

// MarkHandled records that update updateID was handled, so that no start
// handles it again. Marking it again changes nothing. Returns an error
// wrapping prompt.ErrNotFound if the update was never recorded.
func (db *DB) MarkHandled(ctx context.Context, updateID int64) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE inbox SET handled_at = ? WHERE update_id = ? AND handled_at IS NULL`,
			formatTime(db.now()), updateID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM inbox WHERE update_id = ?`, updateID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return prompt.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("mark update %d handled: %w", updateID, err)
	}
	return nil
}

// UnhandledUpdates returns, lowest update_id first, up to limit updates
// recorded and not marked handled whose update_id is above after: those a
// crash caught between recording and handling. Telegram numbers updates in
// the order they happened, so lowest first is oldest first; pass the last
// ID returned to read the next page.
func (db *DB) UnhandledUpdates(ctx context.Context, after int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT body FROM inbox
		WHERE handled_at IS NULL AND update_id > ? ORDER BY update_id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("unhandled updates: %w", err)
	}
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("unhandled updates: %w", err)
		}
		out = append(out, json.RawMessage(body))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unhandled updates: %w", err)
	}
	return out, nil
}

// PruneUpdates deletes the updates handled more than keep ago and returns
// how many it deleted. Unhandled updates are never deleted. keep must
// outlast the time Telegram may deliver an update again (it keeps an
// unconfirmed update for 24 hours), or a late redelivery would be taken
// for a new update.
func (db *DB) PruneUpdates(ctx context.Context, keep time.Duration) (int64, error) {
	if keep <= 0 {
		return 0, fmt.Errorf("prune updates: keep %v is not positive", keep)
	}
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		// The stamps compare as text: RFC 3339 in UTC sorts by time, to
		// within the fraction of a second formatTime trims, which is
		// nothing against a keep of hours.
		res, err := tx.ExecContext(ctx, `DELETE FROM inbox WHERE handled_at IS NOT NULL AND handled_at < ?`,
			formatTime(db.now().Add(-keep)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune updates handled over %v ago: %w", keep, err)
	}
	return n, nil
}
