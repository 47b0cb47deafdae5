-- +goose Up

-- Every update Telegram handed over (a message, a button press), recorded
-- before Telegram is told it arrived: before the next getUpdates moves the
-- offset past it, before the webhook answers 200. A crash after that point
-- then loses nothing: the next start handles what is recorded and not
-- handled. update_id is Telegram's own, so an update delivered again (after
-- a restart, or a webhook retry) meets its row and is not handled twice.
-- body is the update as Telegram sent it, as JSON.
CREATE TABLE inbox (
    update_id   INTEGER PRIMARY KEY,
    body        TEXT    NOT NULL,
    received_at TEXT    NOT NULL,
    handled_at  TEXT
);

-- A start looks only for the few updates a crash left unhandled.
CREATE INDEX inbox_unhandled ON inbox (update_id) WHERE handled_at IS NULL;

-- Handled rows are kept only as long as Telegram may deliver them again,
-- then pruned by age.
CREATE INDEX inbox_handled ON inbox (handled_at) WHERE handled_at IS NOT NULL;

-- +goose Down
DROP TABLE inbox;
