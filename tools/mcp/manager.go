package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/prompt"
)

// Defaults for the zero values of Options.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxResult = 64 << 10
)

// Options tune a Manager. Zero fields take the defaults named.
type Options struct {
	// Timeout bounds one tool call (MCP_TIMEOUT, default DefaultTimeout),
	// and each start of a server and each listing of its tools. A call
	// that outlives it is cancelled and the model told so.
	Timeout time.Duration
	// MaxResult bounds the bytes of a result the model gets (default
	// DefaultMaxResult); a longer one is cut with a note.
	MaxResult int
	Logger    *slog.Logger // default: discard
	// Backoff is how long to wait before start attempt n (1, 2, …) after
	// a server failed to start or stopped (default DefaultBackoff).
	Backoff func(attempt int) time.Duration
	Now     func() time.Time // default: time.Now
	// Ping is how often a running server is pinged (default
	// DefaultPing; negative: never). Over streamable HTTP nothing else
	// notices a server that went away before the next call.
	Ping time.Duration
}

// DefaultPing is how often a running server is pinged by default.
const DefaultPing = 30 * time.Second

// DefaultBackoff waits 1s, 2s, 4s, … and at most a minute.
func DefaultBackoff(attempt int) time.Duration {
	d := time.Second
	for i := 1; i < attempt && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// ServerStatus is a server as /help and the log show it.
type ServerStatus struct {
	Name string
	// Up is true while a session with the server is open.
	Up bool
	// Tools counts the server's tools the agent has: the last listing's,
	// kept while the server restarts; zero if it never started.
	Tools int
	// Err says why the server is down, or why its last start failed.
	Err string
	// Since is when Up last changed.
	Since time.Time
}

// Manager runs the configured MCP servers and offers their tools. It is a
// prompt.ToolSource. Its methods are safe for concurrent use.
type Manager struct {
	timeout   time.Duration
	maxResult int
	log       *slog.Logger
	backoff   func(int) time.Duration
	now       func() time.Time
	ping      time.Duration
	servers   []*server

	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	onChange []func()
}

var _ prompt.ToolSource = (*Manager)(nil)

// New checks cfg and opts, starts a goroutine per server that connects to
// it and keeps it running, and returns once each server's first start has
// succeeded or failed, or ctx is done. ctx bounds only that wait: the
// servers run until Close. A server that cannot start is not an error
// here: it is logged, retried with backoff, and reported by Status, and
// its tools are absent until it starts. Errors are for a Config or
// Options no server could run with.
func New(ctx context.Context, cfg Config, opts Options) (*Manager, error) {
	if opts.Timeout < 0 || opts.MaxResult < 0 {
		return nil, errors.New("mcp: Timeout and MaxResult must not be negative")
	}
	m := &Manager{
		timeout:   opts.Timeout,
		ping:      opts.Ping,
		maxResult: opts.MaxResult,
		log:       opts.Logger,
		backoff:   opts.Backoff,
		now:       opts.Now,
	}
	if m.timeout == 0 {
		m.timeout = DefaultTimeout
	}
	if m.maxResult == 0 {
		m.maxResult = DefaultMaxResult
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.ping == 0 {
		m.ping = DefaultPing
	}
	if m.backoff == nil {
		m.backoff = DefaultBackoff
	}
	if m.now == nil {
		m.now = time.Now
	}
	seen := map[string]bool{}
	for _, sc := range cfg.Servers {
		switch {
		case !serverName.MatchString(sc.Name):
			return nil, fmt.Errorf("mcp: server %q: the name must match %s", sc.Name, serverName)
		case seen[sc.Name]:
			return nil, fmt.Errorf("mcp: server %q: configured twice", sc.Name)
		case (sc.Command == "") == (sc.URL == ""):
			return nil, fmt.Errorf("mcp: server %q: needs a command or a url, not both", sc.Name)
		}
		seen[sc.Name] = true
		m.servers = append(m.servers, newServer(m, sc))
	}
	run, stop := context.WithCancel(context.Background())
	m.stop = stop
	for _, s := range m.servers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(run)
		}()
	}
	for _, s := range m.servers {
		select {
		case <-s.first:
		case <-ctx.Done():
			return m, nil
		}
	}
	return m, nil
}

// Tools returns the tools of every server that has listed them, in the
// order of the servers and then of each server's listing. The tools of
// a server that is restarting stay, and their calls fail with an error
// that says so.
func (m *Manager) Tools() []*prompt.Tool {
	var out []*prompt.Tool
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, s.tools...)
		s.mu.Unlock()
	}
	return out
}

// OnChange registers f to run after a server listed its tools: when it
// started, restarted, or said its tool list changed. f runs on the
// server's goroutine; it must not block for long.
func (m *Manager) OnChange(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, f)
}

func (m *Manager) changed() {
	m.mu.Lock()
	fs := append([]func(){}, m.onChange...)
	m.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Status reports each server, in name order.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, ServerStatus{Name: s.cfg.Name, Up: s.session != nil, Tools: len(s.tools), Err: s.err, Since: s.since})
		s.mu.Unlock()
	}
	return out
}

// Close stops every server (closing a stdio server's input, then
// signalling it if it does not exit) and waits for them, or until ctx is
// done, when it returns ctx's error and the servers finish stopping in
// the background. A call still running fails. Close is idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.stop()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcp: close: %w", ctx.Err())
	}
}

// server is one configured server and the goroutine that keeps it
// running.
type server struct {
	m      *Manager
	cfg    Server
	client *sdk.Client
	// relist is signalled by the server's list_changed notification; the
	// goroutine lists, not the notification handler, so that a listing
	// never waits inside the connection's own reader.
	relist chan struct{}
	// failed carries a session a call found broken, to be closed and
	// started again: over HTTP nothing else notices a server that died.
	failed chan *sdk.ClientSession
	first  chan struct{} // closed when the first start ended either way
	stderr *stderrTail

	mu      sync.Mutex
	session *sdk.ClientSession // nil while down
	tools   []*prompt.Tool
	err     string
	since   time.Time
	proc    *exec.Cmd // a stdio server's process, until reaped
}

func newServer(m *Manager, cfg Server) *server {
	s := &server{m: m, cfg: cfg, relist: make(chan struct{}, 1), failed: make(chan *sdk.ClientSession, 1), first: make(chan struct{}),
		stderr: &stderrTail{}, since: m.now()}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "tollgate", Version: "1"}, &sdk.ClientOptions{
		Logger: m.log.With("mcp_server", cfg.Name),
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default: // a listing is due already
			}
		},
	})
	return s
}

// run starts the server, lists its tools, and starts it again with
// backoff whenever it stops, until ctx is done. A call that was running
// when the server stopped is not sent again: the new session starts
// with no calls.
func (s *server) run(ctx context.Context) {
	log := s.m.log.With("mcp_server", s.cfg.Name)
	firstDone := false
	first := func() {
		if !firstDone {
			firstDone = true
			close(s.first)
		}
	}
	defer first()
	for attempt := 0; ; {
		if attempt > 0 {
			t := time.NewTimer(s.m.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		sess, err := s.start(ctx)
		if ctx.Err() != nil {
			if sess != nil {
				_ = sess.Close()
			}
			s.reap()
			return
		}
		if err != nil {
			s.reap()
			attempt++
			s.setDown(err.Error())
			log.Warn("MCP server did not start; trying again", "attempt", attempt, "err", err)
			first()
			continue
		}
		attempt = 0
		s.setUp(sess)
		log.Info("MCP server up", "tools", len(s.toolsNow()))
		// Told before New returns, so that a listener registered after
		// New is not told of a listing it already sees in Tools.
		s.m.changed()
		first()
		why := s.serve(ctx, sess, log)
		s.reap()
		if ctx.Err() != nil {
			s.setDown("stopped: the bot is shutting down")
			return
		}
		attempt++
		s.setDown(why)
		log.Warn("MCP server stopped; restarting", "err", why)
	}
}

// reap kills what is left of a stdio server's process group once its
// session ended: the SDK stops the server process alone, and a child it
// started would outlive it, and the bot.
func (s *server) reap() {
	s.mu.Lock()
	cmd := s.proc
	s.proc = nil
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing left
	}
}

// start connects and lists the server's tools, within the timeout.
func (s *server) start(ctx context.Context) (*sdk.ClientSession, error) {
	var t sdk.Transport
	if s.cfg.Command != "" {
		s.stderr.reset()
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = childEnv(s.cfg.Env)
		cmd.Dir = s.cfg.Dir
		cmd.Stderr = s.stderr
		// Its own process group, so that what it starts (npx starts node)
		// is stopped with it: see reap.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		s.mu.Lock()
		s.proc = cmd
		s.mu.Unlock()
		t = &sdk.CommandTransport{Command: cmd}
	} else {
		t = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL,
			HTTPClient: &http.Client{Transport: &headerTransport{headers: s.cfg.Headers, base: http.DefaultTransport}}}
	}
	cctx, cancel := context.WithTimeout(ctx, s.m.timeout)
	defer cancel()
	sess, err := s.client.Connect(cctx, t, nil)
	if err != nil {
		return nil, s.explain(fmt.Errorf("connect: %w", err))
	}
	tools, err := s.list(cctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, s.explain(err)
	}
	s.mu.Lock()
	s.tools = tools
	s.mu.Unlock()
	return sess, nil
}

// serve waits for sess to end, listing the tools again when the server
// says they changed, and returns why the session ended. It closes sess.
func (s *server) serve(ctx context.Context, sess *sdk.ClientSession, log *slog.Logger) string {
	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	var ping <-chan time.Time
	if s.m.ping > 0 {
		t := time.NewTicker(s.m.ping)
		defer t.Stop()
		ping = t.C
	}
	for {
		select {
		case <-ping:
			pctx, cancel := context.WithTimeout(ctx, s.m.timeout)
			err := sess.Ping(pctx, nil)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			_ = sess.Close()
			<-ended
			return s.explain(fmt.Errorf("stopped: it did not answer a ping: %w", err)).Error()
		case <-ctx.Done():
			_ = sess.Close()
			<-ended
			return ""
		case err := <-ended:
			if cerr := sess.Close(); cerr != nil && err == nil {
				err = cerr
			}
			if err == nil {
				err = errors.New("the session ended")
			}
			return s.explain(fmt.Errorf("stopped: %w", err)).Error()
		case bad := <-s.failed:
			if bad != sess {
				continue // an earlier session's, closed already
			}
			_ = sess.Close()
			err := <-ended
			if err == nil {
				err = errors.New("a call found the connection broken")
			}
			return s.explain(fmt.Errorf("stopped: %w", err)).Error()
		case <-s.relist:
			lctx, cancel := context.WithTimeout(ctx, s.m.timeout)
			tools, err := s.list(lctx, sess)
			cancel()
			if err != nil {
				log.Warn("MCP tools not listed again; keeping the last list", "err", err)
				continue
			}
			s.mu.Lock()
			s.tools = tools
			s.mu.Unlock()
			log.Info("MCP tool list changed", "tools", len(tools))
			s.m.changed()
		}
	}
}

// list lists the server's tools, every page, as the agent's tools.
func (s *server) list(ctx context.Context, sess *sdk.ClientSession) ([]*prompt.Tool, error) {
	var out []*prompt.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		pt, err := s.tool(t)
		if err != nil {
			s.m.log.Warn("MCP tool left out", "mcp_server", s.cfg.Name, "tool", t.Name, "err", err)
			continue
		}
		out = append(out, pt)
	}
	return out, nil
}

// explain adds what a stdio server last wrote to stderr, which usually
// says why it would not start or why it stopped.
func (s *server) explain(err error) error {
	if s.cfg.Command == "" {
		return err
	}
	if line := s.stderr.last(); line != "" {
		return fmt.Errorf("%w (stderr: %q)", err, line)
	}
	return err
}

func (s *server) setUp(sess *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.err, s.since = sess, "", s.m.now()
}

func (s *server) setDown(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		s.since = s.m.now()
	}
	s.session, s.err = nil, why
}

func (s *server) toolsNow() []*prompt.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// broken asks the server's goroutine to drop sess after a call failed on
// it, unless it has already.
func (s *server) broken(sess *sdk.ClientSession) {
	for range 2 {
		select {
		case s.failed <- sess:
			return
		default: // an older one waits: make room, it matters less
			select {
			case <-s.failed:
			default:
			}
		}
	}
}

// current returns the open session, or nil and why there is none.
func (s *server) current() (*sdk.ClientSession, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session, s.err
}

// childEnv is all a stdio server gets of the environment: the server's
// own variables and PATH and HOME, so that the bot's tokens and keys
// never reach a process the operator did not hand them to.
func childEnv(own map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := own[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range own {
		env = append(env, k+"="+v)
	}
	return env
}

// headerTransport adds the configured headers to every request to a
// streamable HTTP server.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// stderrTail keeps the last line a stdio server wrote to stderr.
type stderrTail struct {
	mu      sync.Mutex
	line    []byte // the last complete, non-blank line
	partial []byte
}

const maxStderrLine = 300

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			if len(bytes.TrimSpace(t.partial)) > 0 {
				t.line = append(t.line[:0], t.partial...)
			}
			t.partial = t.partial[:0]
			continue
		}
		if len(t.partial) < maxStderrLine {
			t.partial = append(t.partial, b)
		}
	}
	return len(p), nil
}

func (t *stderrTail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(bytes.TrimSpace(t.partial)) > 0 {
		return string(bytes.TrimSpace(t.partial))
	}
	return string(bytes.TrimSpace(t.line))
}

func (t *stderrTail) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line, t.partial = nil, nil
}
