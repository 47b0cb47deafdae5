package mcp_test

import (
	"context"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/tools/mcp"
)

// TestToolListChangeIsPickedUp: a server that adds or removes a tool
// while running says so, and the agent's tools follow.
func TestToolListChangeIsPickedUp(t *testing.T) {
	srv := newTestServer(false)
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: httpServer(t, srv)}}}, mcp.Options{})
	sdk.AddTool(srv, &sdk.Tool{Name: "fresh", Description: "new"},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return text("fresh"), nil, nil
		})
	h.waitChange(t)
	if out, err := h.call(t, "mcp.web.fresh", `{}`); err != nil || out != "fresh" {
		t.Fatalf("new tool: %q, %v", out, err)
	}
	srv.RemoveTools("echo")
	h.waitChange(t)
	if n := names(h.m.Tools()); slices.Contains(n, "mcp.web.echo") {
		t.Fatalf("removed tool still offered: %v", n)
	}
}
