package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"tollgate/prompt"
)

var _ prompt.Leases = (*DB)(nil)

// Lease implements prompt.Leases as one upsert whose update applies only
// to a lapsed lease or the holder's own: the compare-and-set.
func (db *DB) Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	var held bool
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO leases (name, holder, until) VALUES (?1, ?2, ?3)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
			WHERE leases.holder = excluded.holder OR leases.until <= ?4`,
			name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		held = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return held, nil
}

// Release implements prompt.Leases.
func (db *DB) Release(ctx context.Context, name, holder string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseHolder implements prompt.Leases.
func (db *DB) LeaseHolder(ctx context.Context, name string, now time.Time) (string, time.Time, error) {
	var holder string
	var until int64
	err := db.reader.QueryRowContext(ctx, `SELECT holder, until FROM leases WHERE name = ? AND until > ?`,
		name, now.UnixMilli()).Scan(&holder, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("lease %s: %w", name, err)
	}
	return holder, time.UnixMilli(until).UTC(), nil
}
