package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// auditTimeFormat has a fixed width, unlike RFC3339Nano, so that the
// text order of audit.at (COLLATE "C") is time order and Since can use
// its index.
const auditTimeFormat = "2006-01-02T15:04:05.000Z"

func auditTime(t time.Time) string { return t.UTC().Format(auditTimeFormat) }

// auditApproval records, in tx, a decision on approval id: its call, tool
// and input hash come from the approval's row. A decision recorded
// already (the same approval) is left as it is.
func auditApproval(ctx context.Context, tx pgx.Tx, id string, at time.Time, outcome prompt.Outcome,
	kind prompt.SourceKind, source, feedback string, onlyStatus string) error {
	_, err := tx.Exec(ctx, `INSERT INTO audit
		(at, conversation_id, prompt_id, call_id, approval_id, tool, input_hash, outcome, source_kind, source, feedback)
		SELECT $1, p.conversation_id, a.prompt_id, a.tool_call_id, a.id, a.tool_name, a.input_hash, $2, $3, $4, $5
		FROM approvals a JOIN prompts p ON p.id = a.prompt_id
		WHERE a.id = $6 AND ($7::text = '' OR a.status = $7::text)
		ON CONFLICT DO NOTHING`,
		auditTime(at), string(outcome), string(kind), source, feedback, id, onlyStatus)
	if err != nil {
		return fmt.Errorf("audit approval %s: %w", id, err)
	}
	return nil
}

// auditDecision records d, just taken on approval id, in tx.
func (db *DB) auditDecision(ctx context.Context, tx pgx.Tx, id string, d prompt.Decision) error {
	outcome, kind, source, feedback := prompt.DecisionAudit(d)
	at := d.At
	if at.IsZero() {
		at = db.now()
	}
	return auditApproval(ctx, tx, id, at, outcome, kind, source, feedback, "")
}

// auditCancelled records, in tx, that by cancelled the request of approval
// id with its prompt.
func auditCancelled(ctx context.Context, tx pgx.Tx, id, by string, at time.Time) error {
	return auditApproval(ctx, tx, id, at, prompt.OutcomeCancelled, prompt.SourcePerson, by, "", "")
}

// auditItem records, in tx, the decisions a save of call c of p carries:
// its ruling, and its approval's expiry when the prompt ended with the
// request undecided. Either is recorded once, however often the item is
// saved.
func auditItem(ctx context.Context, tx pgx.Tx, p *prompt.Prompt, c *prompt.Call) error {
	if rl := c.Ruling; rl != nil {
		_, err := tx.Exec(ctx, `INSERT INTO audit
			(at, conversation_id, prompt_id, call_id, approval_id, tool, input_hash, outcome, source_kind, source, feedback)
			VALUES ($1, $2, $3, $4, '', $5, $6, $7, $8, $9, $10)
			ON CONFLICT DO NOTHING`,
			auditTime(rl.At), p.ConversationID, p.ID, c.ID, c.Name, prompt.InputHash(c.Input()),
			string(prompt.RulingOutcome(rl)), string(rl.Kind), rl.By, rl.Why)
		if err != nil {
			return fmt.Errorf("audit ruling of call %s: %w", c.ID, err)
		}
	}
	if a := c.Approval; a != nil && a.Status == prompt.ApprovalExpired {
		return auditApproval(ctx, tx, a.ID, p.UpdatedAt, prompt.OutcomeExpired, prompt.SourceSystem,
			"prompt ended", a.Note, string(prompt.ApprovalExpired))
	}
	return nil
}

// Audit implements prompt.Store.
func (db *DB) Audit(ctx context.Context, q prompt.AuditQuery) ([]prompt.AuditEntry, error) {
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	since := ""
	if !q.Since.IsZero() {
		since = auditTime(q.Since)
	}
	const cols = `seq, at, conversation_id, prompt_id, call_id, approval_id, tool, input_hash, outcome,
		source_kind, source, feedback`
	var (
		rows pgx.Rows
		err  error
	)
	// Two statements rather than one with "$1 = '' OR": each can use its
	// index.
	if q.ConversationID == "" {
		rows, err = db.pool.Query(ctx, `SELECT `+cols+` FROM audit
			WHERE at >= $1 ORDER BY seq DESC LIMIT $2`, since, limit)
	} else {
		rows, err = db.pool.Query(ctx, `SELECT `+cols+` FROM audit
			WHERE conversation_id = $1 AND at >= $2 ORDER BY seq DESC LIMIT $3`, q.ConversationID, since, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rows.Close()
	var out []prompt.AuditEntry
	for rows.Next() {
		var (
			e            prompt.AuditEntry
			at           string
			outcome, src string
		)
		if err := rows.Scan(&e.Seq, &at, &e.ConversationID, &e.PromptID, &e.CallID, &e.ApprovalID, &e.Tool,
			&e.InputHash, &outcome, &src, &e.Source, &e.Feedback); err != nil {
			return nil, fmt.Errorf("read audit: %w", err)
		}
		e.Outcome, e.SourceKind = prompt.Outcome(outcome), prompt.SourceKind(src)
		if e.At, err = time.Parse(auditTimeFormat, at); err != nil {
			return nil, fmt.Errorf("read audit entry %d: bad time %q: %w", e.Seq, at, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	return out, nil
}
