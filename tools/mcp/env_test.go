package mcp_test

import (
	"testing"

	"tollgate/tools/mcp"
)

// TestStdioServerGetsOnlyItsOwnEnvironment: the bot's secrets stay with
// the bot; a server gets its configured variables and PATH and HOME.
func TestStdioServerGetsOnlyItsOwnEnvironment(t *testing.T) {
	t.Setenv("TOLLGATE_TEST_SECRET", "s3cret")
	h := start(t, mcp.Config{Servers: []mcp.Server{stdioServer(t, "s", false, map[string]string{"ROOT": "/srv"})}}, mcp.Options{})
	for name, want := range map[string]string{"TOLLGATE_TEST_SECRET": "unset", "ROOT": "set: /srv"} {
		if out, err := h.call(t, "mcp.s.env", `{"name":"`+name+`"}`); err != nil || out != want {
			t.Errorf("%s: %q, %v; want %q", name, out, err, want)
		}
	}
	if out, err := h.call(t, "mcp.s.env", `{"name":"PATH"}`); err != nil || out == "unset" {
		t.Errorf("PATH: %q, %v", out, err)
	}
}
