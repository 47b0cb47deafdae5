// Package migrations holds Tollgate's database schema as numbered goose v3
// SQL files, embedded in the binary so that a start-up can bring any older
// database up to date without files beside the executable: SQLite's in
// this folder, PostgreSQL's in postgres/, each with its own history.
//
// FS and Postgres are read-only data and safe for concurrent use.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds the SQLite migration files, named NNNNN_what.sql, for goose's
// Provider API.
//
//go:embed *.sql
var FS embed.FS

//go:embed postgres/*.sql
var postgres embed.FS

// Postgres returns the PostgreSQL migration files, named NNNNN_what.sql,
// at the root where goose's Provider API reads them.
func Postgres() fs.FS {
	sub, err := fs.Sub(postgres, "postgres")
	if err != nil {
		panic(err) // not reached: the folder is embedded, so it exists
	}
	return sub
}
