package shell

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tollgate/prompt"
)

// newShell builds a Shell over a temp dir with env as the bot's
// environment.
func newShell(t *testing.T, cfg Config, env map[string]string) (*Shell, *prompt.Tool) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if env == nil {
		env = map[string]string{"PATH": os.Getenv("PATH")}
	}
	cfg.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools := s.Tools()
	if len(tools) != 1 || tools[0].Name != ToolRun {
		t.Fatalf("Tools() = %v, want one %s", tools, ToolRun)
	}
	return s, tools[0]
}

func input(t *testing.T, command, dir string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(runInput{Command: command, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func invoke(t *testing.T, tool *prompt.Tool, command, dir string) (string, error) {
	t.Helper()
	return tool.Invoke(context.Background(), input(t, command, dir))
}

func TestInvokeRunsInDir(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, tool := newShell(t, Config{Dir: root}, nil)
	real, _ := filepath.EvalSymlinks(root)
	for dir, want := range map[string]string{"": real, ".": real, "sub": filepath.Join(real, "sub"), "sub/../sub": filepath.Join(real, "sub")} {
		out, err := invoke(t, tool, "pwd", dir)
		if err != nil {
			t.Fatalf("dir %q: %v", dir, err)
		}
		if !strings.Contains(out, "[stdout]\n"+want+"\n") || !strings.HasPrefix(out, "exit status 0\n") {
			t.Errorf("dir %q: result %q, want pwd %s", dir, out, want)
		}
	}
}

func TestInvokeRefusesDirsOutside(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, tool := newShell(t, Config{Dir: root}, nil)
	for _, dir := range []string{"..", "../x", "sub/../../x", outside, "/", "out", "out/", "file", "missing"} {
		if out, err := invoke(t, tool, "touch pwned", dir); err == nil {
			t.Errorf("dir %q ran: %q", dir, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "pwned")); err == nil {
		t.Error("a command ran outside the working directory")
	}
}

func TestInvokeGivesEmptyStdin(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	out, err := invoke(t, tool, "wc -c; read line; echo read=$?", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "0\nread=1\n") {
		t.Errorf("result %q, want 0 bytes of stdin and read failing", out)
	}
}

func TestInvokeCutsBothStreams(t *testing.T) {
	_, tool := newShell(t, Config{MaxOutput: 100}, nil)
	out, err := invoke(t, tool, "head -c 5000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' b >&2", "")
	if err != nil {
		t.Fatal(err)
	}
	want := "[stdout]\n" + strings.Repeat("a", 100) + "\n[output cut at 100 bytes]\n[stderr]\n" + strings.Repeat("b", 100) + "\n[output cut at 100 bytes]\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("result %q, want it to end %q", out, want)
	}
	out, _ = invoke(t, tool, "printf short", "")
	if strings.Contains(out, "cut") {
		t.Errorf("short output marked as cut: %q", out)
	}
}

func TestInvokeReportsExitStatus(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	out, err := invoke(t, tool, "echo oops >&2; exit 3", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "exit status 3\n") || !strings.Contains(out, "[stderr]\noops\n") || !strings.Contains(out, "[stdout: empty]") {
		t.Errorf("result %q", out)
	}
}

// gone reports whether pid no longer runs: it does not exist, or it is
// a zombie waiting for a parent that does not reap (PID 1 in a container).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func TestInvokeTimeoutKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	_, tool := newShell(t, Config{Dir: dir, Timeout: 300 * time.Millisecond}, nil)
	out, err := invoke(t, tool, "sleep 100 & echo $! > pid; wait", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "timed out after 300ms; the process group was killed\n") {
		t.Errorf("result %q, want the timeout reported", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// SIGKILL is delivered before Invoke returns; a killed process
	// may take a moment to be reaped by its new parent.
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d still runs after the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInvokeLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	_, tool := newShell(t, Config{Dir: dir}, nil)
	out, err := invoke(t, tool, "sleep 100 & echo $! > pid", "")
	if err != nil || !strings.HasPrefix(out, "exit status 0") {
		t.Fatalf("result %q, %v", out, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background %d still runs after the call", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInvokeCancelKillsTheGroup(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tool.Invoke(ctx, input(t, "sleep 100", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("Invoke with a canceled context = %v, want context.Canceled", err)
	}
}

func TestInvokeKeepsSecretsOut(t *testing.T) {
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/bot", "LANG": "C.UTF-8",
		"TELEGRAM_BOT_TOKEN": "123:secret", "LLM_API_KEY": "sk-secret", "FOO": "bar",
	}
	_, tool := newShell(t, Config{}, env)
	out, err := invoke(t, tool, "env", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if n, _, ok := strings.Cut(line, "="); ok {
			names = append(names, n)
		}
	}
	// bash sets PWD, SHLVL and _ itself.
	names = slices.DeleteFunc(names, func(n string) bool { return n == "PWD" || n == "SHLVL" || n == "_" || n == "OLDPWD" })
	slices.Sort(names)
	if !slices.Equal(names, []string{"HOME", "LANG", "PATH"}) {
		t.Errorf("the command saw %q; want HOME, LANG, PATH only", names)
	}
	if strings.Contains(out, "secret") || strings.Contains(out, "bar") {
		t.Errorf("a secret reached the command: %q", out)
	}

	_, tool = newShell(t, Config{Env: []string{"PATH", "FOO"}}, env)
	out, _ = invoke(t, tool, "echo \"$FOO|$HOME|$TELEGRAM_BOT_TOKEN\"", "")
	if !strings.Contains(out, "bar||\n") {
		t.Errorf("with Env PATH,FOO the command printed %q, want bar||", out)
	}
}

func TestNewChecksConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no dir":       {},
		"missing dir":  {Dir: filepath.Join(t.TempDir(), "missing")},
		"a file":       {Dir: file},
		"bad env name": {Dir: t.TempDir(), Env: []string{"PATH", "A=B"}},
		"negative":     {Dir: t.TempDir(), Timeout: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		} else if strings.Contains(err.Error(), "SHELL_") {
			t.Errorf("%s: error %q names an environment variable; cmd/bot adds those", name, err)
		}
	}
}
