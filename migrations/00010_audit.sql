-- +goose Up

-- The audit: one row per decision on a call, whoever or whatever made it
-- (a person, an operator's rule, a grant, the approval mode, a timeout,
-- or the end of its prompt), written in the same transaction as the
-- decision itself. Rows are only ever inserted. at is UTC with fixed
-- millisecond precision ("2006-01-02T15:04:05.000Z") so that text order
-- is time order. approval_id is '' for a call decided without a request;
-- the UNIQUE key makes a second write of the same decision a no-op.
CREATE TABLE audit (
    seq             INTEGER PRIMARY KEY,
    at              TEXT NOT NULL,
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

-- Upgrading keeps history: every approval already decided becomes a row,
-- oldest decision first. A rejection noted "cancelled" was /cancel or
-- ⛔ Stop; an expiry with nobody named is a timeout when its note says
-- so, else its prompt ended undecided.
INSERT INTO audit (at, conversation_id, prompt_id, call_id, approval_id, tool, input_hash, outcome,
        source_kind, source, feedback)
    SELECT strftime('%Y-%m-%dT%H:%M:%fZ', coalesce(a.decided_at, a.updated_at)),
        p.conversation_id, a.prompt_id, a.tool_call_id, a.id, a.tool_name, a.input_hash,
        CASE WHEN a.status = 'rejected' AND a.note = 'cancelled' THEN 'cancelled' ELSE a.status END,
        CASE WHEN a.decided_by <> '' THEN 'person'
             WHEN a.note LIKE 'no decision within %' THEN 'timeout'
             ELSE 'system' END,
        CASE WHEN a.decided_by <> '' THEN a.decided_by
             WHEN a.note LIKE 'no decision within %' THEN a.note
             ELSE 'prompt ended' END,
        CASE WHEN a.decided_by = '' AND a.note LIKE 'no decision within %' THEN ''
             WHEN a.status = 'edited' THEN a.edited_input
             ELSE a.note END
    FROM approvals a JOIN prompts p ON p.id = a.prompt_id
    WHERE a.status IN ('approved', 'rejected', 'expired', 'edited')
    ORDER BY coalesce(a.decided_at, a.updated_at), a.seq;

-- And every call a rule, a grant or the mode decided, from the ruling
-- kept in its item. The input hash is computed in Go, so these rows have
-- none.
INSERT INTO audit (at, conversation_id, prompt_id, call_id, approval_id, tool, input_hash, outcome,
        source_kind, source, feedback)
    SELECT strftime('%Y-%m-%dT%H:%M:%fZ', json_extract(i.body, '$.call.ruling.at')),
        p.conversation_id, i.prompt_id, i.call_id, '', json_extract(i.body, '$.call.name'), '',
        CASE WHEN json_extract(i.body, '$.call.ruling.allowed') THEN 'allowed' ELSE 'denied' END,
        json_extract(i.body, '$.call.ruling.kind'),
        coalesce(json_extract(i.body, '$.call.ruling.by'), ''),
        coalesce(json_extract(i.body, '$.call.ruling.why'), '')
    FROM prompt_items i JOIN prompts p ON p.id = i.prompt_id
    WHERE i.call_id IS NOT NULL AND json_extract(i.body, '$.call.ruling.kind') IN ('rule', 'grant', 'mode')
    ORDER BY json_extract(i.body, '$.call.ruling.at'), p.seq, i.seq
    ON CONFLICT DO NOTHING;

-- +goose Down
DROP TABLE audit;
