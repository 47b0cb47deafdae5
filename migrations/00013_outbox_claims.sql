-- +goose Up

-- A claim on an outbox entry (claimed_until in Unix milliseconds): the
-- sender that claims an entry is the only one that sends it until the
-- claim lapses. Replicas elect one sender, but during a failover an old
-- sender that stalled may still be at work; the claim keeps the two from
-- sending one entry twice. A sender that dies mid-delivery leaves a claim
-- that lapses, so the entry is still delivered (at least once).
ALTER TABLE outbox ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN claimed_until INTEGER;

-- +goose Down
ALTER TABLE outbox DROP COLUMN claimed_until;
ALTER TABLE outbox DROP COLUMN claimed_by;
