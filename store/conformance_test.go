package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"tollgate/store"
	"tollgate/store/storetest"
)

// TestConformance runs the suite both stores must pass on SQLite.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Backend {
		var opts []store.Option
		if now != nil {
			opts = append(opts, store.WithClock(now))
		}
		db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tollgate.db"), opts...)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
