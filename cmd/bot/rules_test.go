package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const exampleRules = `deny:
  - tool: web-fetch.fetch
    host: "*.internal.example.com"
    reason: internal hosts stay internal
ask:
  - tool: web-fetch.add-domain
allow:
  - tool: web-fetch.fetch
    host: docs.python.org
    path: "/3/**"
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRulesCheckAndExplain(t *testing.T) {
	path := writeFile(t, "rules.yaml", exampleRules)
	var out strings.Builder
	if err := run(context.Background(), []string{"bot", "rules", "check", path}, envOf(nil), &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := path + ": ok, 3 rules\n"; out.String() != want {
		t.Fatalf("check printed %q, want %q", out.String(), want)
	}
	out.Reset()
	err := run(context.Background(), []string{"bot", "rules", "explain", path, "web-fetch.fetch", `{"url":"https://docs.python.org/3/library/"}`},
		envOf(nil), &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`field host = "docs.python.org"`,
		`field path = "/3/library/"`,
		`deny web-fetch.fetch host="*.internal.example.com": does not match`,
		`decision: allow: allow rule 1 (` + path + `:8) matches`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bot", "rules"}, "usage: bot rules check FILE"},
		{[]string{"bot", "rules", "lint", path}, "usage: bot rules check FILE"},
		{[]string{"bot", "rules", "explain", path, "web-fetch.fetch"}, "usage"},
		{[]string{"bot", "rules", "explain", path, "mcp.x.y", "{}"}, `no tool "mcp.x.y" (tools: web-fetch.fetch`},
		{[]string{"bot", "rules", "explain", path, "web-fetch.fetch", "{url:"}, "is not JSON"},
		{[]string{"bot", "rules", "check", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml"},
		{[]string{"bot", "rules", "check", writeFile(t, "bad.yaml", "deny:\n  - tool: web-fetch.fetch\n    hots: x\n")}, `bad.yaml:3: deny rule 1: unknown field "hots"`},
	} {
		out.Reset()
		err := run(context.Background(), tc.args, envOf(nil), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args[1:], err, tc.want)
		}
	}
}

// TestPolicyVariablesNameThemselvesInErrors: a bad APPROVAL_MODE,
// APPROVAL_DENY_TOOLS or APPROVAL_RULES stops the start with an error
// naming the variable (and, for a rules file, its line and rule).
func TestPolicyVariablesNameThemselvesInErrors(t *testing.T) {
	if _, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "APPROVAL_MODE": "sometimes"})); err == nil ||
		!strings.Contains(err.Error(), `APPROVAL_MODE: "sometimes" is not one of interactive, auto-approve, auto-deny`) {
		t.Errorf("APPROVAL_MODE=sometimes: %v", err)
	}
	tools, err := allTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"APPROVAL_DENY_TOOLS": "web-*fetch"}, `APPROVAL_DENY_TOOLS: "web-*fetch": '*' may only end a pattern`},
		{map[string]string{"APPROVAL_DENY_TOOLS": "web-fetch.fech"}, `APPROVAL_DENY_TOOLS: "web-fetch.fech" names no tool`},
		{map[string]string{"APPROVAL_RULES": filepath.Join(t.TempDir(), "nope.yaml")}, "APPROVAL_RULES: "},
		{map[string]string{"APPROVAL_RULES": writeFile(t, "r.yaml", "allow:\n  - tool: web-fetch.fetch\n    host: '[x'\n")}, "r.yaml:3: allow rule 1"},
		// A rule may not name a tool the operator blocked: it could never apply.
		{map[string]string{"APPROVAL_DENY_TOOLS": "web-fetch.add-domain", "APPROVAL_RULES": writeFile(t, "r.yaml", exampleRules)},
			`r.yaml:6: ask rule 1`},
	} {
		env := map[string]string{"TELEGRAM_BOT_TOKEN": "t"}
		for k, v := range tc.env {
			env[k] = v
		}
		cfg, err := loadConfig(envOf(env))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		_, _, _, err = operatorPolicy(cfg, tools)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
	cfg, err := loadConfig(envOf(map[string]string{"TELEGRAM_BOT_TOKEN": "t", "APPROVAL_DENY_TOOLS": "web-fetch.add-domain,web-fetch.remove-domain",
		"APPROVAL_RULES": writeFile(t, "ok.yaml", "allow:\n  - tool: web-fetch.fetch\n    host: docs.python.org\n")}))
	if err != nil {
		t.Fatal(err)
	}
	kept, checker, _, err := operatorPolicy(cfg, tools)
	if err != nil || len(kept) != 8 || checker == nil { // web-fetch's 4 less the 2 blocked, the 5 file tools and shell.run
		t.Fatalf("kept %d tools, checker %v, err %v", len(kept), checker, err)
	}
}

// TestREADMERulesExampleIsValid: the example a user copies works.
func TestREADMERulesExampleIsValid(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	if !ok {
		t.Fatal("README has no yaml example")
	}
	example, _, _ := strings.Cut(rest, "```")
	path := writeFile(t, "rules.yaml", example)
	var out strings.Builder
	if err := run(context.Background(), []string{"bot", "rules", "check", path}, envOf(nil), &out, &out); err != nil {
		t.Fatalf("README's example: %v", err)
	}
	if !strings.Contains(out.String(), "ok, 5 rules") {
		t.Fatalf("README's example: %s", out.String())
	}
}

// TestRulesExplainJudgesEachPartOfAChain: for the shell tool, explain says
// what decides each command of a chain and then the call, as the service
// judges it: one denied command denies the call; all allowed allow it.
func TestRulesExplainJudgesEachPartOfAChain(t *testing.T) {
	path := writeFile(t, "rules.yaml", "deny:\n  - tool: shell.run\n    command: \"rm *\"\nallow:\n  - tool: shell.run\n    command: \"git status\"\n  - tool: shell.run\n    command: \"ls *\"\n")
	for _, tc := range []struct{ command, want string }{
		{"git status && rm -rf /", "call: deny: rm -rf /: deny rule 1"},
		{"git status && ls -la", "call: allow: allow rules cover every part"},
		{"git status && $X", "call: no rule decides it"},
	} {
		var out strings.Builder
		input, _ := json.Marshal(map[string]string{"command": tc.command})
		if err := run(context.Background(), []string{"bot", "rules", "explain", path, "shell.run", string(input)}, envOf(nil), &out, &out); err != nil {
			t.Fatalf("%s: %v", tc.command, err)
		}
		if !strings.Contains(out.String(), tc.want) || !strings.Contains(out.String(), `part "git status": decision: allow`) {
			t.Errorf("%s: explain printed\n%s\nwant %q", tc.command, out.String(), tc.want)
		}
	}
}
