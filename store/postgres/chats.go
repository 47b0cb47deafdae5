package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"tollgate/prompt"
)

// SaveChat records that conversation conversationID is Telegram chat
// chatID. Saving it again changes nothing; a new chatID replaces the old
// one, as when Telegram migrates a group to a supergroup.
func (db *DB) SaveChat(ctx context.Context, conversationID string, chatID int64) error {
	if conversationID == "" {
		return errors.New("save chat: empty conversation ID")
	}
	now := formatTime(db.now())
	_, err := db.pool.Exec(ctx, `INSERT INTO chats (conversation_id, chat_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (conversation_id) DO UPDATE
		SET chat_id = excluded.chat_id, updated_at = excluded.updated_at
		WHERE chats.chat_id <> excluded.chat_id`,
		conversationID, chatID, now, now)
	if err != nil {
		return fmt.Errorf("save chat of %s: %w", conversationID, err)
	}
	return nil
}

// ChatOf returns the chat of a conversation, or an error wrapping
// prompt.ErrNotFound.
func (db *DB) ChatOf(ctx context.Context, conversationID string) (int64, error) {
	var chatID int64
	err := db.pool.QueryRow(ctx, `SELECT chat_id FROM chats WHERE conversation_id = $1`, conversationID).Scan(&chatID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("chat of %s: %w", conversationID, prompt.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("chat of %s: %w", conversationID, err)
	}
	return chatID, nil
}

// AddApprovalMessage records that message messageID in chat chatID shows
// approval approvalID. Recording it again changes nothing. Returns an
// error wrapping prompt.ErrNotFound if there is no such approval, and an
// error if the message is already recorded for another approval.
func (db *DB) AddApprovalMessage(ctx context.Context, approvalID string, chatID int64, messageID int) error {
	return db.addMessage(ctx, "request", approvalID, chatID, messageID)
}

// AddEditMessage records that message messageID in chat chatID asks for
// the edited input of approval approvalID, with the errors of
// AddApprovalMessage.
func (db *DB) AddEditMessage(ctx context.Context, approvalID string, chatID int64, messageID int) error {
	return db.addMessage(ctx, "edit", approvalID, chatID, messageID)
}

// EditByMessage returns the approval whose edited input message messageID
// in chat chatID asks for, or an error wrapping prompt.ErrNotFound.
func (db *DB) EditByMessage(ctx context.Context, chatID int64, messageID int) (string, error) {
	var id string
	err := db.pool.QueryRow(ctx, `SELECT approval_id FROM approval_messages
		WHERE chat_id = $1 AND message_id = $2 AND kind = 'edit'`, chatID, messageID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("edit of message %d in chat %d: %w", messageID, chatID, prompt.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("edit of message %d in chat %d: %w", messageID, chatID, err)
	}
	return id, nil
}

func (db *DB) addMessage(ctx context.Context, kind, approvalID string, chatID int64, messageID int) error {
	err := db.write(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM approvals WHERE id = $1`, approvalID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return prompt.ErrNotFound
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO approval_messages (approval_id, chat_id, message_id, created_at, kind)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (chat_id, message_id) DO NOTHING`,
			approvalID, chatID, messageID, formatTime(db.now()), kind)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var shown string
		err = tx.QueryRow(ctx, `SELECT approval_id FROM approval_messages WHERE chat_id = $1 AND message_id = $2`,
			chatID, messageID).Scan(&shown)
		if err != nil {
			return err
		}
		if shown != approvalID {
			return fmt.Errorf("the message already shows approval %s", shown)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add message %d in chat %d to approval %s: %w", messageID, chatID, approvalID, err)
	}
	return nil
}

// ApprovalMessages returns every message that shows approvalID, in every
// chat that holds one, oldest first; an error wrapping prompt.ErrNotFound
// if there are none.
func (db *DB) ApprovalMessages(ctx context.Context, approvalID string) ([]prompt.ApprovalCopy, error) {
	rows, err := db.pool.Query(ctx, `SELECT chat_id, message_id FROM approval_messages
		WHERE approval_id = $1 AND kind = 'request' ORDER BY seq`, approvalID)
	if err != nil {
		return nil, fmt.Errorf("messages of approval %s: %w", approvalID, err)
	}
	defer rows.Close()
	var copies []prompt.ApprovalCopy
	for rows.Next() {
		var c prompt.ApprovalCopy
		if err := rows.Scan(&c.ChatID, &c.MessageID); err != nil {
			return nil, fmt.Errorf("messages of approval %s: %w", approvalID, err)
		}
		copies = append(copies, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages of approval %s: %w", approvalID, err)
	}
	if len(copies) == 0 {
		return nil, fmt.Errorf("messages of approval %s: %w", approvalID, prompt.ErrNotFound)
	}
	return copies, nil
}

// ApprovalByMessage returns the approval shown by message messageID in
// chat chatID, or an error wrapping prompt.ErrNotFound.
func (db *DB) ApprovalByMessage(ctx context.Context, chatID int64, messageID int) (string, error) {
	var id string
	err := db.pool.QueryRow(ctx, `SELECT approval_id FROM approval_messages
		WHERE chat_id = $1 AND message_id = $2 AND kind = 'request'`, chatID, messageID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("approval of message %d in chat %d: %w", messageID, chatID, prompt.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("approval of message %d in chat %d: %w", messageID, chatID, err)
	}
	return id, nil
}
