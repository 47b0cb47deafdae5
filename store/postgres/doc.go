// Package postgres keeps Tollgate's durable state in PostgreSQL, through
// pgx: the same records, with the same semantics, as package store keeps
// in SQLite. It implements prompt.Store, and structurally the storage
// interfaces of packages bot and tools/webfetch, without importing them;
// package storetest runs one suite against both stores.
//
// Open applies the embedded PostgreSQL migrations under a session-level
// advisory lock, so that several processes starting at once migrate once.
// Unlike the SQLite store, several processes may share one database: every
// decision is a compare-and-set on a row, and the changes that touch one
// prompt lock its row first, so they serialize rather than deadlock.
//
// Writes are durable when a method returns. Times come back in UTC.
//
// A *DB is safe for concurrent use by multiple goroutines. It starts no
// goroutines of its own beyond pgxpool's.
package postgres
