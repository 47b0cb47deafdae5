package policy_test

import (
	"strings"
	"testing"

	"tollgate/policy"
)

// TestFamiliesNameToolsKnownOnlyLater: an MCP server's tools may be named
// before the server is up: a rule within a family, or a prefix over it,
// is accepted, its fields match as text, and it decides members that
// appear later; a tool outside every family is still an error.
func TestFamiliesNameToolsKnownOnlyLater(t *testing.T) {
	tools := []policy.Tool{
		{Name: "web-fetch.fetch", Fields: map[string]policy.Kind{"url": policy.Text}},
		{Name: "mcp.github.", Family: true},
	}
	rules, err := policy.Parse("r.yaml", []byte(`
deny:
  - tool: mcp.github.delete_repo
ask:
  - tool: "mcp.*"
    repo: "secret-*"
allow:
  - tool: "mcp.github.get_*"
    repo: "tollgate"
`), tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool   string
		fields map[string]string
		want   policy.Action
	}{
		{"mcp.github.delete_repo", nil, policy.Deny},
		{"mcp.github.get_issue", map[string]string{"repo": "tollgate"}, policy.Allow},
		{"mcp.github.get_issue", map[string]string{"repo": "secret-plans"}, policy.Ask},
		{"mcp.github.get_issue", map[string]string{"repo": "other"}, policy.None},
		{"mcp.github.get_issue", nil, policy.None},
		{"mcp.slack.post", map[string]string{"repo": "secret-x"}, policy.None}, // no family: fields unknown
	} {
		if d := rules.Decide(tc.tool, tc.fields); d.Action != tc.want {
			t.Errorf("%s %v: %s (%s), want %q", tc.tool, tc.fields, d.Action, d.Why, tc.want)
		}
	}
	if _, err := policy.Parse("r.yaml", []byte("deny:\n  - tool: mcp.slack.post\n"), tools); err == nil || !strings.Contains(err.Error(), `unknown tool "mcp.slack.post"`) {
		t.Errorf("a tool outside every family: %v", err)
	}
	if _, err := policy.Parse("r.yaml", []byte("deny:\n  - tool: x\n"), []policy.Tool{{Name: "mcp.*", Family: true}}); err == nil {
		t.Error("a family name with '*' was accepted")
	}
}
