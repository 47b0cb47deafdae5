package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
)

func update(id int64, text string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"},"text":%q}}`, id, text))
}

func updateIDs(t *testing.T, bodies []json.RawMessage) []int64 {
	t.Helper()
	var ids []int64
	for _, b := range bodies {
		var u struct {
			ID int64 `json:"update_id"`
		}
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	return ids
}

func testRecordUpdatesRecognisesADeliveryAgain(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	fresh, err := db.RecordUpdates(ctx, []json.RawMessage{update(10, "a"), update(11, "b")})
	if err != nil || !slices.Equal(fresh, []int64{10, 11}) {
		t.Fatalf("first delivery: %v, %v", fresh, err)
	}
	// Telegram delivers 11 again with 12 after it; 10 is handled meanwhile.
	if err := db.MarkHandled(ctx, 10); err != nil {
		t.Fatal(err)
	}
	fresh, err = db.RecordUpdates(ctx, []json.RawMessage{update(10, "a"), update(11, "changed"), update(12, "c"), update(12, "c")})
	if err != nil || !slices.Equal(fresh, []int64{12}) {
		t.Fatalf("second delivery: %v, %v; want only 12 new", fresh, err)
	}
	got, err := db.UnhandledUpdates(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := updateIDs(t, got); !slices.Equal(ids, []int64{11, 12}) {
		t.Fatalf("unhandled %v, want [11 12]", ids)
	}
	if string(got[0]) != string(update(11, "b")) {
		t.Fatalf("update 11 is %s: the first recording must stay", got[0])
	}
}

func testRecordUpdatesIsAllOrNothing(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	for _, bad := range []json.RawMessage{json.RawMessage(`{"message":{}}`), json.RawMessage(`not json`), json.RawMessage(`{"update_id":-3}`)} {
		if _, err := db.RecordUpdates(ctx, []json.RawMessage{update(1, "a"), bad}); err == nil {
			t.Fatalf("recorded a batch with %s", bad)
		}
	}
	// A batch cut by its context records nothing either.
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.RecordUpdates(cut, []json.RawMessage{update(2, "b")}); err == nil {
		t.Fatal("recorded with a cancelled context")
	}
	if got, err := db.UnhandledUpdates(ctx, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("after failed batches: %d updates, %v", len(got), err)
	}
	fresh, err := db.RecordUpdates(ctx, []json.RawMessage{update(1, "a"), update(2, "b")})
	if err != nil || !slices.Equal(fresh, []int64{1, 2}) {
		t.Fatalf("after failed batches, the updates are new: %v, %v", fresh, err)
	}
}

func testRecordUpdatesConcurrentDeliveriesAreNewOnce(t *testing.T, open Opener) {
	// A webhook retry may arrive while the first delivery is being recorded.
	ctx := context.Background()
	db := open(t, nil)
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			fresh, err := db.RecordUpdates(ctx, []json.RawMessage{update(5, "x"), update(6, "y")})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, fresh...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(all)
	if !slices.Equal(all, []int64{5, 6}) {
		t.Fatalf("new across concurrent deliveries: %v; want each once", all)
	}
}

func testUnhandledUpdatesPagesOldestFirst(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	// Recorded out of order, as a webhook retry can make them.
	for _, id := range []int64{105, 101, 103, 102, 104} {
		if _, err := db.RecordUpdates(ctx, []json.RawMessage{update(id, "m")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.MarkHandled(ctx, 102); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	after := int64(0)
	for {
		page, err := db.UnhandledUpdates(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		p := updateIDs(t, page)
		ids = append(ids, p...)
		after = p[len(p)-1]
	}
	if !slices.Equal(ids, []int64{101, 103, 104, 105}) {
		t.Fatalf("unhandled pages: %v", ids)
	}
	if got, err := db.UnhandledUpdates(ctx, 0, 0); err != nil || got != nil {
		t.Fatalf("limit 0: %v, %v", got, err)
	}
}

func testMarkHandled(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.MarkHandled(ctx, 9); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("mark an update never recorded: %v", err)
	}
	if _, err := db.RecordUpdates(ctx, []json.RawMessage{update(9, "m")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.MarkHandled(ctx, 9); err != nil {
			t.Fatalf("mark handled (again): %v", err)
		}
	}
	if got, err := db.UnhandledUpdates(ctx, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("unhandled after marking: %d, %v", len(got), err)
	}
}

func testPruneUpdatesDeletesOnlyOldHandledOnes(t *testing.T, open Opener) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	db := open(t, clock)

	// 1 handled long ago, 2 recorded long ago and never handled, 3 handled
	// recently.
	if _, err := db.RecordUpdates(ctx, []json.RawMessage{update(1, "old"), update(2, "stuck"), update(3, "new")}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkHandled(ctx, 1); err != nil {
		t.Fatal(err)
	}
	advance(47 * time.Hour)
	if err := db.MarkHandled(ctx, 3); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Hour)
	if _, err := db.PruneUpdates(ctx, 0); err == nil {
		t.Fatal("pruned with keep 0")
	}
	n, err := db.PruneUpdates(ctx, 48*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	// 3 is still recognised, 2 still waits, 1 is forgotten.
	fresh, err := db.RecordUpdates(ctx, []json.RawMessage{update(1, "old"), update(2, "stuck"), update(3, "new")})
	if err != nil || !slices.Equal(fresh, []int64{1}) {
		t.Fatalf("after pruning, new: %v, %v; want only the pruned 1", fresh, err)
	}
	got, err := db.UnhandledUpdates(ctx, 0, 10)
	if err != nil || !slices.Equal(updateIDs(t, got), []int64{1, 2}) {
		t.Fatalf("unhandled after pruning: %v, %v", updateIDs(t, got), err)
	}
}
