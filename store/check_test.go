package store_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/store"
)

// damagedDB builds a Tollgate database with a few prompts, closes it, and
// writes junk over the middle of the prompts table's root page, as a bad
// disk sector would.
func damagedDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		p := gatedPrompt(id, "c"+id, "appr00000000000"+id)
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil { // the last close folds the WAL into the file
		t.Fatal(err)
	}
	var root, pageSize int64
	raw := rawDB(t, path)
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
	defer f.Close()
	junk := bytes.Repeat([]byte{0xA5}, 64)
	if _, err := f.WriteAt(junk, (root-1)*pageSize); err != nil { // pages count from 1
		t.Fatal(err)
	}
	return path
}

func TestOpenRefusesADamagedDatabaseAndSaysWhatToDo(t *testing.T) {
	path := damagedDB(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(context.Background(), path)
	if !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("open: %v; want ErrDamaged", err)
	}
	for _, want := range []string{path, "quick_check found", "restore " + path + " from a backup", "bot check", "PRAGMA integrity_check"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("open: %v; want it to say %q", err, want)
		}
	}
	assertUntouched(t, path, before)

	problems, err := store.Check(context.Background(), path)
	if err != nil || len(problems) == 0 {
		t.Fatalf("check: %q, %v; want the problems", problems, err)
	}
	assertUntouched(t, path, before)
}

func TestCheckFindsNothingInASoundDatabase(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Check(ctx, path); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("check while open: %v; want ErrInUse", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	problems, err := store.Check(ctx, path)
	if err != nil || problems != nil {
		t.Fatalf("check: %q, %v", problems, err)
	}
	// Released again: the bot starts after a check.
	again, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

func TestCheckCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing.db"), dir} {
		if _, err := store.Check(context.Background(), path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("check %s: %v; want an error naming it", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("check created the file: %v", err)
	}
	junk := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("my notes\n"), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Check(context.Background(), junk); err == nil || !strings.Contains(err.Error(), "not a SQLite database") {
		t.Fatalf("check of a text file: %v", err)
	}
}

// A file past the start-up limit opens without the check, says so in the
// log, and Check still finds the damage. The file is made big by growing
// it sparsely: SQLite goes by the page count in its header.
func TestABigDatabaseSkipsTheStartUpCheck(t *testing.T) {
	path := damagedDB(t)
	if err := os.Truncate(path, 101<<20); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	db, err := store.Open(context.Background(), path, store.WithLogger(log))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if !strings.Contains(logs.String(), "skipped the start-up check") || !strings.Contains(logs.String(), "bot check") {
		t.Errorf("log: %s; want it to say the check was skipped and how to run it", logs.String())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	problems, err := store.Check(context.Background(), path)
	if err != nil || len(problems) == 0 {
		t.Fatalf("check: %q, %v; want the problems", problems, err)
	}
}
