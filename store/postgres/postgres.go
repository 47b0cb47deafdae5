package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"tollgate/migrations"
)

// DB is an open Tollgate database on a PostgreSQL server. Close releases it.
type DB struct {
	name string // the URL without its password, for messages
	log  *slog.Logger
	now  func() time.Time
	pool *pgxpool.Pool
}

// Option configures Open.
type Option func(*config) error

type config struct {
	log *slog.Logger
	now func() time.Time
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("nil logger")
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock that stamps the store's own bookkeeping times
// (default: time.Now); prompt times come from the prompts themselves.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("nil clock")
		}
		c.now = now
		return nil
	}
}

// Open connects to the database at url (postgres://…) and brings its
// schema up to date. It fails with an error that names the cause if the
// server cannot be reached or the schema is newer than this binary knows.
// ctx bounds the connecting and the migrations.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg := config{log: slog.New(slog.DiscardHandler), now: time.Now}
	name := redact(url)
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("open store %s: %w", name, err)
		}
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	db := &DB{name: name, log: cfg.log, now: cfg.now, pool: pool}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	return db, nil
}

// redact drops the password from a URL that is shown in errors and logs.
// A key=value connection string, which pgx also reads, is not shown at
// all: url.Parse would take it for a path and show its password.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(database URL)"
	}
	return u.Redacted()
}

// migrateLockID is the advisory lock the migrations run under: goose's
// default, so that a goose command line run by hand waits for a start
// too.
const migrateLockID = lock.DefaultLockID

// migrate applies the embedded migrations, after refusing a database that
// belongs to a newer Tollgate. A session-level advisory lock keeps two
// processes from migrating at once: the second waits, then finds nothing
// pending.
func (db *DB) migrate(ctx context.Context) error {
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	// Polls once a second for up to five minutes: a migration at start
	// takes well under that.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrateLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(),
		goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	current, known, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > known {
		return fmt.Errorf("schema version %d is newer than this binary knows (%d): run a newer Tollgate", current, known)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		db.log.Info("applied migration", "db", db.name, "version", r.Source.Version, "took", r.Duration)
	}
	return nil
}

// Close closes the connections. Calling it again does nothing.
func (db *DB) Close() error {
	db.pool.Close() // idempotent
	return nil
}

// Ping reports whether the server answers, within ctx. After Close it
// returns an error.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", db.name, err)
	}
	return nil
}

// write runs fn in one read-committed transaction. Every change that must
// not be lost to a concurrent one is a compare-and-set in its WHERE, or
// locks the rows it reads first.
func (db *DB) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, fn)
}

// isUnique reports whether err is a unique violation of constraint (or
// unique index) name.
func isUnique(err error, name string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == name
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}
