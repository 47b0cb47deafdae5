package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/llm/llmtest"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// TestMCPToolAsksRunsOnceAndADownServerIsExplained: end to end, an MCP
// server's tool joins as mcp.<server>.<tool>, asks by default, runs once
// when approved; a server that cannot start does not stop the bot, and
// /help says why its tools are missing.
func TestMCPToolAsksRunsOnceAndADownServerIsExplained(t *testing.T) {
	var calls atomic.Int32
	srv := sdk.NewServer(&sdk.Implementation{Name: "local", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "greets someone"},
		func(_ context.Context, _ *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, any, error) {
			calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	body := fmt.Sprintf(`{"mcpServers": {"local": {"url": %q}, "broken": {"command": "/nonexistent/mcp-server"}}}`, ts.URL)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	w := newWorld(t)
	w.extra = map[string]string{"MCP_SERVERS": cfg}
	w.llm.Add(llmtest.CallTool("mcp__local__greet", `{"name":"Alice"}`), llmtest.Text("Greeted."))
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "/help")
	help := w.tg.WaitCall(t, wait, sentText("mcp.local.greet"))
	if !strings.Contains(help.Param("text"), "MCP server broken is not running") {
		t.Errorf("/help does not explain the broken server:\n%s", help.Param("text"))
	}

	w.tg.UserMessage(alice.ID, alice, "greet me")
	req := w.tg.WaitCall(t, wait, approvalMessages)
	if text := req.Param("text"); !strings.Contains(text, "mcp.local.greet") || !strings.Contains(text, "destructive") {
		t.Errorf("request:\n%s", text)
	}
	if calls.Load() != 0 {
		t.Fatal("the MCP tool ran before approval")
	}
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	w.tg.WaitCall(t, wait, sentText("Greeted."))
	if n := calls.Load(); n != 1 {
		t.Fatalf("the MCP tool ran %d times", n)
	}
	if result := toolResult(w.llm.Requests()[1]); !strings.Contains(result, "hello, Alice") {
		t.Fatalf("the model read %q", result)
	}
}

// TestMCPConfigMistakeStopsTheStartNamingServerAndField: a malformed
// MCP_SERVERS file is a start error that says where.
func TestMCPConfigMistakeStopsTheStartNamingServerAndField(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"gh": {"command": "x", "url": "https://example.com/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "MCP_SERVERS": cfg}))
	if err == nil || !strings.Contains(err.Error(), "MCP_SERVERS: ") || !strings.Contains(err.Error(), "gh") {
		t.Fatalf("err = %v", err)
	}
}
