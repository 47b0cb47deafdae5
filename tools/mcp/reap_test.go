package mcp_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tollgate/tools/mcp"
)

// TestAStdioServersChildrenStopWithIt: what a stdio server starts is in
// its process group and is killed when the server is closed, so an npx
// wrapper's node does not outlive the bot.
func TestAStdioServersChildrenStopWithIt(t *testing.T) {
	h := start(t, mcp.Config{Servers: []mcp.Server{stdioServer(t, "s", false, nil)}}, mcp.Options{})
	out, err := h.call(t, "mcp.s.spawn", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("spawn said %q", out)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child is not running before the close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A killed process is gone once its parent (the server, gone too) is
	// reaped by init: poll for that, bounded.
	deadline := time.Now().Add(waitTimeout)
	for syscall.Kill(pid, 0) == nil {
		if zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running after the server was closed", pid)
		}
		runtime.Gosched()
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(%d, 0): %v", pid, err)
	}
}

// zombie reports whether pid has exited and waits only to be reaped.
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	_, rest, ok := strings.Cut(string(stat), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}
