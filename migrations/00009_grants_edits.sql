-- +goose Up

-- Edit before approving: a person may replace a call's input instead of
-- deciding it. The request closes as 'edited' (keeping what was written in
-- edited_input) and the edited call asks again under a new approval of the
-- same call, so a call may now have several approvals: the live one is
-- its latest (seq), and at most one is not edited. SQLite cannot drop a
-- UNIQUE constraint or change a CHECK in place, so the table is rebuilt;
-- seq is an explicit INTEGER PRIMARY KEY so that VACUUM keeps the order.
CREATE TABLE approvals_new (
    seq          INTEGER PRIMARY KEY,
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
    expires_at   INTEGER,
    remind_at    INTEGER,
    input_hash   TEXT NOT NULL DEFAULT '',
    edited_input TEXT NOT NULL DEFAULT ''
);
INSERT INTO approvals_new (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
        decided_by, decided_at, note, created_at, updated_at, expires_at, remind_at, input_hash)
    SELECT id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
        decided_by, decided_at, note, created_at, updated_at, expires_at, remind_at, input_hash
    FROM approvals ORDER BY rowid;
-- approval_messages refers to approvals, and the store enforces foreign
-- keys (which a transaction cannot turn off): dropping a table whose rows
-- are referred to fails. The messages step aside, keeping their seq, while
-- the table is swapped.
CREATE TABLE approval_messages_keep AS SELECT * FROM approval_messages;
DELETE FROM approval_messages;
DROP TABLE approvals;
ALTER TABLE approvals_new RENAME TO approvals;
INSERT INTO approval_messages SELECT * FROM approval_messages_keep ORDER BY seq;
DROP TABLE approval_messages_keep;
CREATE INDEX approvals_call ON approvals (prompt_id, tool_call_id, seq);
CREATE UNIQUE INDEX approvals_one_live ON approvals (prompt_id, tool_call_id) WHERE status <> 'edited';
CREATE INDEX approvals_status ON approvals (status);
CREATE INDEX approvals_expiry ON approvals (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX approvals_reminder ON approvals (remind_at) WHERE status = 'pending' AND remind_at IS NOT NULL;

-- Grants: "always" chosen on a request. conversation_id '' covers every
-- chat; expires_at (Unix milliseconds) NULL lasts until revoked. Kept
-- after they end, as the record of what ran without asking.
CREATE TABLE grants (
    seq             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    tool            TEXT    NOT NULL,
    scope           TEXT    NOT NULL,
    label           TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL DEFAULT '',
    approval_id     TEXT    NOT NULL,
    created_by      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    expires_at      INTEGER,
    revoked_by      TEXT    NOT NULL DEFAULT '',
    revoked_at      TEXT
);
CREATE INDEX grants_live ON grants (tool, scope) WHERE revoked_at IS NULL;
CREATE INDEX grants_conversation ON grants (conversation_id) WHERE revoked_at IS NULL;

-- The outbox learns one more kind, 'granted' (a call ran without asking:
-- one line says which grant allowed it), naming the call in call_id. The
-- CHECK changes, so the table is rebuilt.
CREATE TABLE outbox_new (
    seq             INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('request', 'decided', 'answer', 'granted')),
    prompt_id       TEXT    NOT NULL REFERENCES prompts (id),
    approval_id     TEXT    NOT NULL DEFAULT '',
    call_id         TEXT    NOT NULL DEFAULT '',
    resend          INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    held_until      INTEGER,
    done_at         TEXT,
    note            TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL
);
INSERT INTO outbox_new (seq, conversation_id, kind, prompt_id, approval_id, resend, attempts, held_until,
        done_at, note, created_at)
    SELECT seq, conversation_id, kind, prompt_id, approval_id, resend, attempts, held_until,
        done_at, note, created_at
    FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

-- The ✏️ Edit button sends a message asking for the new input; a reply to
-- it edits its request. kind tells it from a copy of the request, which a
-- decision edits.
ALTER TABLE approval_messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'request';

-- +goose Down
ALTER TABLE approval_messages DROP COLUMN kind;

CREATE TABLE outbox_old (
    seq             INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('request', 'decided', 'answer')),
    prompt_id       TEXT    NOT NULL REFERENCES prompts (id),
    approval_id     TEXT    NOT NULL DEFAULT '',
    resend          INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    held_until      INTEGER,
    done_at         TEXT,
    note            TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL
);
INSERT INTO outbox_old (seq, conversation_id, kind, prompt_id, approval_id, resend, attempts, held_until,
        done_at, note, created_at)
    SELECT seq, conversation_id, kind, prompt_id, approval_id, resend, attempts, held_until,
        done_at, note, created_at
    FROM outbox WHERE kind <> 'granted';
DROP TABLE outbox;
ALTER TABLE outbox_old RENAME TO outbox;
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

DROP TABLE grants;

-- Going back keeps one approval per call: the live one.
CREATE TABLE approvals_old (
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
    expires_at   INTEGER,
    remind_at    INTEGER,
    input_hash   TEXT NOT NULL DEFAULT '',
    UNIQUE (prompt_id, tool_call_id)
);
INSERT INTO approvals_old (id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
        decided_by, decided_at, note, created_at, updated_at, expires_at, remind_at, input_hash)
    SELECT id, prompt_id, tool_call_id, tool_name, input, reason, status, requested_at,
        decided_by, decided_at, note, created_at, updated_at, expires_at, remind_at, input_hash
    FROM approvals WHERE status <> 'edited' ORDER BY seq;
-- As going up: the messages step aside while the table is swapped; those
-- of edited approvals go with them.
CREATE TABLE approval_messages_keep AS SELECT * FROM approval_messages
    WHERE approval_id IN (SELECT id FROM approvals_old);
DELETE FROM approval_messages;
DROP TABLE approvals;
ALTER TABLE approvals_old RENAME TO approvals;
INSERT INTO approval_messages SELECT * FROM approval_messages_keep ORDER BY seq;
DROP TABLE approval_messages_keep;
CREATE INDEX approvals_status ON approvals (status);
CREATE INDEX approvals_expiry ON approvals (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX approvals_reminder ON approvals (remind_at) WHERE status = 'pending' AND remind_at IS NOT NULL;
