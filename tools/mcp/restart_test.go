package mcp_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/tools/mcp"
)

// TestCrashedServerRestartsAndTheCallIsNotRepeated: a server that dies
// during a call fails that call with "outcome unknown"; while it is down
// its tools stay and say it is restarting; it comes back after the
// backoff with its tools; and the call it died in is never sent again.
func TestCrashedServerRestartsAndTheCallIsNotRepeated(t *testing.T) {
	downs, release := make(chan int, 10), make(chan struct{})
	srv := stdioServer(t, "s", false, nil)
	crashLog := srv.Env[crashLogEnv]
	h := start(t, mcp.Config{Servers: []mcp.Server{srv}}, mcp.Options{Backoff: func(attempt int) time.Duration {
		downs <- attempt
		<-release
		return time.Millisecond
	}})

	_, err := h.call(t, "mcp.s.crash", `{}`)
	if err == nil || !strings.Contains(err.Error(), "stopped during the call") || !strings.Contains(err.Error(), "not sent again") {
		t.Fatalf("crash call: %v, want it to say the outcome is unknown and not repeated", err)
	}
	if attempt := receive(t, downs); attempt != 1 {
		t.Fatalf("backoff attempt %d, want 1", attempt)
	}
	st := h.m.Status()[0]
	if st.Up || st.Tools == 0 || !strings.Contains(st.Err, "stopped") {
		t.Fatalf("status while down %+v", st)
	}
	_, err = h.call(t, "mcp.s.echo", `{"text":"hi"}`)
	if err == nil || !strings.Contains(err.Error(), "MCP server s is not running (restarting: stopped") {
		t.Fatalf("call while down: %v", err)
	}

	close(release)
	h.waitChange(t)
	if st := h.m.Status()[0]; !st.Up || st.Err != "" {
		t.Fatalf("status after restart %+v", st)
	}
	if out, err := h.call(t, "mcp.s.echo", `{"text":"back"}`); err != nil || out != "back" {
		t.Fatalf("echo after restart: %q, %v", out, err)
	}
	data, err := os.ReadFile(crashLog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "called"); n != 1 {
		t.Fatalf("the crashing tool ran %d times, want once", n)
	}
}

// TestServerThatCannotStartDoesNotStopTheOthers: New succeeds, the
// broken server's tools are absent, and Status and the log say why
// (what it wrote to stderr); the other server works.
func TestServerThatCannotStartDoesNotStopTheOthers(t *testing.T) {
	tries := make(chan int, 10)
	broken := stdioServer(t, "broken", false, map[string]string{serverEnv: "broken"})
	h := start(t, mcp.Config{Servers: []mcp.Server{broken, stdioServer(t, "good", false, nil)}}, mcp.Options{
		Backoff: func(attempt int) time.Duration { tries <- attempt; return time.Hour },
	})
	receive(t, tries)
	st := h.m.Status()
	if st[0].Name != "broken" || st[0].Up || st[0].Tools != 0 || !strings.Contains(st[0].Err, "permission denied") {
		t.Fatalf("broken server status %+v, want down, no tools, saying why", st[0])
	}
	if !st[1].Up {
		t.Fatalf("good server status %+v", st[1])
	}
	for _, n := range names(h.m.Tools()) {
		if strings.HasPrefix(n, "mcp.broken.") {
			t.Fatalf("tool %s of a server that never started", n)
		}
	}
	if !strings.Contains(h.logs.String(), "permission denied") {
		t.Fatalf("the log does not say why:\n%s", h.logs)
	}
	if out, err := h.call(t, "mcp.good.echo", `{"text":"ok"}`); err != nil || out != "ok" {
		t.Fatalf("good server: %q, %v", out, err)
	}
}

// TestHTTPServerThatDiesIsStartedAgain: over HTTP nothing but a call
// notices a server that went away; that call's outcome is unknown, the
// session is dropped, and the server is connected to again.
func TestHTTPServerThatDiesIsStartedAgain(t *testing.T) {
	var dead atomic.Bool
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newTestServer(false) }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() {
			panic(http.ErrAbortHandler) // the connection drops, as when a server dies
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	downs, release := make(chan int, 10), make(chan struct{})
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: ts.URL}}}, mcp.Options{Backoff: func(attempt int) time.Duration {
		downs <- attempt
		<-release
		return time.Millisecond
	}})

	dead.Store(true)
	if _, err := h.call(t, "mcp.web.echo", `{"text":"lost"}`); err == nil || !strings.Contains(err.Error(), "whether it took effect is unknown") {
		t.Fatalf("call to a dead server: %v", err)
	}
	receive(t, downs)
	if st := h.m.Status()[0]; st.Up || st.Err == "" {
		t.Fatalf("status %+v, want down with a reason", st)
	}
	dead.Store(false)
	close(release)
	h.waitChange(t)
	if out, err := h.call(t, "mcp.web.echo", `{"text":"back"}`); err != nil || out != "back" {
		t.Fatalf("after the server came back: %q, %v", out, err)
	}
}

// TestUnreachableHTTPServerIsRetried: an HTTP server that is not there
// at start is down in Status and tried again, not fatal.
func TestUnreachableHTTPServerIsRetried(t *testing.T) {
	tries := make(chan int, 10)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "gone", URL: gone.URL}}}, mcp.Options{
		Backoff: func(attempt int) time.Duration { tries <- attempt; return time.Hour },
	})
	receive(t, tries)
	if st := h.m.Status()[0]; st.Up || st.Err == "" {
		t.Fatalf("status %+v, want down with a reason", st)
	}
}

// TestHTTPServerThatDiesIsNoticedByAPing: between calls, a ping finds a
// server that went away, so its tools say "not running" before any call
// is lost to it.
func TestHTTPServerThatDiesIsNoticedByAPing(t *testing.T) {
	var dead atomic.Bool
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newTestServer(false) }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() {
			panic(http.ErrAbortHandler)
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	downs := make(chan int, 10)
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: ts.URL}}}, mcp.Options{
		Ping:    time.Millisecond,
		Backoff: func(attempt int) time.Duration { downs <- attempt; return time.Hour },
	})
	dead.Store(true)
	receive(t, downs)
	if st := h.m.Status()[0]; st.Up || !strings.Contains(st.Err, "ping") {
		t.Fatalf("status %+v, want down because of a ping", st)
	}
	if _, err := h.call(t, "mcp.web.echo", `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Fatalf("call while down: %v", err)
	}
}
