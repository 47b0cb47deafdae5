package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"tollgate/store"
	"tollgate/store/storetest"
)

// openTemp opens a fresh database in a temporary folder, closed at the
// end of the test.
func openTemp(t testing.TB) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "tollgate.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db, path
}

// rawDB opens path with the driver directly, for checks a test makes
// behind the store's back. The store must be closed first, or the raw
// handle only reads.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func integrityOK(t testing.TB, raw *sql.DB) {
	t.Helper()
	var res string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
		t.Fatalf("integrity check: %v", err)
	}
	if res != "ok" {
		t.Fatalf("integrity check: %s", res)
	}
}

// The suite's hand-built records, shared with the SQLite-only tests.
var (
	t0          = storetest.T0
	gatedPrompt = storetest.GatedPrompt
	inUTC       = storetest.InUTC
)

// reopen opens the database at path again, closed at the end of the test.
func reopen(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
