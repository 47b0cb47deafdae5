package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AddDomain adds domain, already canonical, to the web-fetch allowlist;
// added is false if it was already listed.
func (db *DB) AddDomain(ctx context.Context, domain, addedBy string) (bool, error) {
	if domain == "" {
		return false, errors.New("add domain: empty domain")
	}
	tag, err := db.pool.Exec(ctx, `INSERT INTO domains (domain, added_by, added_at) VALUES ($1, $2, $3)
		ON CONFLICT (domain) DO NOTHING`, domain, addedBy, formatTime(db.now()))
	if err != nil {
		return false, fmt.Errorf("add domain %s: %w", domain, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RemoveDomain removes domain from the allowlist; removed is false if it
// was not listed.
func (db *DB) RemoveDomain(ctx context.Context, domain string) (bool, error) {
	tag, err := db.pool.Exec(ctx, `DELETE FROM domains WHERE domain = $1`, domain)
	if err != nil {
		return false, fmt.Errorf("remove domain %s: %w", domain, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Domains returns every allowlisted domain, sorted byte-wise as the
// SQLite store sorts them.
func (db *DB) Domains(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT domain FROM domains ORDER BY domain COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	return out, nil
}

// Entries returns every allowlisted domain with who added it, by domain.
func (db *DB) Entries(ctx context.Context) (map[string]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT domain, added_by FROM domains`)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	defer rows.Close()
	out := make(map[string]string)
	for rows.Next() {
		var d, by string
		if err := rows.Scan(&d, &by); err != nil {
			return nil, fmt.Errorf("list domains: %w", err)
		}
		out[d] = by
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	return out, nil
}
