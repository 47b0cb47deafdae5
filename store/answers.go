package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"tollgate/prompt"
)

// UnansweredPrompts returns the answers of up to limit prompts that ended
// (completed or failed) without MarkAnswered, oldest first: answers a crash
// kept from their chat.
func (db *DB) UnansweredPrompts(ctx context.Context, limit int) ([]prompt.Answer, error) {
	if limit <= 0 {
		return nil, nil
	}
	ps, _, err := scanPrompts(db.reader.QueryContext(ctx, promptSelect(`SELECT * FROM prompts q
		WHERE q.state IN ('completed', 'failed')
		  AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.prompt_id = q.id)
		ORDER BY q.seq LIMIT ?`), limit))
	if err != nil {
		return nil, fmt.Errorf("unanswered prompts: %w", err)
	}
	answers := make([]prompt.Answer, 0, len(ps))
	for _, p := range ps {
		answers = append(answers, prompt.Answer{PromptID: p.ID, ConversationID: p.ConversationID, State: p.State,
			Text: p.FinalText(), Error: p.Error})
	}
	return answers, nil
}

// MarkAnswered records that the answer of prompt promptID was dealt with:
// delivered, or given up for good (note says why). Marking it again
// changes nothing. Returns an error wrapping prompt.ErrNotFound if there
// is no such prompt.
func (db *DB) MarkAnswered(ctx context.Context, promptID, note string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM prompts WHERE id = ?`, promptID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return prompt.ErrNotFound
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO answers (prompt_id, delivered_at, note) VALUES (?, ?, ?)
			ON CONFLICT (prompt_id) DO NOTHING`, promptID, formatTime(db.now()), note)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark prompt %s answered: %w", promptID, err)
	}
	return nil
}
