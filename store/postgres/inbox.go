package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// RecordUpdates records Telegram updates, each the JSON of one Update as
// Telegram sent it, all in one transaction, and returns the IDs of the
// updates not recorded before, in the order given; see store.RecordUpdates.
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
	err := db.write(ctx, func(tx pgx.Tx) error {
		fresh = fresh[:0]
		for i, u := range updates {
			tag, err := tx.Exec(ctx, `INSERT INTO inbox (update_id, body, received_at) VALUES ($1, $2, $3)
				ON CONFLICT (update_id) DO NOTHING`, ids[i], string(u), now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
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

// MarkHandled records that update updateID was handled. Marking it again
// changes nothing. Returns an error wrapping prompt.ErrNotFound if the
// update was never recorded.
func (db *DB) MarkHandled(ctx context.Context, updateID int64) error {
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE inbox SET handled_at = $1 WHERE update_id = $2 AND handled_at IS NULL`,
			formatTime(db.now()), updateID)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM inbox WHERE update_id = $1`, updateID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
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
// recorded and not marked handled whose update_id is above after.
func (db *DB) UnhandledUpdates(ctx context.Context, after int64, limit int) ([]json.RawMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT body FROM inbox
		WHERE handled_at IS NULL AND update_id > $1 ORDER BY update_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("unhandled updates: %w", err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unhandled updates: %w", err)
	}
	var out []json.RawMessage
	for _, b := range bodies {
		out = append(out, json.RawMessage(b))
	}
	return out, nil
}

// PruneUpdates deletes the updates handled more than keep ago and returns
// how many it deleted. Unhandled updates are never deleted.
func (db *DB) PruneUpdates(ctx context.Context, keep time.Duration) (int64, error) {
	if keep <= 0 {
		return 0, fmt.Errorf("prune updates: keep %v is not positive", keep)
	}
	// The stamps compare as text (handled_at is COLLATE "C"): RFC 3339 in
	// UTC sorts by time, to within the fraction of a second formatTime
	// trims, which is nothing against a keep of hours.
	tag, err := db.pool.Exec(ctx, `DELETE FROM inbox WHERE handled_at IS NOT NULL AND handled_at < $1`,
		formatTime(db.now().Add(-keep)))
	if err != nil {
		return 0, fmt.Errorf("prune updates handled over %v ago: %w", keep, err)
	}
	return tag.RowsAffected(), nil
}
