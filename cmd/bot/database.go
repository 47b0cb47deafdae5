package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"tollgate/bot"
	"tollgate/prompt"
	"tollgate/store"
	"tollgate/store/postgres"
	"tollgate/tools/webfetch"
)

// database is what the bot keeps its state in: either store.
type database interface {
	prompt.Store
	bot.Store
	webfetch.Store
	pinger
	Close() error
}

var (
	_ database = (*store.DB)(nil)
	_ database = (*postgres.DB)(nil)
)

// openDatabase opens PostgreSQL at DATABASE_URL if it is set, else the
// SQLite file at DATABASE_PATH.
func openDatabase(ctx context.Context, cfg config, log *slog.Logger) (database, error) {
	if cfg.DatabaseURL != "" {
		db, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.WithLogger(log))
		if err != nil {
			// postgres.Open names the URL, without its password.
			return nil, fmt.Errorf("open database (DATABASE_URL): %w", err)
		}
		return db, nil
	}
	db, err := store.Open(ctx, cfg.DatabasePath, store.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("open database (DATABASE_PATH=%s): %w", cfg.DatabasePath, err)
	}
	return db, nil
}

// redactURL is a database URL fit for a log: without its password, and
// a key=value connection string not at all.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(set)"
	}
	return u.Redacted()
}
