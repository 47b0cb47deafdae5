package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/store"
)

// newDatabase creates a Tollgate database and closes it.
func newDatabase(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func runBot(args []string, env map[string]string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, envOf(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// The check needs DATABASE_PATH only: no Telegram token, no model.
func TestCheckSaysOKForASoundDatabase(t *testing.T) {
	path := newDatabase(t)
	out, _, err := runBot([]string{"bot", "check"}, map[string]string{"DATABASE_PATH": path})
	if err != nil || out != "ok\n" {
		t.Fatalf("check: %q, %v", out, err)
	}

	envFile := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(envFile, []byte("DATABASE_PATH="+path+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = runBot([]string{"bot", "check", "--env-file", envFile}, nil)
	if err != nil || out != "ok\n" {
		t.Fatalf("check with --env-file: %q, %v", out, err)
	}
}

func TestCheckReadsTheDefaultDatabasePath(t *testing.T) {
	got, err := databasePath(envOf(nil))
	if err != nil || got != "data/tollgate.db" {
		t.Fatalf("default: %q, %v", got, err)
	}
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t"}))
	if err != nil || cfg.DatabasePath != got {
		t.Fatalf("the bot's default is %q, the check's %q (%v)", cfg.DatabasePath, got, err)
	}
	// Run in an empty folder: the default file is not there, and the check
	// says so rather than creating it.
	t.Chdir(t.TempDir())
	_, _, err = runBot([]string{"bot", "check"}, nil)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_PATH=data/tollgate.db") || !strings.Contains(err.Error(), "no database file") {
		t.Fatalf("check without a database: %v", err)
	}
	if _, err := os.Stat("data"); !os.IsNotExist(err) {
		t.Fatalf("check created data/: %v", err)
	}
}

func TestCheckRefusesWhileTheBotRuns(t *testing.T) {
	path := newDatabase(t)
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, _, err := runBot([]string{"bot", "check"}, map[string]string{"DATABASE_PATH": path})
	if err == nil || !strings.Contains(err.Error(), "stop the bot first") || !strings.Contains(err.Error(), path) || out != "" {
		t.Fatalf("check while open: %q, %v", out, err)
	}
}

func TestCheckListsTheProblemsOfADamagedDatabase(t *testing.T) {
	path := newDatabase(t)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	if err := raw.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'prompts'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(bytes.Repeat([]byte{0xA5}, 64), (root-1)*pageSize)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := runBot([]string{"bot", "check"}, map[string]string{"DATABASE_PATH": path})
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Fatalf("check: %v; want an error saying what to do", err)
	}
	if out == "" || out == "ok\n" {
		t.Fatalf("check printed %q; want the problems", out)
	}
}

func TestCheckRefusesStrayArguments(t *testing.T) {
	if _, _, err := runBot([]string{"bot", "check", "now"}, nil); err == nil || !strings.Contains(err.Error(), "usage: bot check") {
		t.Fatalf("check now: %v", err)
	}
}

// TestCheckAndAuditSayTheyReadSQLiteOnly: with DATABASE_URL set they do
// not quietly read a stale SQLite file at DATABASE_PATH.
func TestCheckAndAuditSayTheyReadSQLiteOnly(t *testing.T) {
	env := envOf(map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "DATABASE_PATH": filepath.Join(t.TempDir(), "x.db")})
	for _, args := range [][]string{{"bot", "check"}, {"bot", "audit"}} {
		var out strings.Builder
		err := run(context.Background(), args, env, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is set") {
			t.Errorf("%v: %v", args[1:], err)
		}
	}
}
