package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func testLeaseIsHeldUntilItLapses(t *testing.T, open Opener) {
	db := open(t, nil)
	ctx := context.Background()
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ttl := 10 * time.Second
	must := func(ok bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !must(db.Lease(ctx, "sender", "a", start, ttl)) {
		t.Fatal("a free lease was refused")
	}
	if must(db.Lease(ctx, "sender", "b", start.Add(9*time.Second), ttl)) {
		t.Fatal("b took a lease a holds")
	}
	if !must(db.Lease(ctx, "sender", "a", start.Add(9*time.Second), ttl)) {
		t.Fatal("a could not renew its own lease")
	}
	if h, until, err := db.LeaseHolder(ctx, "sender", start.Add(18*time.Second)); err != nil || h != "a" || !until.Equal(start.Add(19*time.Second)) {
		t.Fatalf("holder %q until %v, %v; want a until the renewal's end", h, until, err)
	}
	if must(db.Lease(ctx, "sender", "b", start.Add(18*time.Second), ttl)) {
		t.Fatal("b took a renewed lease before it lapsed")
	}
	// Lapsed: b takes it over, and a no longer holds it.
	if !must(db.Lease(ctx, "sender", "b", start.Add(19*time.Second), ttl)) {
		t.Fatal("b could not take a lapsed lease over")
	}
	if must(db.Lease(ctx, "sender", "a", start.Add(20*time.Second), ttl)) {
		t.Fatal("a took back a lease b holds")
	}
	// Release by another changes nothing; by the holder frees it.
	if err := db.Release(ctx, "sender", "a"); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := db.LeaseHolder(ctx, "sender", start.Add(20*time.Second)); h != "b" {
		t.Fatalf("holder %q after another's release, want b", h)
	}
	if err := db.Release(ctx, "sender", "b"); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := db.LeaseHolder(ctx, "sender", start.Add(20*time.Second)); h != "" {
		t.Fatalf("holder %q after release", h)
	}
	if !must(db.Lease(ctx, "sender", "a", start.Add(20*time.Second), ttl)) {
		t.Fatal("a released lease was refused")
	}
	// Names are apart.
	if !must(db.Lease(ctx, "prompt:p1", "b", start.Add(20*time.Second), ttl)) {
		t.Fatal("another name's lease was refused")
	}
}

func testLeaseRaceHasOneWinner(t *testing.T, open Opener) {
	db := open(t, nil)
	ctx := context.Background()
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("replica-%d", i)
			ok, err := db.Lease(ctx, "poller", holder, start, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				winners = append(winners, holder)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
	if h, _, err := db.LeaseHolder(ctx, "poller", start); err != nil || h != winners[0] {
		t.Fatalf("holder %q, %v; want the winner %s", h, err, winners[0])
	}
}
