package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/store"
)

// otherNames gives the file at path three more names: a symlink to it, a
// hard link to it, and a path through a symlink to its folder.
func otherNames(t *testing.T, path string) (symlink, hardlink, viaFolder string) {
	t.Helper()
	dir := t.TempDir()
	symlink = filepath.Join(dir, "link.db")
	hardlink = filepath.Join(filepath.Dir(path), "hard.db") // a hard link stays on one file system
	folder := filepath.Join(dir, "data-link")
	if err := os.Symlink(path, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, hardlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(path), folder); err != nil {
		t.Fatal(err)
	}
	return symlink, hardlink, filepath.Join(folder, filepath.Base(path))
}

func TestEveryNameOfTheFileIsRefusedWhileItIsOpen(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	symlink, hardlink, viaFolder := otherNames(t, path)
	rel, err := filepath.Rel(mustGetwd(t), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, symlink, hardlink, viaFolder, rel} {
		abs, _ := filepath.Abs(name)
		_, err := store.Open(ctx, name)
		if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), path) {
			t.Errorf("open %s: %v; want ErrInUse naming %s and %s", name, err, abs, path)
		}
		if _, err := store.Check(ctx, name); !errors.Is(err, store.ErrInUse) {
			t.Errorf("check %s: %v; want ErrInUse", name, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Released, the file opens by another name, and then that name holds it.
	viaLink, err := store.Open(ctx, symlink)
	if err != nil {
		t.Fatalf("open by symlink after close: %v", err)
	}
	defer viaLink.Close()
	if _, err := store.Open(ctx, hardlink); !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), symlink) {
		t.Fatalf("open by hard link while the symlink holds it: %v", err)
	}
}

func TestAnotherProcessIsRefusedByEveryName(t *testing.T) {
	db, path := openTemp(t)
	symlink, hardlink, viaFolder := otherNames(t, path)
	for _, name := range []string{path, symlink, hardlink, viaFolder} {
		out := runHelper(t, "open", name)
		if want := "database in use: " + name + " is open in another Tollgate process"; !strings.Contains(out, want) {
			t.Errorf("second process opening %s: %q; want %q", name, out, want)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if out := runHelper(t, "open", hardlink); out != "opened" {
		t.Fatalf("second process after close: %q", out)
	}
}

// SQLite's own locks are fcntl locks, which the flock on the same file
// does not touch: another process (the sqlite3 shell taking a backup, say)
// reads the database while the bot runs, and its writes still wait for
// the bot's.
func TestSQLiteStillLocksWhileTheFileIsFlocked(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if out := runHelper(t, "sqlite", path, "STORE_HELPER_SQL=read"); out != "prompts 1" {
		t.Fatalf("read from another process: %q", out)
	}
	conn, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if out := runHelper(t, "sqlite", path, "STORE_HELPER_SQL=write"); !strings.Contains(out, "locked") {
		t.Fatalf("write from another process while this one writes: %q; want it kept out", out)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if out := runHelper(t, "sqlite", path, "STORE_HELPER_SQL=write"); out != "write ok" {
		t.Fatalf("write from another process after: %q", out)
	}
}

// A refused Open must not open and close the file: closing any descriptor
// drops every POSIX lock this process holds on it, SQLite's included. The
// sign of dropped locks: the sqlite3 shell (what the README's backup runs)
// reading the database then thinks it was the last user, checkpoints, and
// deletes the WAL the open DB still writes to.
func TestARefusedOpenLeavesSQLiteLocksAlone(t *testing.T) {
	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("needs the sqlite3 shell")
	}
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	symlink, hardlink, _ := otherNames(t, path)
	for _, name := range []string{path, symlink, hardlink} {
		if _, err := store.Open(ctx, name); !errors.Is(err, store.ErrInUse) {
			t.Fatalf("open %s: %v", name, err)
		}
	}
	out, err := exec.Command(shell, path, "SELECT count(*) FROM prompts").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("sqlite3 shell: %v: %s", err, out)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("the WAL of the open database: %v", err)
	}
}

// runHelper runs this test binary as helper mode on the database at path
// and returns what it printed.
func runHelper(t *testing.T, mode, path string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "STORE_HELPER_DB="+path), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", mode, err, out)
	}
	msg := strings.TrimSpace(string(out))
	return strings.TrimPrefix(msg, "open error: ")
}

// helperSQLite is a plain SQLite client in another process: it reads, or
// takes the write lock without waiting, as STORE_HELPER_SQL says.
func helperSQLite() int {
	db, err := sql.Open("sqlite", os.Getenv("STORE_HELPER_DB")+"?_busy_timeout=0")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer db.Close()
	switch os.Getenv("STORE_HELPER_SQL") {
	case "read":
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM prompts`).Scan(&n); err != nil {
			fmt.Println("read error:", err)
			return 0
		}
		fmt.Println("prompts", n)
	case "write":
		conn, err := db.Conn(context.Background())
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer conn.Close()
		if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
			fmt.Println("write error:", err)
			return 0
		}
		conn.ExecContext(context.Background(), `ROLLBACK`)
		fmt.Println("write ok")
	}
	return 0
}
