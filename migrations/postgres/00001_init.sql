-- +goose Up

-- The schema of the SQLite migrations up to 00011, as one PostgreSQL
-- migration: a PostgreSQL database starts new, so it has no history to
-- carry. Comments on why each table and index exists are in the SQLite
-- files; what differs here says why.
--
-- Times are kept as the SQLite store keeps them, so both stores read and
-- write them alike and a time comes back exactly as it was given (a
-- timestamptz would keep microseconds only): text RFC 3339 in UTC, Unix
-- milliseconds (BIGINT) where a time is compared as a number, and audit.at
-- with fixed millisecond width so that text order is time order. seq
-- columns are identities: they give insertion order, as SQLite's rowids do.

CREATE TABLE prompts (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    conversation_id TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('running', 'waiting_for_approval', 'completed', 'failed')),
    input           TEXT    NOT NULL,
    error           TEXT    NOT NULL DEFAULT '',
    turns           BIGINT  NOT NULL,
    rev             BIGINT  NOT NULL,
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    cancelled_by    TEXT    NOT NULL DEFAULT '',
    author          TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX prompts_conversation ON prompts (conversation_id, seq);
CREATE UNIQUE INDEX prompts_one_active ON prompts (conversation_id)
    WHERE state IN ('running', 'waiting_for_approval');
CREATE INDEX prompts_running ON prompts (seq) WHERE state = 'running';
CREATE INDEX prompts_waiting ON prompts (seq) WHERE state = 'waiting_for_approval';

CREATE TABLE prompt_items (
    prompt_id TEXT   NOT NULL REFERENCES prompts (id),
    seq       BIGINT NOT NULL,
    type      TEXT   NOT NULL,
    turn      BIGINT NOT NULL,
    body      TEXT   NOT NULL,
    call_id   TEXT,
    PRIMARY KEY (prompt_id, seq)
);

CREATE TABLE approvals (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    prompt_id    TEXT NOT NULL REFERENCES prompts (id),
    tool_call_id TEXT NOT NULL,
    tool_name    TEXT NOT NULL,
    input        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('queued', 'pending', 'approved', 'rejected', 'executing',
                          'done', 'interrupted', 'expired', 'edited')),
    requested_at TEXT NOT NULL,
    decided_by   TEXT NOT NULL DEFAULT '',
    decided_at   TEXT,
    note         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    expires_at   BIGINT,
    remind_at    BIGINT,
    input_hash   TEXT NOT NULL DEFAULT '',
    edited_input TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_call ON approvals (prompt_id, tool_call_id, seq);
CREATE UNIQUE INDEX approvals_one_live ON approvals (prompt_id, tool_call_id) WHERE status <> 'edited';
CREATE INDEX approvals_status ON approvals (status);
CREATE INDEX approvals_expiry ON approvals (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX approvals_reminder ON approvals (remind_at) WHERE status = 'pending' AND remind_at IS NOT NULL;

CREATE TABLE approval_votes (
    approval_id TEXT NOT NULL REFERENCES approvals (id),
    voter_id    TEXT NOT NULL,
    voter       TEXT NOT NULL,
    at          TEXT NOT NULL,
    -- Votes are listed in the order they came: SQLite reads its rowid.
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (approval_id, voter_id)
);

CREATE TABLE chats (
    conversation_id TEXT   NOT NULL PRIMARY KEY,
    chat_id         BIGINT NOT NULL,
    created_at      TEXT   NOT NULL,
    updated_at      TEXT   NOT NULL
);

CREATE TABLE approval_messages (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    approval_id TEXT   NOT NULL REFERENCES approvals (id),
    chat_id     BIGINT NOT NULL,
    message_id  BIGINT NOT NULL,
    created_at  TEXT   NOT NULL,
    kind        TEXT   NOT NULL DEFAULT 'request',
    UNIQUE (chat_id, message_id)
);
CREATE INDEX approval_messages_approval ON approval_messages (approval_id, seq);

CREATE TABLE domains (
    domain   TEXT NOT NULL PRIMARY KEY,
    added_by TEXT NOT NULL,
    added_at TEXT NOT NULL
);

CREATE TABLE outbox (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('request', 'decided', 'answer', 'granted', 'votes')),
    prompt_id       TEXT    NOT NULL REFERENCES prompts (id),
    approval_id     TEXT    NOT NULL DEFAULT '',
    call_id         TEXT    NOT NULL DEFAULT '',
    resend          BOOLEAN NOT NULL DEFAULT false,
    attempts        BIGINT  NOT NULL DEFAULT 0,
    held_until      BIGINT,
    done_at         TEXT,
    note            TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL
);
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

CREATE TABLE inbox (
    update_id   BIGINT PRIMARY KEY,
    body        TEXT   NOT NULL,
    received_at TEXT   NOT NULL,
    -- COLLATE "C" here and on audit.at: byte order is time order for
    -- these stamps, whatever the database's locale sorts text by.
    handled_at  TEXT COLLATE "C"
);
CREATE INDEX inbox_unhandled ON inbox (update_id) WHERE handled_at IS NULL;
CREATE INDEX inbox_handled ON inbox (handled_at) WHERE handled_at IS NOT NULL;

CREATE TABLE grants (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT   NOT NULL UNIQUE,
    tool            TEXT   NOT NULL,
    scope           TEXT   NOT NULL,
    label           TEXT   NOT NULL,
    conversation_id TEXT   NOT NULL DEFAULT '',
    approval_id     TEXT   NOT NULL,
    created_by      TEXT   NOT NULL,
    created_at      TEXT   NOT NULL,
    expires_at      BIGINT,
    revoked_by      TEXT   NOT NULL DEFAULT '',
    revoked_at      TEXT
);
CREATE INDEX grants_live ON grants (tool, scope) WHERE revoked_at IS NULL;
CREATE INDEX grants_conversation ON grants (conversation_id) WHERE revoked_at IS NULL;

CREATE TABLE audit (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TEXT COLLATE "C" NOT NULL,
    conversation_id TEXT NOT NULL,
    prompt_id       TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    approval_id     TEXT NOT NULL DEFAULT '',
    tool            TEXT NOT NULL,
    input_hash      TEXT NOT NULL DEFAULT '',
    outcome         TEXT NOT NULL
        CHECK (outcome IN ('approved', 'rejected', 'expired', 'edited', 'cancelled', 'allowed', 'denied')),
    source_kind     TEXT NOT NULL
        CHECK (source_kind IN ('person', 'rule', 'grant', 'mode', 'timeout', 'system')),
    source          TEXT NOT NULL DEFAULT '',
    feedback        TEXT NOT NULL DEFAULT '',
    UNIQUE (prompt_id, call_id, approval_id)
);
CREATE INDEX audit_conversation ON audit (conversation_id, seq);
CREATE INDEX audit_at ON audit (at);

-- +goose Down
DROP TABLE audit;
DROP TABLE grants;
DROP TABLE inbox;
DROP TABLE outbox;
DROP TABLE domains;
DROP TABLE approval_messages;
DROP TABLE chats;
DROP TABLE approval_votes;
DROP TABLE approvals;
DROP TABLE prompt_items;
DROP TABLE prompts;
