package postgres_test

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"tollgate/migrations"
	"tollgate/store/pgtest"
	"tollgate/store/postgres"
)

// Several processes starting at once on one new database migrate it
// once: the advisory lock makes the others wait, then find nothing to do.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			db, err := postgres.Open(ctx, url)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var applied int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(migrations.Postgres(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Fatalf("%d migrations recorded, want each of the %d once", applied, len(files))
	}
}

// A database a newer Tollgate migrated is refused, and named so.
func TestOpenRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, url)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary knows") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// An error shows the URL without its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	for _, url := range []string{
		"postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1",
		"host=127.0.0.1 port=1 user=u password=s3cret connect_timeout=1",
	} {
		_, err := postgres.Open(context.Background(), url)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("open error: %v", err)
		}
	}
}
