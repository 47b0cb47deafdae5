package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// AddDomain adds domain, already canonical, to the web-fetch allowlist;
// added is false if it was already listed.
func (db *DB) AddDomain(ctx context.Context, domain, addedBy string) (added bool, err error) {
	if domain == "" {
		return false, errors.New("add domain: empty domain")
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO domains (domain, added_by, added_at) VALUES (?, ?, ?)
			ON CONFLICT (domain) DO NOTHING`, domain, addedBy, formatTime(db.now()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		added = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("add domain %s: %w", domain, err)
	}
	return added, nil
}

// RemoveDomain removes domain from the allowlist; removed is false if it
// was not listed.
func (db *DB) RemoveDomain(ctx context.Context, domain string) (removed bool, err error) {
	err = db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM domains WHERE domain = ?`, domain)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		removed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("remove domain %s: %w", domain, err)
	}
	return removed, nil
}

// Domains returns every allowlisted domain, sorted.
func (db *DB) Domains(ctx context.Context) ([]string, error) {
	rows, err := db.reader.QueryContext(ctx, `SELECT domain FROM domains ORDER BY domain`)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("list domains: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	return out, nil
}

// Entries returns every allowlisted domain with who added it, by domain.
func (db *DB) Entries(ctx context.Context) (map[string]string, error) {
	rows, err := db.reader.QueryContext(ctx, `SELECT domain, added_by FROM domains`)
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
