// Package store keeps Tollgate's durable state in SQLite (modernc.org/sqlite,
// pure Go): prompts with their output items, the approval audit trail, the
// chats behind conversations, the messages that show each approval, and the
// web-fetch allowlist. It implements prompt.Store, and structurally the
// storage interfaces of packages bot and tools/webfetch, without importing
// them.
//
// Open applies the embedded migrations and takes exclusive ownership of the
// file until Close: a second Open of the same file, from this process or
// another, fails at once with ErrInUse.
//
// Writes go through one connection, in immediate transactions, and are
// durable when a method returns. Reads use a small pool and see every write
// that returned before they started. Times come back in UTC.
//
// A *DB is safe for concurrent use by multiple goroutines. It starts no
// goroutines of its own.
package store
