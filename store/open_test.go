package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"tollgate/migrations"
	"tollgate/prompt"
	"tollgate/store"
)

func TestOpenCreatesFolderAndMigrationsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a", "b", "tollgate.db")
	for i := range 3 {
		db, err := store.Open(ctx, path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		p := gatedPrompt(fmt.Sprintf("p%d", i), "c", fmt.Sprintf("appr%012d", i))
		p.ConversationID = fmt.Sprint("c", i)
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			if _, err := db.LoadPrompt(ctx, fmt.Sprintf("p%d", j)); err != nil {
				t.Fatalf("open %d: prompt p%d: %v", i, j, err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := migrations.FS.ReadDir(".")
	if err != nil || len(entries) == 0 {
		t.Fatalf("embedded migrations: %v, %v", entries, err)
	}
	var applied, maxVersion int
	if err := rawDB(t, path).QueryRow(`SELECT count(*), max(version_id) FROM goose_db_version WHERE version_id > 0`).
		Scan(&applied, &maxVersion); err != nil {
		t.Fatal(err)
	}
	if applied != len(entries) {
		t.Fatalf("%d migration rows for %d files: applied more than once?", applied, len(entries))
	}
}

func TestSecondOpenIsRefusedUntilClose(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	_, err := store.Open(ctx, path)
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v; want ErrInUse naming %s", err, path)
	}
	// The same file by another name is the same file.
	rel, _ := filepath.Rel(mustGetwd(t), path)
	if _, err := store.Open(ctx, rel); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("open by relative path: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(ctx, path)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	again.Close()
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func TestOpenRefusesBadPaths(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, p := range []string{"", filepath.Join(dir, "x.db?mode=ro"), "file:" + filepath.Join(dir, "x.db"), ":memory:"} {
		if db, err := store.Open(ctx, p); err == nil {
			db.Close()
			t.Errorf("open %q succeeded", p)
		}
	}
	if _, err := store.Open(ctx, filepath.Join(dir, "x.db"), store.WithLogger(nil)); err == nil {
		t.Error("nil logger accepted")
	}
}

// assertUntouched fails if the file at path differs from want.
func assertUntouched(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s was modified", path)
	}
}

func TestOpenRefusesAFileThatIsNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tollgate.db")
	junk := bytes.Repeat([]byte("these are my notes, not a database\n"), 200)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "not a SQLite database") || !strings.Contains(err.Error(), path) {
		t.Fatalf("open: %v; want a clear error naming the file", err)
	}
	assertUntouched(t, path, junk)
}

func TestOpenRefusesAnotherApplicationsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('bread')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	before, _ := os.ReadFile(path)
	_, err = store.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "not a Tollgate database") {
		t.Fatalf("open: %v", err)
	}
	assertUntouched(t, path, before)
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	p := gatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	_, err := store.Open(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "schema version 9999 is newer") || !strings.Contains(err.Error(), path) {
		t.Fatalf("open: %v; want an error naming the version and the file", err)
	}
	// Nothing was changed: remove the future version and the data is there.
	raw = rawDB(t, path)
	if _, err := raw.Exec(`DELETE FROM goose_db_version WHERE version_id = 9999`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.ActivePrompt(ctx, "c")
	if err != nil || got.ID != "p1" {
		t.Fatalf("after refusal: %+v, %v", got, err)
	}
}

// A folder the process may not write to gives a clear error at start-up
// and leaves the database there as it was: SQLite could read the file but
// not create its -wal beside it. Root ignores permissions, so
// as root the attempt runs in a helper process as user nobody.
func TestOpenInReadOnlyFolder(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tollgate-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chmod(filepath.Join(dir, "ro"), 0o755)
		os.RemoveAll(dir)
	})
	ro := filepath.Join(dir, "ro")
	path := filepath.Join(ro, "tollgate.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dir, ro} {
		if err := os.Chmod(name, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// The file is writable by the helper, so the folder is the cause.
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}

	var openErr string
	if os.Geteuid() != 0 {
		_, err := store.Open(ctx, path)
		if err == nil {
			t.Fatal("open in a read-only folder succeeded")
		}
		openErr = err.Error()
	} else {
		openErr = openAsNobody(t, dir, path)
	}
	if !strings.Contains(openErr, "folder "+ro+" is not writable") || !strings.Contains(openErr, path) {
		t.Fatalf("open: %q; want an error naming the file and the folder as the cause", openErr)
	}
	assertUntouched(t, path, before)
}

// openAsNobody runs store.Open(path) in a copy of the test binary as user
// nobody and returns the error it reported.
func openAsNobody(t *testing.T, dir, path string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "store.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=open", "STORE_HELPER_DB="+path)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	msg, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "open error: ")
	if !ok {
		t.Fatalf("helper as nobody did not fail to open: %s", out)
	}
	return msg
}

// helperOpen is the helper process of TestOpenInReadOnlyFolder.
func helperOpen() int {
	db, err := store.Open(context.Background(), os.Getenv("STORE_HELPER_DB"))
	if err != nil {
		fmt.Println("open error:", err)
		return 0
	}
	db.Close()
	fmt.Println("opened")
	return 0
}

var _ = prompt.ErrNotFound

func TestOpenKeepsTheDatabaseFilesPrivate(t *testing.T) {
	// The file holds what users typed and what tools were asked to do; a
	// data folder that already exists (made by hand, 0755) must not leave
	// it world-readable.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tollgate.db")
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreatePrompt(context.Background(), gatedPrompt("p1", "c", "appr000000000001")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", filepath.Base(name), fi.Mode().Perm())
		}
	}
}
