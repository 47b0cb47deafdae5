package store_test

import (
	"context"
	"testing"
	"time"

	"tollgate/store"
)

// TestOpenClearsADeadProcesssLeases: one process holds a SQLite file, so
// a lease found at open is a dead process's; a restart under a new name
// must not wait for it to lapse before resuming its prompts.
func TestOpenClearsADeadProcesssLeases(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	now := time.Now()
	if ok, err := db.Lease(ctx, "prompt:p1", "old-name", now, time.Hour); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if h, _, err := db.LeaseHolder(ctx, "prompt:p1", now); err != nil || h != "" {
		t.Fatalf("holder after a restart: %q, %v", h, err)
	}
	if ok, err := db.Lease(ctx, "prompt:p1", "new-name", now, time.Hour); err != nil || !ok {
		t.Fatalf("the new process could not lease: %v %v", ok, err)
	}
}
