-- +goose Up

-- Leases: a named right one process holds until it lapses (Unix
-- milliseconds). With one process on SQLite nobody competes for them;
-- the same table lets replicas on PostgreSQL take turns.
CREATE TABLE leases (
    name   TEXT    NOT NULL PRIMARY KEY,
    holder TEXT    NOT NULL,
    until  INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE leases;
