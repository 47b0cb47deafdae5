package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	"github.com/pressly/goose/v3"

	"tollgate/migrations"
	"tollgate/prompt"
)

// auditVersion is the migration that made the audit table.
const auditVersion = 10

// ReadOnly is a Tollgate database opened only to read it, beside the bot
// that owns it: an operator's command reads the audit while the bot runs.
// It is safe for concurrent use. Close releases it.
type ReadOnly struct {
	path string
	db   *sql.DB
}

// OpenReadOnly opens the database at path for reading. Unlike Open it
// takes no lock, so it works while a bot has the file open, and it
// neither creates, migrates nor writes anything: SQLite opens the file
// read-only. It refuses a file that does not exist, is not a Tollgate
// database, or whose schema is older than the audit ("run the bot once to
// upgrade it") or newer than this binary knows. ctx bounds the opening and
// the schema check.
func OpenReadOnly(ctx context.Context, path string) (*ReadOnly, error) {
	abs, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s read-only: %w", path, err)
	}
	if fi, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open store %s read-only: no database there: check DATABASE_PATH", abs)
	} else if err != nil {
		return nil, fmt.Errorf("open store %s read-only: %w", abs, err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("open store %s read-only: it is a directory, not a database file", abs)
	}
	q := url.Values{}
	// mode=ro is SQLite's own: the file is opened without write access,
	// so nothing here can change the bot's database, not even by a bug.
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	// The bot's writer holds the write lock only for a moment; a
	// checkpoint can hold readers as long.
	q.Set("_busy_timeout", "5000")
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s read-only: %w", abs, err)
	}
	r := &ReadOnly{path: abs, db: db}
	if err := r.checkSchema(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s read-only: %w", abs, err)
	}
	return r, nil
}

// checkSchema refuses a database this binary cannot read the audit of.
func (r *ReadOnly) checkSchema(ctx context.Context) error {
	var hasGoose int
	err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = ?`, gooseTable).Scan(&hasGoose)
	if err != nil {
		return (&DB{path: r.path}).explain(err)
	}
	if hasGoose == 0 {
		return errors.New("not a Tollgate database: it has no migration history (run the bot once to create it)")
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, r.db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	current, known, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case current > known:
		return fmt.Errorf("schema version %d is newer than this binary knows (%d): run a newer Tollgate", current, known)
	case current < auditVersion:
		return fmt.Errorf("schema version %d predates the audit (%d): run the bot once to upgrade it", current, auditVersion)
	}
	return nil
}

// Audit returns the audit entries q selects, newest first, as the bot
// has committed them at the moment of the call.
func (r *ReadOnly) Audit(ctx context.Context, q prompt.AuditQuery) ([]prompt.AuditEntry, error) {
	es, err := queryAudit(ctx, r.db, q)
	if err != nil {
		return nil, fmt.Errorf("audit of %s: %w", r.path, err)
	}
	return es, nil
}

// Close releases the database.
func (r *ReadOnly) Close() error {
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", r.path, err)
	}
	return nil
}
