package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/prompt"
	"tollgate/tools/mcp"
)

// The test binary is also the stdio MCP server of these tests: run with
// serverEnv set, TestMain serves instead of testing.
const (
	serverEnv   = "TOLLGATE_MCP_TEST_SERVER" // "full", or "broken" to fail at start
	crashLogEnv = "TOLLGATE_MCP_TEST_CRASH_LOG"
)

func TestMain(m *testing.M) {
	switch os.Getenv(serverEnv) {
	case "":
		os.Exit(m.Run())
	case "broken":
		fmt.Fprintln(os.Stderr, "cannot open /var/lib/thing: permission denied")
		os.Exit(2)
	default:
		srv := newTestServer(true)
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

type textIn struct {
	Text string `json:"text"`
}

type nameIn struct {
	Name string `json:"name"`
}

type sizeIn struct {
	Size int `json:"size"`
}

type empty struct{}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newTestServer is the server the tests talk to, over stdio or HTTP.
// withCrash adds a tool that kills the process: for stdio alone.
func newTestServer(withCrash bool) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	yes, no := true, false
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "says text back"},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "peek", Description: "reads", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return text("peeked"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "rm", Description: "removes", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}},
		func(_ context.Context, _ *sdk.CallToolRequest, in nameIn) (*sdk.CallToolResult, any, error) {
			return text("removed " + in.Name), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "touch", Description: "creates", Annotations: &sdk.ToolAnnotations{DestructiveHint: &no}},
		func(_ context.Context, _ *sdk.CallToolRequest, in nameIn) (*sdk.CallToolResult, any, error) {
			return text("touched " + in.Name), nil, nil
		})
	// slow blocks until its call is cancelled; cancelled waits for that
	// and says what ended it, so a test learns that the cancellation
	// reached the server without polling.
	slowEnded := make(chan string, 1)
	sdk.AddTool(srv, &sdk.Tool{Name: "slow", Description: "never ends by itself"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			slowEnded <- ctx.Err().Error()
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "cancelled", Description: "waits until a slow call was cancelled"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			select {
			case why := <-slowEnded:
				return text("slow ended: " + why), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "env", Description: "reads a variable of the server's environment"},
		func(_ context.Context, _ *sdk.CallToolRequest, in nameIn) (*sdk.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				return text("unset"), nil, nil
			}
			return text("set: " + v), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "big", Description: "returns size bytes of text"},
		func(_ context.Context, _ *sdk.CallToolRequest, in sizeIn) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Size)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "media", Description: "returns an image, audio, a link and resources"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("123")},
				&sdk.ResourceLink{URI: "file:///a.txt", Name: "a", MIMEType: "text/plain"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b.txt", MIMEType: "text/plain", Text: "bee"}},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///c.bin", MIMEType: "application/octet-stream", Blob: []byte("1234567")}},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "structured", Description: "returns structured content only"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]int{"n": 7}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "fails"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "disk full"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "bad/name", Description: "a name the agent cannot take"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return text("unreachable"), nil, nil
		})
	if withCrash {
		sdk.AddTool(srv, &sdk.Tool{Name: "spawn", Description: "starts a child that outlives the call and says its pid"},
			func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
				child := exec.Command("sleep", "300")
				if err := child.Start(); err != nil {
					return nil, nil, err
				}
				return text(strconv.Itoa(child.Process.Pid)), nil, nil
			})
		sdk.AddTool(srv, &sdk.Tool{Name: "crash", Description: "dies mid-call"},
			func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
				f, err := os.OpenFile(os.Getenv(crashLogEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					_, _ = f.WriteString("called\n")
					_ = f.Close()
				}
				os.Exit(3)
				return nil, nil, nil
			})
	}
	return srv
}

// stdioServer configures the test binary as a stdio server.
func stdioServer(t *testing.T, name string, trust bool, env map[string]string) mcp.Server {
	t.Helper()
	e := map[string]string{serverEnv: "full", crashLogEnv: t.TempDir() + "/crash.log"}
	for k, v := range env {
		e[k] = v
	}
	return mcp.Server{Name: name, Command: os.Args[0], Env: e, TrustHints: trust}
}

// httpServer serves srv over streamable HTTP for the test's length.
func httpServer(t *testing.T, srv *sdk.Server) string {
	t.Helper()
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// harness is a Manager under test and what it reported.
type harness struct {
	m       *mcp.Manager
	changes chan struct{}
	logs    *syncBuffer
}

func start(t *testing.T, cfg mcp.Config, opts mcp.Options) *harness {
	t.Helper()
	h := &harness{changes: make(chan struct{}, 100), logs: &syncBuffer{}}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return time.Millisecond }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	m, err := mcp.New(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.OnChange(func() { h.changes <- struct{}{} })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	h.m = m
	return h
}

const waitTimeout = 30 * time.Second

// waitChange waits for the next OnChange.
func (h *harness) waitChange(t *testing.T) {
	t.Helper()
	select {
	case <-h.changes:
	case <-time.After(waitTimeout):
		t.Fatal("no tool list change")
	}
}

func (h *harness) tool(t *testing.T, name string) *prompt.Tool {
	t.Helper()
	for _, tl := range h.m.Tools() {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s among %v", name, names(h.m.Tools()))
	return nil
}

func (h *harness) call(t *testing.T, name, input string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return h.tool(t, name).Invoke(ctx, json.RawMessage(input))
}

func names(tools []*prompt.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// syncBuffer is a log a test reads while servers write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
