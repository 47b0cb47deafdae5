package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrDamaged means SQLite's own check found the database file damaged.
var ErrDamaged = errors.New("database file is damaged")

// Check runs SQLite's full PRAGMA integrity_check on the database at path
// and returns the problems it reports, none if the file is sound. It takes
// the same lock as Open, so it fails with ErrInUse while a bot has the
// file open, and it neither creates the file nor migrates it. It is for
// files too big for Open's start-up quick_check, and for a second look at
// one that failed it.
func Check(ctx context.Context, path string) (problems []string, err error) {
	abs, err := absPath(path)
	if err != nil {
		return nil, fmt.Errorf("check store %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("check store %s: there is no database file there", abs)
	case err != nil:
		return nil, fmt.Errorf("check store %s: %w", abs, err)
	case fi.IsDir():
		return nil, fmt.Errorf("check store %s: it is a directory, not a file", abs)
	}
	lock, err := lockFile(abs, false)
	if err != nil {
		return nil, fmt.Errorf("check store %s: %w", abs, err)
	}
	defer lock.Close() // after db.Close below: the connections go first

	db, err := sql.Open("sqlite", abs+"?_query_only=1")
	if err != nil {
		return nil, fmt.Errorf("check store %s: %w", abs, err)
	}
	defer db.Close()
	problems, err = runCheck(ctx, db, "integrity_check")
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
			return nil, fmt.Errorf("check store %s: not a SQLite database: %w", abs, err)
		}
		return nil, fmt.Errorf("check store %s: %w", abs, err)
	}
	return problems, nil
}

// runCheck runs pragma (quick_check or integrity_check) on db and returns
// its findings; "ok" alone means none. Damage bad enough to stop the check
// itself is a finding too, not a failure to check.
func runCheck(ctx context.Context, db *sql.DB, pragma string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		if isCorrupt(err) {
			return []string{err.Error()}, nil
		}
		return nil, err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		if isCorrupt(err) {
			return append(found, err.Error()), nil
		}
		return nil, err
	}
	if len(found) == 1 && found[0] == "ok" {
		return nil, nil
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("PRAGMA %s returned nothing", pragma)
	}
	return found, nil
}

func isCorrupt(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CORRUPT
}

// damaged is the error for a file the start-up check found damaged: it
// says what to do, since running on would fail a decision later.
func damaged(path string, problems []string) error {
	const show = 5
	list := problems
	more := ""
	if len(list) > show {
		list, more = list[:show], fmt.Sprintf(" (and %d more)", len(problems)-show)
	}
	return fmt.Errorf("%w: quick_check found: %s%s: stop here and restore %s from a backup; `bot check` (with the bot stopped) or `sqlite3 %s \"PRAGMA integrity_check\"` lists every problem",
		ErrDamaged, strings.Join(list, "; "), more, path, path)
}
