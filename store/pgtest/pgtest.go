// Package pgtest gives tests a real, throwaway PostgreSQL server: the
// server binaries of Debian's postgresql package, started on demand in a
// temporary folder, listening only on a Unix socket in that folder, and
// stopped when the test binary's tests end. Each URL call creates a fresh
// database on it, so tests never see each other's rows.
//
// A package that uses it calls Main (or Run) from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without the server binaries, URL skips the test with one line that says
// why, or fails it if TOLLGATE_REQUIRE_POSTGRES=1 (as CI sets), so that a
// machine without PostgreSQL cannot pass CI by skipping.
//
// URL is safe for concurrent use by parallel tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that turns a missing PostgreSQL from a
// skip into a failure.
const RequireEnv = "TOLLGATE_REQUIRE_POSTGRES"

// errNotInstalled marks a start that failed because there is no server to
// start, as opposed to one that broke.
var errNotInstalled = errors.New("PostgreSQL is not installed")

// The server is process-wide on purpose: starting PostgreSQL costs about a
// second, so one server per test binary serves every test in it, each in
// its own database. Main stops it after the tests.
var shared struct {
	once     sync.Once
	srv      *server
	err      error
	mainRan  bool // set before m.Run, read after: no race
	told     sync.Once
	stopOnce sync.Once
}

// Main runs the tests of m and then stops the server, if a test started
// one, and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to clean up before it exits:
// it runs the tests of m, stops the server, and returns the tests' status.
func Run(m *testing.M) int {
	shared.mainRan = true
	code := m.Run()
	stop()
	return code
}

func stop() {
	shared.stopOnce.Do(func() {
		if shared.srv != nil {
			if err := shared.srv.stop(); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			}
		}
	})
}

// URL returns the URL of a new, empty database on the test server,
// starting the server at the first call. It skips t (or fails it, with
// TOLLGATE_REQUIRE_POSTGRES=1) when PostgreSQL is not installed.
func URL(t testing.TB) string {
	t.Helper()
	if !shared.mainRan {
		t.Fatal("pgtest: call pgtest.Main(m) or pgtest.Run(m) from TestMain, so that the server is stopped after the tests")
	}
	shared.once.Do(func() { shared.srv, shared.err = start() })
	if err := shared.err; err != nil {
		if !errors.Is(err, errNotInstalled) {
			t.Fatalf("pgtest: start PostgreSQL: %v", err)
		}
		line := fmt.Sprintf("PostgreSQL tests not run: %v (install Debian's postgresql package)", err)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s; %s=1 requires them", line, RequireEnv)
		}
		shared.told.Do(func() { fmt.Fprintln(os.Stderr, line) })
		t.Skip(line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := shared.srv.createDB(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// bindir finds the server binaries: pg_config's answer, else the newest
// Debian layout under /usr/lib/postgresql (postgresql-common's pg_config
// is only there with libpq-dev or the server package).
func bindir() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb and pg_ctl from pg_config --bindir or /usr/lib/postgresql/*/bin", errNotInstalled)
}

func versionOf(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// server is one running PostgreSQL.
type server struct {
	bin, dir string
	cred     *syscall.Credential // nil: run as ourselves
	admin    string              // URL of the postgres database
}

// start runs initdb and pg_ctl start in a new temporary folder. The server
// refuses to run as root, so as root it runs as nobody, in a folder handed
// to nobody.
func start() (*server, error) {
	bin, err := bindir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, dir: dir}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *server) init() error {
	// Other users must reach the folder: the server's user, as root.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("running as root, the server needs an unprivileged user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(s.dir, "data")
	// trust: the socket sits in a folder only this test run knows; fsync
	// off: a throwaway server need not survive a power cut.
	if err := s.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--no-sync", "--no-instructions"); err != nil {
		return err
	}
	opts := "-c listen_addresses='' -k " + s.dir + " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	if err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(s.dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	s.admin = s.urlOf("postgres")
	return nil
}

// run runs one of the server binaries as the server's user.
func (s *server) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

func (s *server) urlOf(db string) string {
	q := url.Values{"host": {s.dir}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db, RawQuery: q.Encode()}).String()
}

func (s *server) createDB(ctx context.Context) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return "", fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.urlOf(name), nil
}

// stop stops the server at once (its data is thrown away) and removes
// its folder.
func (s *server) stop() error {
	err := s.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", filepath.Join(s.dir, "data"))
	return errors.Join(err, os.RemoveAll(s.dir))
}
