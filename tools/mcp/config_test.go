package mcp_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"tollgate/tools/mcp"
)

// TestConfigReadsTheCommonFormat: the mcpServers object other clients
// use, stdio and HTTP servers, with the extras they write.
func TestConfigReadsTheCommonFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	data := `{
	  "globalShortcut": "ignored: another client's key",
	  "mcpServers": {
	    "search": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}, "trustHints": true},
	    "files": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "/srv"], "env": {"ROOT": "/srv"}, "cwd": "/tmp"},
	    "old": {"command": "old-server", "disabled": true}
	  }
	}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcp.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := mcp.Config{Servers: []mcp.Server{
		{Name: "files", Command: "npx", Args: []string{"-y", "server-filesystem", "/srv"}, Env: map[string]string{"ROOT": "/srv"}, Dir: "/tmp"},
		{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}, TrustHints: true},
	}}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

// TestConfigErrorsNameFileServerAndField: a malformed file is refused
// with an error that says where.
func TestConfigErrorsNameFileServerAndField(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"not json", `{"mcpServers": `, []string{"not JSON"}},
		{"no servers", `{"servers": {}}`, []string{`no "mcpServers"`}},
		{"servers not an object", `{"mcpServers": []}`, []string{"mcpServers", "not a JSON object"}},
		{"unknown field", `{"mcpServers": {"a": {"command": "x", "autoApprove": ["t"]}}}`, []string{`server "a"`, "autoApprove", "unknown field"}},
		{"timeout", `{"mcpServers": {"a": {"command": "x", "timeout": 5}}}`, []string{`server "a"`, "timeout", "MCP_TIMEOUT"}},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "https://h/"}}}`, []string{`server "a"`, "both"}},
		{"neither", `{"mcpServers": {"a": {"args": ["x"]}}}`, []string{`server "a"`, "neither"}},
		{"bad scheme", `{"mcpServers": {"a": {"url": "file:///etc/passwd"}}}`, []string{`server "a"`, "url", "not an http or https URL"}},
		{"bad name", `{"mcpServers": {"a.b": {"command": "x"}}}`, []string{`server "a.b"`, "name must match"}},
		{"long name", `{"mcpServers": {"` + strings.Repeat("a", 33) + `": {"command": "x"}}}`, []string{"name must match"}},
		{"env not string", `{"mcpServers": {"a": {"command": "x", "env": {"PORT": 8080}}}}`, []string{`server "a"`, "env", "PORT", "must be a string"}},
		{"args not strings", `{"mcpServers": {"a": {"command": "x", "args": [1]}}}`, []string{`server "a"`, "args"}},
		{"trustHints not bool", `{"mcpServers": {"a": {"command": "x", "trustHints": "yes"}}}`, []string{`server "a"`, "trustHints"}},
		{"header name", `{"mcpServers": {"a": {"url": "https://h/", "headers": {"Bad Name": "x"}}}}`, []string{`server "a"`, "headers", "Bad Name"}},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "https://h/"}}}`, []string{`server "a"`, "type", "SSE"}},
		{"type disagrees", `{"mcpServers": {"a": {"type": "http", "command": "x"}}}`, []string{`server "a"`, "type"}},
		{"server twice", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, []string{"mcpServers", "a: written twice"}},
		{"field twice", `{"mcpServers": {"a": {"command": "x", "command": "y"}}}`, []string{`server "a"`, "command: written twice"}},
		{"env for url", `{"mcpServers": {"a": {"url": "https://h/", "env": {"K": "v"}}}}`, []string{`server "a"`, "for a command"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mcp.ParseConfigBytes("mcp.json", []byte(tc.data))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range append(tc.want, "mcp config mcp.json") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestConfigMissingFileIsAnError(t *testing.T) {
	if _, err := mcp.ParseConfig(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("a missing file parsed")
	}
}
