-- +goose Up

-- A claim on an outbox entry (claimed_until in Unix milliseconds): the
-- sender that claims an entry is the only one that sends it until the
-- claim lapses, so that an old sender still at work during a failover and
-- the new one do not both send it (SQLite's 00013 says more).
ALTER TABLE outbox ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN claimed_until BIGINT;

-- +goose Down
ALTER TABLE outbox DROP COLUMN claimed_until;
ALTER TABLE outbox DROP COLUMN claimed_by;
