package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"tollgate/prompt"
)

// Vote implements prompt.Store. The approval row stays the one
// compare-and-set: the vote is inserted only while the row is pending,
// and the vote that reaches the quorum moves it to approved in the same
// transaction, so of two votes at once that both would reach it, one
// decides and the other finds it decided.
func (db *DB) Vote(ctx context.Context, id, voterID, by string, at time.Time, quorum int) (prompt.ApprovalRef, error) {
	if quorum < 1 {
		return prompt.ApprovalRef{}, fmt.Errorf("vote on approval %s: quorum %d", id, quorum)
	}
	var ref prompt.ApprovalRef
	err := db.write(ctx, func(tx *sql.Tx) error {
		find := tx.StmtContext(ctx, db.stmt.findApprovalW)
		var err error
		if ref, err = findApproval(ctx, find, id); err != nil {
			return err
		}
		if ref.Status != prompt.ApprovalPending {
			return fmt.Errorf("it is %s: %w", ref.Status, prompt.ErrNotPending)
		}
		_, err = tx.StmtContext(ctx, db.stmt.insertVote).ExecContext(ctx, id, voterID, by, formatTime(at))
		if isPrimaryKey(err) {
			return fmt.Errorf("by %s: %w", voterID, prompt.ErrAlreadyVoted)
		}
		if err != nil {
			return fmt.Errorf("insert vote: %w", err)
		}
		if ref, err = findApproval(ctx, find, id); err != nil {
			return err
		}
		notice := prompt.Notice{Kind: prompt.NoticeVotes, ConversationID: ref.ConversationID, PromptID: ref.PromptID, ApprovalID: id}
		if len(ref.Votes) >= quorum {
			now := formatTime(db.now())
			res, err := tx.StmtContext(ctx, db.stmt.decide).ExecContext(ctx,
				string(prompt.ApprovalApproved), strings.Join(ref.Votes, ", "), formatTime(at), "", now, "", id)
			if err != nil {
				return fmt.Errorf("update approval: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return fmt.Errorf("decided meanwhile: %w", prompt.ErrNotPending) // not reached: one writer
			}
			if _, err = tx.StmtContext(ctx, db.stmt.resume).ExecContext(ctx, now, ref.PromptID); err != nil {
				return err
			}
			notice.Kind = prompt.NoticeDecided
			if ref, err = findApproval(ctx, find, id); err != nil {
				return err
			}
			// Audited as one decision by all who approved.
			if err := db.auditDecision(ctx, tx, id, prompt.Decision{Status: prompt.ApprovalApproved,
				By: strings.Join(ref.Votes, ", "), At: at}); err != nil {
				return err
			}
		}
		return db.insertNotice(ctx, tx, notice)
	})
	if err != nil {
		return ref, fmt.Errorf("vote on approval %s: %w", id, err)
	}
	return ref, nil
}

// isPrimaryKey reports whether err is a primary-key failure: here, the
// second vote of one person on one approval.
func isPrimaryKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
