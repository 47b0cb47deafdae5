-- +goose Up

-- APPROVAL_TIMEOUT and APPROVAL_REMIND: when a pending request expires,
-- and when it is shown once more, as Unix milliseconds (they compare as
-- numbers). NULL: never. They live in the row, so a deadline that passed
-- while the bot was down is met at the next start.
ALTER TABLE approvals ADD COLUMN expires_at INTEGER;
ALTER TABLE approvals ADD COLUMN remind_at INTEGER;
CREATE INDEX approvals_expiry ON approvals (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX approvals_reminder ON approvals (remind_at) WHERE status = 'pending' AND remind_at IS NOT NULL;

-- +goose Down
DROP INDEX approvals_reminder;
DROP INDEX approvals_expiry;
ALTER TABLE approvals DROP COLUMN remind_at;
ALTER TABLE approvals DROP COLUMN expires_at;
