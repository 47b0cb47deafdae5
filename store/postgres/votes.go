package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// Vote implements prompt.Store. The approval row stays the one
// compare-and-set: the vote is counted while its prompt's row is locked,
// so votes on one request are counted one at a time, and the vote that
// reaches the quorum moves the approval to approved in the same
// transaction; of two votes at once that both would reach it, one decides
// and the other finds it decided.
func (db *DB) Vote(ctx context.Context, id, voterID, by string, at time.Time, quorum int) (prompt.ApprovalRef, error) {
	if quorum < 1 {
		return prompt.ApprovalRef{}, fmt.Errorf("vote on approval %s: quorum %d", id, quorum)
	}
	var ref prompt.ApprovalRef
	err := db.write(ctx, func(tx pgx.Tx) error {
		if err := lockPromptOf(ctx, tx, id); err != nil {
			return err
		}
		var err error
		if ref, err = findApproval(ctx, tx, id); err != nil {
			return err
		}
		if ref.Status != prompt.ApprovalPending {
			return fmt.Errorf("it is %s: %w", ref.Status, prompt.ErrNotPending)
		}
		_, err = tx.Exec(ctx, `INSERT INTO approval_votes (approval_id, voter_id, voter, at) VALUES ($1, $2, $3, $4)`,
			id, voterID, by, formatTime(at))
		if isUnique(err, "approval_votes_pkey") {
			return fmt.Errorf("by %s: %w", voterID, prompt.ErrAlreadyVoted)
		}
		if err != nil {
			return fmt.Errorf("insert vote: %w", err)
		}
		if ref, err = findApproval(ctx, tx, id); err != nil {
			return err
		}
		notice := prompt.Notice{Kind: prompt.NoticeVotes, ConversationID: ref.ConversationID, PromptID: ref.PromptID, ApprovalID: id}
		if len(ref.Votes) >= quorum {
			by := strings.Join(ref.Votes, ", ")
			moved, err := db.decide(ctx, tx, id, prompt.ApprovalApproved, by, at, "", "")
			if err != nil {
				return err
			}
			if !moved {
				return fmt.Errorf("decided meanwhile: %w", prompt.ErrNotPending) // not reached: the prompt is locked
			}
			if err := db.resume(ctx, tx, ref.PromptID); err != nil {
				return err
			}
			notice.Kind = prompt.NoticeDecided
			if ref, err = findApproval(ctx, tx, id); err != nil {
				return err
			}
			// Audited as one decision by all who approved.
			if err := db.auditDecision(ctx, tx, id, prompt.Decision{Status: prompt.ApprovalApproved, By: by, At: at}); err != nil {
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
