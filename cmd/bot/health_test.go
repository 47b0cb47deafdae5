package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/bot"
	"tollgate/store"
)

type fixedRole bot.Role

func (r fixedRole) Role() bot.Role { return bot.Role(r) }

// /healthz says whether the database answers and what the replica does:
// 200 while it answers, 503 once it does not.
func TestHealthzReportsTheDatabaseAndTheRole(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	get := func(h http.Handler) (int, map[string]any) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%v in %q", err, rec.Body.String())
		}
		return rec.Code, got
	}

	code, got := get(healthHandler(db, fixedRole{Replica: "r1", Sender: true, Poller: false}, true))
	if code != http.StatusOK || got["database"] != "ok" || got["replica"] != "r1" || got["sender"] != true || got["poller"] != false {
		t.Fatalf("polling: %d %v", code, got)
	}
	code, got = get(healthHandler(db, fixedRole{Replica: "r2"}, false))
	if _, ok := got["poller"]; code != http.StatusOK || ok || got["sender"] != false {
		t.Fatalf("webhook mode: %d %v; want no poller", code, got)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, got = get(healthHandler(db, fixedRole{Replica: "r1", Sender: true}, false))
	if code != http.StatusServiceUnavailable || got["database"] == "ok" || !strings.Contains(got["database"].(string), "closed") {
		t.Fatalf("closed database: %d %v", code, got)
	}
}

func TestReplicaNameDefaultsToTheHostAndASuffix(t *testing.T) {
	if got := replicaName("blue", nil); got != "blue" {
		t.Fatalf("REPLICA_NAME blue gave %q", got)
	}
	host := func() (string, error) { return "web-1", nil }
	a, b := replicaName("", host), replicaName("", host)
	if !strings.HasPrefix(a, "web-1-") || a == b {
		t.Fatalf("defaults %q and %q: want web-1-<random>, each its own", a, b)
	}
}
