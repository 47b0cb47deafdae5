package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"tollgate/bot"
	"tollgate/prompt"
	"tollgate/store/postgres"
)

// pinger is a database that can say whether it answers.
type pinger interface {
	Ping(ctx context.Context) error
}

// roler is a bot that can say what this replica does.
type roler interface {
	Role() bot.Role
}

// pingTimeout bounds the database's answer to a health check.
const pingTimeout = 2 * time.Second

// health is what /healthz answers.
type health struct {
	Database string `json:"database"` // "ok", or why not
	Replica  string `json:"replica"`
	Sender   bool   `json:"sender"`
	Poller   *bool  `json:"poller,omitempty"` // polling mode only
}

// healthHandler answers 200 with the replica's role when the database
// answers a ping within pingTimeout, and 503 otherwise: a replica that
// cannot reach the database can neither record updates nor send.
func healthHandler(db pinger, tg roler, polling bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
		defer cancel()
		role := tg.Role()
		h := health{Database: "ok", Replica: role.Replica, Sender: role.Sender}
		if polling {
			h.Poller = &role.Poller
		}
		status := http.StatusOK
		if err := db.Ping(ctx); err != nil {
			h.Database, status = err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(h)
	})
}

// leasesOf returns the leases replicas take turns by: PostgreSQL's, or
// none for a SQLite file, which one process alone can open.
func leasesOf(db database) prompt.Leases {
	if pg, ok := db.(*postgres.DB); ok {
		return pg
	}
	return nil
}

// replicaName is REPLICA_NAME, or the host name with a random suffix, so
// that two processes on one host (or a restart) never share a name.
func replicaName(name string, hostname func() (string, error)) string {
	if name != "" {
		return name
	}
	host, err := hostname()
	if err != nil || host == "" {
		host = "tollgate"
	}
	var r [3]byte
	_, _ = rand.Read(r[:]) // never fails
	return host + "-" + hex.EncodeToString(r[:])
}
