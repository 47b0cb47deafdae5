package telegramtest_test

import (
	"testing"

	"tollgate/bot/telegramtest"
)

// A poller that dies between two getUpdates never confirmed what it got:
// the next poller, starting with no offset (or any offset not above it),
// gets it again, and an offset above it forgets it for good.
func TestUnconfirmedUpdatesAreDeliveredAgainAndReplayKeepsTheID(t *testing.T) {
	s := telegramtest.NewServer(t, token)
	s.UserMessage(user.ID, user, "one")
	first, _ := getUpdates(t, s, "")
	if len(first) != 1 {
		t.Fatalf("updates = %+v", first)
	}
	id := first[0].ID
	if q := s.Queued(); len(q) != 1 || q[0].ID != id {
		t.Fatalf("queued after an unconfirmed delivery: %+v", q)
	}
	for _, query := range []string{"", "offset=" + itoa(id)} {
		again, _ := getUpdates(t, s, query)
		if len(again) != 1 || again[0].ID != id || again[0].Message.Text != "one" {
			t.Fatalf("getUpdates?%s after a poller died: %+v, want update %d again", query, again, id)
		}
	}
	if none, _ := getUpdates(t, s, "offset="+itoa(id+1)+"&timeout=0"); len(none) != 0 || len(s.Queued()) != 0 {
		t.Fatalf("after confirming: %+v, queued %d", none, len(s.Queued()))
	}

	// Replayed, it comes again with its own ID, before newer ones.
	s.UserMessage(user.ID, user, "two")
	if !s.Replay(id) || s.Replay(999) {
		t.Fatal("Replay of a known update failed, or of an unknown one succeeded")
	}
	s.Replay(id) // already queued: not twice
	got, _ := getUpdates(t, s, "")
	if len(got) != 2 || got[0].ID != id || got[1].Message.Text != "two" {
		t.Fatalf("after Replay: %+v", got)
	}
	// An offset above it forgets it again, as Telegram forgets.
	if rest, _ := getUpdates(t, s, "offset="+itoa(got[1].ID)); len(rest) != 1 || rest[0].ID != got[1].ID {
		t.Fatalf("after offset: %+v", rest)
	}
}
