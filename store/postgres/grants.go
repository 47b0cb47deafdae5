package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// insertGrant records g in tx: Decide calls it, so that an "always" and
// the approval it came with are one decision.
func insertGrant(ctx context.Context, tx pgx.Tx, g *prompt.Grant) error {
	_, err := tx.Exec(ctx, `INSERT INTO grants
		(id, tool, scope, label, conversation_id, approval_id, created_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		g.ID, g.Tool, g.Scope, g.Label, g.ConversationID, g.ApprovalID, g.By, formatTime(g.CreatedAt), nullMillis(g.ExpiresAt))
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

const grantColumns = `id, tool, scope, label, conversation_id, approval_id, created_by, created_at, expires_at,
	revoked_by, revoked_at`

// inForce selects the grants that cover conversation $1 at $2 (Unix ms).
const inForce = `revoked_at IS NULL AND (conversation_id = '' OR conversation_id = $1)
	AND (expires_at IS NULL OR expires_at > $2)`

func scanGrant(row pgx.Row) (prompt.Grant, error) {
	var (
		g         prompt.Grant
		created   string
		expires   *int64
		revokedAt *string
	)
	if err := row.Scan(&g.ID, &g.Tool, &g.Scope, &g.Label, &g.ConversationID, &g.ApprovalID, &g.By, &created,
		&expires, &g.RevokedBy, &revokedAt); err != nil {
		return g, err
	}
	var err error
	if g.CreatedAt, err = parseTime(created); err != nil {
		return g, fmt.Errorf("grant %s: %w", g.ID, err)
	}
	if expires != nil {
		g.ExpiresAt = time.UnixMilli(*expires).UTC()
	}
	if revokedAt != nil {
		if g.RevokedAt, err = parseTime(*revokedAt); err != nil {
			return g, fmt.Errorf("grant %s: %w", g.ID, err)
		}
	}
	return g, nil
}

// FindGrant implements prompt.Store.
func (db *DB) FindGrant(ctx context.Context, conversationID, tool, scope string, now time.Time) (prompt.Grant, error) {
	g, err := scanGrant(db.pool.QueryRow(ctx, `SELECT `+grantColumns+` FROM grants
		WHERE `+inForce+` AND tool = $3 AND scope = $4 ORDER BY seq DESC LIMIT 1`,
		conversationID, now.UnixMilli(), tool, scope))
	if errors.Is(err, pgx.ErrNoRows) {
		return prompt.Grant{}, fmt.Errorf("grant of %s in %s: %w", tool, conversationID, prompt.ErrNotFound)
	}
	if err != nil {
		return prompt.Grant{}, fmt.Errorf("grant of %s in %s: %w", tool, conversationID, err)
	}
	return g, nil
}

// Grants implements prompt.Store.
func (db *DB) Grants(ctx context.Context, conversationID string, now time.Time) ([]prompt.Grant, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+grantColumns+` FROM grants
		WHERE `+inForce+` ORDER BY seq DESC`, conversationID, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("grants of %s: %w", conversationID, err)
	}
	defer rows.Close()
	var gs []prompt.Grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("grants of %s: %w", conversationID, err)
		}
		gs = append(gs, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("grants of %s: %w", conversationID, err)
	}
	return gs, nil
}

// RevokeGrant implements prompt.Store.
func (db *DB) RevokeGrant(ctx context.Context, id, by string, at time.Time) (prompt.Grant, error) {
	var g prompt.Grant
	err := db.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE grants SET revoked_by = $1, revoked_at = $2 WHERE id = $3 AND revoked_at IS NULL`,
			by, formatTime(at), id)
		if err != nil {
			return err
		}
		g, err = scanGrant(tx.QueryRow(ctx, `SELECT `+grantColumns+` FROM grants WHERE id = $1`, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return prompt.ErrNotFound
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return prompt.ErrNotPending
		}
		return nil
	})
	if err != nil {
		return g, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return g, nil
}
