package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

var _ prompt.Leases = (*DB)(nil)

// Lease implements prompt.Leases as one upsert whose update applies only
// to a lapsed lease or the holder's own: two replicas racing for a free
// or lapsed lease serialise on the row, and one of them gets it.
func (db *DB) Lease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	tag, err := db.pool.Exec(ctx, `INSERT INTO leases (name, holder, until) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
		WHERE leases.holder = excluded.holder OR leases.until <= $4`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release implements prompt.Leases.
func (db *DB) Release(ctx context.Context, name, holder string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseHolder implements prompt.Leases.
func (db *DB) LeaseHolder(ctx context.Context, name string, now time.Time) (string, time.Time, error) {
	var holder string
	var until int64
	err := db.pool.QueryRow(ctx, `SELECT holder, until FROM leases WHERE name = $1 AND until > $2`,
		name, now.UnixMilli()).Scan(&holder, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("lease %s: %w", name, err)
	}
	return holder, time.UnixMilli(until).UTC(), nil
}
