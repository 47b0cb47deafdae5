package bot

import (
	"context"
	"encoding/json"
	"time"
)

// The inbox methods of send_test.go's nopStore, apart so that the pacing
// work on that file and this one do not meet: every update is new, and
// nothing is left unhandled.

func (nopStore) RecordUpdates(_ context.Context, ups []json.RawMessage) ([]int64, error) {
	ids := make([]int64, 0, len(ups))
	for _, u := range ups {
		d, err := decodeUpdate(u)
		if err != nil {
			return nil, err
		}
		ids = append(ids, d.ID)
	}
	return ids, nil
}
func (nopStore) MarkHandled(context.Context, int64) error { return nil }
func (nopStore) UnhandledUpdates(context.Context, int64, int) ([]json.RawMessage, error) {
	return nil, nil
}
func (nopStore) PruneUpdates(context.Context, time.Duration) (int64, error) { return 0, nil }
