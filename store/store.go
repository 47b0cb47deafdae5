package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"tollgate/migrations"
)

// Errors returned by Open and by writes.
var (
	// ErrInUse means another DB (in this process or another) owns the file.
	ErrInUse = errors.New("database in use")
	// ErrStaleRevision means SavePrompt or DecideApproval got a prompt whose
	// Rev is not above the stored one: saving it would overwrite newer state.
	ErrStaleRevision = errors.New("stale revision")
)

// DB is an open Tollgate database. Close releases it.
type DB struct {
	path   string
	log    *slog.Logger
	now    func() time.Time
	writer *sql.DB // one connection: SQLite has one writer
	reader *sql.DB
	lock   *os.File
	stmt   statements

	mu     sync.Mutex
	closed bool
}

// Option configures Open.
type Option func(*config) error

type config struct {
	log         *slog.Logger
	now         func() time.Time
	busyTimeout time.Duration
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

// WithBusyTimeout sets how long a statement waits for a lock held by a
// reader checkpointing or by a tool such as the sqlite3 shell (default 5s).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("busy timeout %v is not positive", d)
		}
		c.busyTimeout = d
		return nil
	}
}

// Open opens or creates the database at path, creating its folder, and
// brings its schema up to date. It fails with ErrInUse if another DB owns
// the file, and with a clear error if the file is not a Tollgate database
// or its schema is newer than this binary knows. ctx bounds the opening
// and the migrations.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	cfg := config{log: slog.New(slog.DiscardHandler), now: time.Now, busyTimeout: 5 * time.Second}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	if path == "" {
		return nil, errors.New("open store: empty path")
	}
	if strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || strings.HasPrefix(path, ":memory:") {
		// The driver would read these as URI syntax, not as a file name.
		return nil, fmt.Errorf("open store %s: path must be a plain file name", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: create folder: %w", abs, err)
	}
	lock, err := lockFile(abs)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	// SQLite would create the file 0644 and its -wal and -shm like it, in a
	// folder that may already exist and be readable by all; the file holds
	// what users typed and what tools were asked to do.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		lock.Close()
		return nil, fmt.Errorf("open store %s: create file: %w", abs, err)
	}
	db := &DB{path: abs, log: cfg.log, now: cfg.now, lock: lock}
	if err := db.open(ctx, cfg); err != nil {
		db.closeAll()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	return db, nil
}

func (db *DB) open(ctx context.Context, cfg config) error {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(cfg.busyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	// FULL syncs the WAL on every commit. A commit lost to a power cut could
	// be an "approved" or "executing" record, and then a restart would run a
	// tool a second time; at a few writes per human decision the fsync costs
	// nothing anyone notices.
	q.Set("_synchronous", "FULL")
	// Immediate: a write transaction takes the write lock at BEGIN, so it
	// can never fail half-way on upgrading a read lock.
	q.Set("_txlock", "immediate")
	if err := db.probe(ctx); err != nil {
		return err
	}
	var err error
	db.writer, err = sql.Open("sqlite", db.path+"?"+q.Encode())
	if err != nil {
		return err
	}
	db.writer.SetMaxOpenConns(1)
	db.writer.SetMaxIdleConns(1)
	db.writer.SetConnMaxIdleTime(0)
	db.writer.SetConnMaxLifetime(0)
	if err := db.writer.PingContext(ctx); err != nil {
		return explainOpen(err)
	}
	if err := db.migrate(ctx); err != nil {
		return err
	}

	rq := url.Values{}
	rq.Set("_busy_timeout", fmt.Sprint(cfg.busyTimeout.Milliseconds()))
	rq.Set("_query_only", "1")
	db.reader, err = sql.Open("sqlite", db.path+"?"+rq.Encode())
	if err != nil {
		return err
	}
	n := max(2, runtime.GOMAXPROCS(0))
	db.reader.SetMaxOpenConns(n)
	db.reader.SetMaxIdleConns(n)
	if err := db.reader.PingContext(ctx); err != nil {
		return explainOpen(err)
	}
	return db.prepare(ctx)
}

// explainOpen names the usual cause of a failed first statement.
func explainOpen(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
		return fmt.Errorf("not a SQLite database: %w", err)
	}
	return err
}

const gooseTable = "goose_db_version"

// probe refuses a file that is not a database, or is another program's,
// before anything is written to it: even setting WAL mode rewrites the
// header of a database that was not in WAL mode.
func (db *DB) probe(ctx context.Context) error {
	probe, err := sql.Open("sqlite", db.path+"?_query_only=1")
	if err != nil {
		return err
	}
	defer probe.Close()
	var objects, hasGoose int
	err = probe.QueryRowContext(ctx,
		`SELECT count(*), count(*) FILTER (WHERE name = ?) FROM sqlite_schema`, gooseTable).
		Scan(&objects, &hasGoose)
	if err != nil {
		return explainOpen(err)
	}
	if objects > 0 && hasGoose == 0 {
		return errors.New("not a Tollgate database: it has tables but no migration history")
	}
	return nil
}

// migrate applies the embedded migrations, after refusing a database that
// belongs to something else or to a newer Tollgate.
func (db *DB) migrate(ctx context.Context) error {
	var hasGoose bool
	err := db.writer.QueryRowContext(ctx,
		`SELECT count(*) > 0 FROM sqlite_schema WHERE name = ?`, gooseTable).Scan(&hasGoose)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.writer, migrations.FS,
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	sources := p.ListSources()
	known := sources[len(sources)-1].Version
	if hasGoose {
		current, err := p.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > known {
			return fmt.Errorf("schema version %d is newer than this binary knows (%d): run a newer Tollgate", current, known)
		}
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		db.log.Info("applied migration", "db", db.path, "version", r.Source.Version, "took", r.Duration)
	}
	return nil
}

// Close closes the database and releases the file for another Open.
// Calling it again does nothing.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	if err := db.closeAll(); err != nil {
		return fmt.Errorf("close store %s: %w", db.path, err)
	}
	return nil
}

// closeAll closes the connections before the lock, so the next owner
// never meets a connection of ours.
func (db *DB) closeAll() error {
	var errs []error
	for _, st := range db.stmt.all() {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if db.reader != nil {
		errs = append(errs, db.reader.Close())
	}
	if db.writer != nil {
		errs = append(errs, db.writer.Close())
	}
	if db.lock != nil {
		errs = append(errs, db.lock.Close()) // closing the descriptor drops the flock
	}
	return errors.Join(errs...)
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// lockFile takes an exclusive flock on path.lock. A flock belongs to the
// open file description, so it also keeps out a second Open in this
// process, and the kernel drops it when the process dies, even by SIGKILL.
func lockFile(path string) (*os.File, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another Tollgate (lock %s)", ErrInUse, path, name)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}

// write runs fn in one immediate transaction on the writer connection.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error that matters is fn's
		return err
	}
	return tx.Commit()
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}
