-- +goose Up

-- seq gives the order prompts were first saved in: History and
-- UnfinishedPrompts read "oldest first" by it, since created_at may tie.
CREATE TABLE prompts (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    conversation_id TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('running', 'waiting_for_approval', 'completed', 'failed')),
    input           TEXT    NOT NULL,
    error           TEXT    NOT NULL DEFAULT '',
    turns           INTEGER NOT NULL,
    rev             INTEGER NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);

-- Partial: a start-up looks only for the few unfinished prompts among all
-- finished ones, and the index stays as small as that set.
CREATE INDEX prompts_unfinished ON prompts (seq)
    WHERE state IN ('running', 'waiting_for_approval');

CREATE INDEX prompts_conversation ON prompts (conversation_id, seq);

-- One row per output item, so a save writes only the items that changed
-- instead of rewriting the whole output. body is the item as JSON.
CREATE TABLE prompt_items (
    prompt_id TEXT    NOT NULL REFERENCES prompts (id),
    seq       INTEGER NOT NULL,
    type      TEXT    NOT NULL,
    turn      INTEGER NOT NULL,
    rev       INTEGER NOT NULL,
    body      TEXT    NOT NULL,
    PRIMARY KEY (prompt_id, seq)
) WITHOUT ROWID;

-- One row per gated tool call: the audit trail of who allowed what, and the
-- row a decision compare-and-sets. Never deleted.
CREATE TABLE approvals (
    id           TEXT NOT NULL PRIMARY KEY,
    prompt_id    TEXT NOT NULL REFERENCES prompts (id),
    tool_call_id TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    input        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('queued', 'pending', 'approved', 'rejected', 'executing',
                          'done', 'interrupted', 'expired')),
    requested_at TEXT NOT NULL,
    decided_by   TEXT NOT NULL DEFAULT '',
    decided_at   TEXT,
    note         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (prompt_id, tool_call_id)
);

CREATE INDEX approvals_status ON approvals (status);

-- A conversation is a Telegram chat.
CREATE TABLE chats (
    conversation_id TEXT    NOT NULL PRIMARY KEY,
    chat_id         INTEGER NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL
);

-- Every message that shows an approval, so a decision can edit each copy,
-- including those re-sent after restarts. seq keeps them oldest first.
CREATE TABLE approval_messages (
    seq         INTEGER PRIMARY KEY,
    approval_id TEXT    NOT NULL REFERENCES approvals (id),
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    created_at  TEXT    NOT NULL,
    UNIQUE (chat_id, message_id)
);

CREATE INDEX approval_messages_approval ON approval_messages (approval_id, seq);

-- The web-fetch allowlist; domains arrive canonical.
CREATE TABLE domains (
    domain   TEXT NOT NULL PRIMARY KEY,
    added_by TEXT NOT NULL,
    added_at TEXT NOT NULL
);

-- +goose Down
DROP TABLE domains;
DROP TABLE approval_messages;
DROP TABLE chats;
DROP TABLE approvals;
DROP TABLE prompt_items;
DROP TABLE prompts;
