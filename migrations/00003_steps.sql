-- +goose Up

-- The store is the truth: a decision is a compare-and-set on the approval
-- row alone, and the items no longer carry a copy of their approval.

-- An approval's status is now the human decision only: pending, approved,
-- rejected, or expired (its prompt ended without a decision). What the
-- call did after it is the call's status, in its item. The CHECK of
-- 00001 allows these four already.
UPDATE approvals SET status = CASE
        WHEN status IN ('pending', 'approved', 'rejected') THEN status
        WHEN decided_by <> '' THEN 'approved'
        ELSE 'expired'
    END;

-- Items are joined to their approval by call ID in one statement, so a
-- prompt is read from one snapshot.
ALTER TABLE prompt_items ADD COLUMN call_id TEXT;
UPDATE prompt_items SET call_id = json_extract(body, '$.call.id') WHERE type = 'tool';
UPDATE prompt_items SET body = json_remove(body, '$.rev', '$.call.approval');
-- A save names the items it changed; no per-item revision is needed.
ALTER TABLE prompt_items DROP COLUMN rev;

-- Cancel is recorded on the prompt, for its next step to end it.
ALTER TABLE prompts ADD COLUMN cancelled_by TEXT NOT NULL DEFAULT '';

-- One unfinished prompt per conversation, kept by the database rather
-- than by a map in one process. The old code kept the same rule, so this
-- only ends prompts that could never have run again.
UPDATE prompts SET state = 'failed', error = 'Superseded by a newer request in the same chat.'
    WHERE state IN ('running', 'waiting_for_approval')
      AND seq < (SELECT max(q.seq) FROM prompts q
                 WHERE q.conversation_id = prompts.conversation_id
                   AND q.state IN ('running', 'waiting_for_approval'));
CREATE UNIQUE INDEX prompts_one_active ON prompts (conversation_id)
    WHERE state IN ('running', 'waiting_for_approval');

-- A start resumes the running prompts and pages the waiting ones; each
-- list has its own small index.
DROP INDEX prompts_unfinished;
CREATE INDEX prompts_running ON prompts (seq) WHERE state = 'running';
CREATE INDEX prompts_waiting ON prompts (seq) WHERE state = 'waiting_for_approval';

-- +goose Down
DROP INDEX prompts_waiting;
DROP INDEX prompts_running;
CREATE INDEX prompts_unfinished ON prompts (seq)
    WHERE state IN ('running', 'waiting_for_approval');
DROP INDEX prompts_one_active;
ALTER TABLE prompts DROP COLUMN cancelled_by;
ALTER TABLE prompt_items ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompt_items DROP COLUMN call_id;
