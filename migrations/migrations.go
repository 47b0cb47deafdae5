// Package migrations holds Tollgate's database schema as numbered goose v3
// SQL files, embedded in the binary so that a start-up can bring any older
// database up to date without files beside the executable.
//
// FS is read-only data and safe for concurrent use.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_what.sql, for goose's
// Provider API.
//
//go:embed *.sql
var FS embed.FS
