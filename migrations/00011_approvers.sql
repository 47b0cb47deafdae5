-- +goose Up

-- Who started a prompt (a Telegram user ID; '' for prompts from before):
-- with APPROVAL_SELF=false that person may not approve its requests while
-- another approver exists.
ALTER TABLE prompts ADD COLUMN author TEXT NOT NULL DEFAULT '';

-- APPROVAL_QUORUM: each approval of a request that needs several, one row
-- per person. voter_id tells people apart (a name can change); voter is
-- how the request shows them. The approval row stays the compare-and-set:
-- the vote that reaches the quorum decides it in the same transaction.
CREATE TABLE approval_votes (
    approval_id TEXT NOT NULL REFERENCES approvals (id),
    voter_id    TEXT NOT NULL,
    voter       TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (approval_id, voter_id)
);

-- The outbox learns one more kind, 'votes' (a vote counted and the
-- request still waits: every copy shows who approved so far). The CHECK
-- changes, so the table is rebuilt, as 00009 did.
CREATE TABLE outbox_new (
    seq             INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL,
    kind            TEXT    NOT NULL CHECK (kind IN ('request', 'decided', 'answer', 'granted', 'votes')),
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
INSERT INTO outbox_new (seq, conversation_id, kind, prompt_id, approval_id, call_id, resend, attempts, held_until,
        done_at, note, created_at)
    SELECT seq, conversation_id, kind, prompt_id, approval_id, call_id, resend, attempts, held_until,
        done_at, note, created_at
    FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

-- +goose Down
CREATE TABLE outbox_old (
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
INSERT INTO outbox_old (seq, conversation_id, kind, prompt_id, approval_id, call_id, resend, attempts, held_until,
        done_at, note, created_at)
    SELECT seq, conversation_id, kind, prompt_id, approval_id, call_id, resend, attempts, held_until,
        done_at, note, created_at
    FROM outbox WHERE kind <> 'votes';
DROP TABLE outbox;
ALTER TABLE outbox_old RENAME TO outbox;
CREATE INDEX outbox_undelivered ON outbox (conversation_id, seq) WHERE done_at IS NULL;
CREATE INDEX outbox_held ON outbox (held_until) WHERE done_at IS NULL AND held_until IS NOT NULL;
CREATE INDEX outbox_requests ON outbox (approval_id) WHERE done_at IS NULL AND kind = 'request';

DROP TABLE approval_votes;
ALTER TABLE prompts DROP COLUMN author;
