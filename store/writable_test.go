package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/store"
)

func TestOpenRefusesADirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := store.Open(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory, not a file") {
		t.Fatalf("open: %v; want it to say the path is a directory", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("open left %v in the directory", entries)
	}
}

// A database file the process may read but not write is refused at start,
// naming the file as the cause, rather than failing every decision later.
// Root may write anyway, so as root the attempt runs as user nobody, with
// the folder writable to it: only the file is read-only.
func TestOpenRefusesAReadOnlyFile(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tollgate-rofile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "tollgate.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var openErr string
	if os.Geteuid() != 0 {
		_, err := store.Open(ctx, path)
		if err == nil {
			t.Fatal("open of a read-only file succeeded")
		}
		openErr = err.Error()
	} else {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		openErr = openAsNobody(t, dir, path)
	}
	if want := "database file " + path + " is read-only"; !strings.Contains(openErr, want) || !strings.Contains(openErr, "make it writable") {
		t.Fatalf("open: %q; want %q and what to do", openErr, want)
	}
	assertUntouched(t, path, before)
}
