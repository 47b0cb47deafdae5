-- +goose Up

-- Leases: a named right one replica holds until it lapses (Unix
-- milliseconds), renewed by its holder and taken over by another once it
-- has lapsed: one replica advances a prompt, one speaks to Telegram.
CREATE TABLE leases (
    name   TEXT   NOT NULL PRIMARY KEY,
    holder TEXT   NOT NULL,
    until  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE leases;
