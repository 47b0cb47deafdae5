-- +goose Up

-- Which ended prompts had their answer delivered to their chat. A start-up
-- sends the answers missing here: the process died between saving a prompt
-- as completed and sending its answer. Never deleted, like the prompts.
CREATE TABLE answers (
    prompt_id    TEXT NOT NULL PRIMARY KEY REFERENCES prompts (id),
    delivered_at TEXT NOT NULL,
    note         TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- Prompts that ended before this table existed count as answered, so an
-- upgrade does not send old answers again.
INSERT INTO answers (prompt_id, delivered_at, note)
    SELECT id, updated_at, 'before answers were tracked' FROM prompts
    WHERE state IN ('completed', 'failed');

-- +goose Down
DROP TABLE answers;
