-- +goose Up

-- The hash of the input a request displayed: a call runs only if what it
-- would run hashes the same. Empty for requests made before this existed,
-- which run as before.
ALTER TABLE approvals ADD COLUMN input_hash TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approvals DROP COLUMN input_hash;
