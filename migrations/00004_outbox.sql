-- +goose Up

-- What a change obliges Tollgate to tell a chat, written in the same
-- transaction as the change: a request with its buttons, the outcome of
-- an approval on every copy, an answer. A sender delivers each once, in
-- seq order within a conversation; a crash between the change and the
-- send loses nothing. Delivered rows are kept, like the prompts.
CREATE TABLE outbox (
    seq             INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('request', 'decided', 'answer')),
    prompt_id       TEXT    NOT NULL REFERENCES prompts (id),
    approval_id     TEXT    NOT NULL DEFAULT '',
    -- 1: a request shown again after a restart; it goes after the notices
    -- of changes made since, so a start with many waiting requests does
    -- not hold up the chats that are talking now.
    resend          INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    -- Not before (Unix milliseconds, so it compares as a number): a 429's
    -- retry_after, a back-off.
    held_until      INTEGER,
    done_at         TEXT,               -- delivered, or given up (note says why)
    note            TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL
);

-- The sender reads the oldest undelivered row of each conversation.
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
-- The sender sleeps until the earliest hold runs out.
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
-- A restart re-sends a waiting request only if none is undelivered.
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

-- Answers that ended but never reached their chat (the table that tracked
-- them goes away) become the outbox's first rows.
INSERT INTO outbox (conversation_id, kind, prompt_id, created_at)
    SELECT p.conversation_id, 'answer', p.id, p.updated_at FROM prompts p
    WHERE p.state IN ('completed', 'failed')
      AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.prompt_id = p.id)
    ORDER BY p.seq;
DROP TABLE answers;

-- +goose Down
CREATE TABLE answers (
    prompt_id    TEXT NOT NULL PRIMARY KEY REFERENCES prompts (id),
    delivered_at TEXT NOT NULL,
    note         TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT INTO answers (prompt_id, delivered_at, note)
    SELECT id, updated_at, 'before the outbox was dropped' FROM prompts
    WHERE state IN ('completed', 'failed')
      AND id NOT IN (SELECT prompt_id FROM outbox WHERE kind = 'answer' AND done_at IS NULL);
DROP TABLE outbox;
