package postgres_test

import (
	"context"
	"testing"
	"time"

	"tollgate/store/pgtest"
	"tollgate/store/postgres"
	"tollgate/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformance runs the suite both stores must pass on PostgreSQL.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Backend {
		return open(t, now)
	})
}

// open opens a store on a fresh database, closed at the end of the test.
func open(t *testing.T, now func() time.Time) *postgres.DB {
	t.Helper()
	var opts []postgres.Option
	if now != nil {
		opts = append(opts, postgres.WithClock(now))
	}
	db, err := postgres.Open(context.Background(), pgtest.URL(t), opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
