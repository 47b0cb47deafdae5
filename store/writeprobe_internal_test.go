package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// probeWrite catches a file SQLite opened read-only, where BEGIN IMMEDIATE
// alone does not: in WAL mode it succeeds. Tests run as root, who may
// write any file, so SQLite's read-only mode stands in for the permission.
func TestProbeWriteCatchesAReadOnlyDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	rw, err := sql.Open("sqlite", path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if err := probeWrite(ctx, rw); err != nil {
		t.Fatalf("probe of a writable database: %v", err)
	}
	var tables int
	if err := rw.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'tollgate_write_probe'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the probe left its table: %d, %v", tables, err)
	}

	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	ro.SetMaxOpenConns(1)
	tx, err := ro.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("BEGIN IMMEDIATE on the read-only handle: %v", err)
	}
	tx.Rollback()
	err = probeWrite(ctx, ro)
	if err == nil {
		t.Fatal("probe of a read-only database passed")
	}
	db := &DB{path: path}
	if msg := db.explain(err).Error(); !strings.Contains(msg, "database file "+path+" is read-only") {
		t.Fatalf("explained: %s", msg)
	}
}

// checkWritable's decisions, with access failing as it does for a user
// who may not write: root cannot see them for real.
func TestCheckWritableNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.db")
	denyOnly := func(name string) func(string, uint32) error {
		return func(p string, _ uint32) error {
			if p == name {
				return syscall.EACCES
			}
			return nil
		}
	}
	if err := checkWritable(path, denyOnly(dir)); err == nil || !strings.Contains(err.Error(), "folder "+dir+" is not writable") {
		t.Errorf("new file in a read-only folder: %v", err)
	}
	if err := checkWritable(path, denyOnly(path)); err != nil {
		t.Errorf("a file not there yet was checked: %v", err)
	}
	if err := writeFile(path); err != nil {
		t.Fatal(err)
	}
	if err := checkWritable(path, denyOnly(path)); err == nil || !strings.Contains(err.Error(), "database file "+path+" is read-only") ||
		!errors.Is(err, syscall.EACCES) {
		t.Errorf("read-only file: %v", err)
	}
	if err := checkWritable(path, denyOnly("")); err != nil {
		t.Errorf("writable: %v", err)
	}
}

func writeFile(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t (x INTEGER)`)
	return err
}
