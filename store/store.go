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
	lock   *fileLock
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
// the file, by whatever name, and with an error that names the cause if
// the file is not a Tollgate database, is damaged, cannot be written, or
// has a schema newer than this binary knows. A file it refuses is left as
// it was. ctx bounds the opening, the start-up check and the migrations.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	cfg := config{log: slog.New(slog.DiscardHandler), now: time.Now, busyTimeout: 5 * time.Second}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	abs, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: create folder: %w", abs, err)
	}
	if err := checkWritable(abs, syscall.Access); err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	lock, err := lockFile(abs, true)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	db := &DB{path: abs, log: cfg.log, now: cfg.now, lock: lock}
	if err := db.open(ctx, cfg); err != nil {
		db.closeAll()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	return db, nil
}

// absPath refuses what the driver would not read as a plain file name and
// makes the rest absolute.
func absPath(path string) (string, error) {
	if path == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || strings.HasPrefix(path, ":memory:") {
		// The driver would read these as URI syntax, not as a file name.
		return "", errors.New("path must be a plain file name")
	}
	return filepath.Abs(path)
}

// checkWritable names the cause when the database at path could be read
// but not written: SQLite would open it, and every write would fail
// later, in the middle of a chat. access is syscall.Access but for tests.
// Root passes these checks (except on a read-only mount), as it may write
// anyway; probeWrite is the check that cannot be wrong.
func checkWritable(path string, access func(string, uint32) error) error {
	const wOK = 2 // W_OK
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Created by lockFile, in the folder checked next.
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a file: give the path of a database file, such as %s",
			path, filepath.Join(path, "tollgate.db"))
	default:
		if err := access(path, wOK); err != nil {
			return fmt.Errorf("database file %s is read-only (%w): make it writable by the user running the bot", path, err)
		}
	}
	// SQLite writes the -wal and -shm files beside the file a symlink
	// leads to, not beside the link.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path // not created yet
	}
	dir := filepath.Dir(real)
	if err := access(dir, wOK); err != nil {
		return fmt.Errorf("folder %s is not writable (%w): SQLite creates %s-wal and %s-shm beside the database; make the folder writable by the user running the bot",
			dir, err, filepath.Base(real), filepath.Base(real))
	}
	return nil
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
		return db.explain(err)
	}
	if err := probeWrite(ctx, db.writer); err != nil {
		return db.explain(err)
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
		return db.explain(err)
	}
	return db.prepare(ctx)
}

// explain names the usual cause of a failed first statement.
func (db *DB) explain(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("not a SQLite database: %w", err)
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("database file %s is read-only (%w): make it and its folder writable by the user running the bot", db.path, err)
	}
	return err
}

// probeWrite makes a write that needs write access to the file and rolls
// it back, so a read-only database stops the start rather than the first
// decision. BEGIN IMMEDIATE alone is not enough: in WAL mode it succeeds
// on a file SQLite opened read-only.
func probeWrite(ctx context.Context, w *sql.DB) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // the table must never exist: rolling back is the point
	_, err = tx.ExecContext(ctx, `CREATE TABLE tollgate_write_probe (x INTEGER)`)
	return err
}

const gooseTable = "goose_db_version"

// startCheckLimit is the largest database (with its WAL) that Open runs
// PRAGMA quick_check on: about a second of reading at start. A bigger one
// is checked on demand with Check.
const startCheckLimit = 100 << 20

// probe refuses a file that is not a database, is another program's, or
// is damaged, before anything is written to it: even setting WAL mode
// rewrites the header of a database that was not in WAL mode, and
// migrating a damaged one can spread the damage.
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
		if isCorrupt(err) {
			return damaged(db.path, []string{err.Error()})
		}
		return db.explain(err)
	}
	if objects > 0 && hasGoose == 0 {
		return errors.New("not a Tollgate database: it has tables but no migration history")
	}
	size := fileSize(db.path) + fileSize(db.path+"-wal")
	if size > startCheckLimit {
		db.log.Info("database is large: skipped the start-up check; run `bot check` to check it",
			"db", db.path, "bytes", size, "limit", startCheckLimit)
		return nil
	}
	problems, err := runCheck(ctx, probe, "quick_check")
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if len(problems) > 0 {
		return damaged(db.path, problems)
	}
	return nil
}

// fileSize is the size of the file at path, 0 if there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// migrate applies the embedded migrations, after refusing a database that
// belongs to a newer Tollgate.
func (db *DB) migrate(ctx context.Context) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, db.writer, migrations.FS,
		goose.WithDisableGlobalRegistry(true))
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
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if !pending {
		return nil
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

// fileID identifies a file whatever name reaches it: a symlink, a hard
// link, a relative path.
type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// heldFiles records the database files locked in this process, by device
// and inode, and by which name each was opened.
//
// It is process-wide state on purpose, as the kernel's lock table is: a
// second Open in this process must be refused without opening the file,
// because closing any descriptor of a file drops every POSIX lock the
// process holds on it, and SQLite's own locks are POSIX locks. Dropped,
// they no longer keep a sqlite3 ".backup" running beside the bot from
// deleting the WAL the bot still writes to.
var heldFiles = struct {
	sync.Mutex
	names map[fileID]string
}{names: map[fileID]string{}}

// fileLock is an exclusive flock on the database file itself. Closing it
// releases the file for another Open.
type fileLock struct {
	f  *os.File
	id fileID
}

// lockFile takes an exclusive flock on the database file at path,
// creating the file (private to its owner) if create is set. Locking the
// file itself, not a name derived from the path, refuses the same file by
// every name. SQLite locks with fcntl, which on Linux is independent of
// flock, so the flock does not get in SQLite's way, nor in that of a
// sqlite3 shell taking a backup. The kernel drops the flock when the
// process dies, even by SIGKILL.
func lockFile(path string, create bool) (*fileLock, error) {
	heldFiles.Lock()
	defer heldFiles.Unlock()
	if fi, err := os.Stat(path); err == nil {
		if id, ok := idOf(fi); ok {
			if name, ok := heldFiles.names[id]; ok {
				return nil, inThisProcess(path, name)
			}
		}
	}
	flag := os.O_RDONLY // a flock needs no write access
	if create {
		flag |= os.O_CREATE
	}
	// SQLite would create the file 0644 and its -wal and -shm like it, in
	// a folder that may already exist and be readable by all; the file
	// holds what users typed and what tools were asked to do.
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	id, ok := idOf(fi)
	if !ok {
		f.Close()
		return nil, errors.New("cannot tell which file this is")
	}
	if name, ok := heldFiles.names[id]; ok {
		// The name was pointed at a file of ours between Stat and Open.
		f.Close()
		return nil, inThisProcess(path, name)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close() // no DB of this process has the file: nothing of ours to drop
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open in another Tollgate process", ErrInUse, path)
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	heldFiles.names[id] = path
	return &fileLock{f: f, id: id}, nil
}

func inThisProcess(path, owner string) error {
	if path == owner {
		return fmt.Errorf("%w: %s is already open in this process", ErrInUse, path)
	}
	return fmt.Errorf("%w: %s is already open in this process, as %s", ErrInUse, path, owner)
}

// Close drops the flock by closing its descriptor and forgets the file.
func (l *fileLock) Close() error {
	heldFiles.Lock()
	defer heldFiles.Unlock()
	delete(heldFiles.names, l.id)
	return l.f.Close()
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

// Ping reports whether the database answers: it reads one row through the
// store's readers, within ctx. After Close it returns an error.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.reader.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping %s: %w", db.path, err)
	}
	return nil
}
