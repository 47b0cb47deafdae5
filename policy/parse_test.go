package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testTools = []Tool{
	{Name: "web-fetch.fetch", Fields: map[string]Kind{"host": Host, "path": Path, "url": Path}},
	{Name: "web-fetch.search", Fields: map[string]Kind{"host": Host, "query": Text}},
	{Name: "shell.run", Fields: map[string]Kind{"command": Text}},
}

func mustParse(t *testing.T, src string) *Rules {
	t.Helper()
	r, err := Parse("rules.yaml", []byte(src), testTools)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing yet\n", "{}", "deny:\nask: []\nallow:\n"} {
		r := mustParse(t, src)
		if r.Len() != 0 {
			t.Errorf("%q: Len = %d, want 0", src, r.Len())
		}
		if d := r.Decide("shell.run", map[string]string{"command": "ls"}); d.Action != None || d.Rule != nil || d.Why != "no rule matches" {
			t.Errorf("%q: Decide = %+v, want None", src, d)
		}
	}
	var nilRules *Rules
	if nilRules.Len() != 0 || nilRules.Decide("x", nil).Action != None {
		t.Error("a nil *Rules should have no rules")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"malformed YAML", "deny:\n  - tool: shell.run\n    command: [\n", "rules.yaml:3: malformed YAML: "},
		{"bad indentation", "deny:\n  - tool: shell.run\n   command: ls\n", "rules.yaml:3: malformed YAML: "},
		{"top level not a mapping", "- tool: shell.run\n", "rules.yaml:1: the file must be a mapping with the keys deny, ask and allow, not a list"},
		{"unknown top-level key", "deny: []\nallw:\n  - tool: shell.run\n", `rules.yaml:2: unknown top-level key "allw" (keys: deny, ask, allow)`},
		{"duplicate top-level key", "deny: []\nask: []\ndeny: []\n", `rules.yaml:3: duplicate top-level key "deny" (first on line 1)`},
		{"second document", "deny: []\n---\nask: []\n", "rules.yaml:3: a rules file holds one YAML document"},
		{"list is a mapping", "deny:\n  tool: shell.run\n", "rules.yaml:2: deny: must be a list of rules, not a mapping"},
		{"list is a string", "ask: shell.run\n", "rules.yaml:1: ask: must be a list of rules, not a string"},
		{"rule is a string", "ask:\n  - tool: shell.run\n  - shell.run\n", "rules.yaml:3: ask rule 2: a rule must be a mapping with a tool key, not a string"},
		{"rule is empty", "ask:\n  -\n", "rules.yaml:2: ask rule 1: a rule must be a mapping with a tool key, not null"},
		{"rule is a list", "allow:\n  - [shell.run]\n", "rules.yaml:2: allow rule 1: a rule must be a mapping with a tool key, not a list"},
		{"missing tool", "allow:\n  - command: ls\n", "rules.yaml:2: allow rule 1: missing tool"},
		{"empty tool", "allow:\n  - tool: \"\"\n", "rules.yaml:2: allow rule 1: tool is empty"},
		{"null tool", "allow:\n  - tool:\n    command: ls\n", "rules.yaml:2: allow rule 1: tool must be a string, not null"},
		{"tool a number", "allow:\n  - tool: 7\n", "rules.yaml:2: allow rule 1: tool must be a string, not a number"},
		{"star inside tool", "deny:\n  - tool: \"web-*.fetch\"\n", `rules.yaml:2: deny rule 1: tool "web-*.fetch": '*' may only end a tool name`},
		{"star leading tool", "deny:\n  - tool: \"*.fetch\"\n", `rules.yaml:2: deny rule 1: tool "*.fetch": '*' may only end a tool name`},
		{"unknown tool", "deny:\n  - tool: shell.runn\n", `rules.yaml:2: deny rule 1: unknown tool "shell.runn" (tools: shell.run, web-fetch.fetch, web-fetch.search)`},
		{"prefix matching nothing", "deny:\n  - tool: \"mail.*\"\n", `rules.yaml:2: deny rule 1: no known tool starts with "mail."`},
		{"unknown field", `# comment
deny:
  - tool: shell.run
    command: "rm *"
  - tool: web-fetch.fetch
    host: example.com
    hots: example.org
`, `rules.yaml:7: deny rule 2: unknown field "hots" for web-fetch.fetch (fields: host, path, url)`},
		{"field not on every tool", "ask:\n  - tool: \"web-fetch.*\"\n    path: /x\n", `rules.yaml:3: ask rule 1: field "path" is not a field of every tool matching "web-fetch.*": web-fetch.search has no path (fields: host, query)`},
		{"pattern a number", "ask:\n  - tool: shell.run\n    command: 12\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not a number"},
		{"pattern a boolean", "ask:\n  - tool: shell.run\n    command: true\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not a boolean"},
		{"pattern a mapping", "ask:\n  - tool: shell.run\n    command: {a: b}\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not a mapping"},
		{"pattern null", "ask:\n  - tool: shell.run\n    command:\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not null"},
		{"pattern empty", "ask:\n  - tool: shell.run\n    command: ''\n", "rules.yaml:3: ask rule 1: command: a pattern cannot be empty"},
		{"pattern list empty", "ask:\n  - tool: shell.run\n    command: []\n", "rules.yaml:3: ask rule 1: command: an empty list of patterns matches nothing"},
		{"pattern list with a number", "ask:\n  - tool: shell.run\n    command:\n      - ls\n      - 3\n", "rules.yaml:5: ask rule 1: command: a pattern must be a string, not a number"},
		{"pattern list nested", "ask:\n  - tool: shell.run\n    command: [[ls]]\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not a list"},
		{"pattern block string", "ask:\n  - tool: shell.run\n    command: |\n      ls\n", "rules.yaml:3: ask rule 1: command: a pattern must be a string, not a block string"},
		{"unquoted star is an alias", "deny:\n  - tool: web-fetch.fetch\n    host: *.corp.example\n", "rules.yaml:3: deny rule 1: host: a pattern must be a string, not a YAML alias (an unquoted value that starts with '*' is one: quote it)"},
		{"anchor", "deny:\n  - tool: shell.run\n    command: &x ls\n", "rules.yaml:3: deny rule 1: command: a pattern must be a string, not a YAML anchor"},
		{"tag", "deny:\n  - tool: shell.run\n    command: !!str 12\n", "rules.yaml:3: deny rule 1: command: a pattern must be a string, not a tagged value"},
		{"unclosed class", "deny:\n  - tool: shell.run\n    command: \"rm [ab\"\n", `rules.yaml:3: deny rule 1: command: bad text pattern "rm [ab": unclosed '[' in pattern`},
		{"empty class", "deny:\n  - tool: shell.run\n    command: \"rm []\"\n", `rules.yaml:3: deny rule 1: command: bad text pattern "rm []": empty character class`},
		{"bad range", "deny:\n  - tool: shell.run\n    command: \"[z-a]\"\n", `rules.yaml:3: deny rule 1: command: bad text pattern "[z-a]": bad range`},
		{"trailing backslash", "deny:\n  - tool: shell.run\n    command: 'rm \\'\n", `rules.yaml:3: deny rule 1: command: bad text pattern "rm \\": pattern ends with an escaping '\'`},
		{"path globstar in a segment", "deny:\n  - tool: web-fetch.fetch\n    path: /a**/b\n", `rules.yaml:3: deny rule 1: path: bad path pattern "/a**/b": '**' must be a whole path segment`},
		{"path unclosed class", "deny:\n  - tool: web-fetch.fetch\n    path: \"/[a\"\n", `rules.yaml:3: deny rule 1: path: bad path pattern "/[a": unclosed '['`},
		{"host star in a label", "deny:\n  - tool: web-fetch.fetch\n    host: \"foo*.example.com\"\n", `rules.yaml:3: deny rule 1: host: bad host pattern "foo*.example.com": host pattern "foo*.example.com": '*' may only be the whole leftmost label`},
		{"host star at the end", "deny:\n  - tool: web-fetch.fetch\n    host: \"example.*\"\n", `rules.yaml:3: deny rule 1: host: bad host pattern "example.*": host pattern "example.*": '*' may only be the whole leftmost label`},
		{"host two stars", "deny:\n  - tool: web-fetch.fetch\n    host: \"*.*.example.com\"\n", `'*' may only be the whole leftmost label`},
		{"host non-ASCII", "deny:\n  - tool: web-fetch.fetch\n    host: bücher.example\n", `rules.yaml:3: deny rule 1: host: bad host pattern "bücher.example": host pattern "bücher.example" is not ASCII: write the name in punycode (xn--...)`},
		{"host glob class", "deny:\n  - tool: web-fetch.fetch\n    host: \"[a-z].example.com\"\n", `rules.yaml:3: deny rule 1: host: bad host pattern "[a-z].example.com": host pattern "[a-z].example.com" is not a host name`},
		{"host empty label", "deny:\n  - tool: web-fetch.fetch\n    host: a..example.com\n", `is not a host name`},
		{"host with a path", "deny:\n  - tool: web-fetch.fetch\n    host: example.com/x\n", `is not a host name`},
		{"prefix field kinds checked for each tool", "deny:\n  - tool: \"web-fetch.*\"\n    host: \"a*.example\"\n", `rules.yaml:3: deny rule 1: host: bad host pattern`},
		{"duplicate key", "allow:\n  - tool: web-fetch.fetch\n    host: a.example\n    path: /x\n    host: b.example\n", `rules.yaml:5: allow rule 1: duplicate key "host" (first on line 3)`},
		{"duplicate tool key", "allow:\n  - tool: shell.run\n    tool: web-fetch.fetch\n", `rules.yaml:3: allow rule 1: duplicate key "tool" (first on line 2)`},
		{"reason a number", "deny:\n  - tool: shell.run\n    reason: 5\n", "rules.yaml:3: deny rule 1: reason must be a string, not a number"},
		{"key not a string", "deny:\n  - tool: shell.run\n    1: x\n", "rules.yaml:3: deny rule 1: a key must be a string, not a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse("rules.yaml", []byte(tc.src), testTools)
			if err == nil {
				t.Fatalf("Parse gave %d rules and no error, want %q", r.Len(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %s\nwant it to hold\n  %s", err, tc.want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *policy.Error", err)
			}
			if pe.File != "rules.yaml" || pe.Line < 1 {
				t.Errorf("error names file %q line %d", pe.File, pe.Line)
			}
			if strings.Contains(tc.want, " rule ") && pe.Rule < 1 {
				t.Errorf("error names no rule: %+v", pe)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `deny:
  - tool: shell.runn
allow:
  - tool: web-fetch.fetch
    hots: example.com
  - tool: shell.run
    command: "[x"
`
	_, err := Parse("rules.yaml", []byte(src), testTools)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`rules.yaml:2: deny rule 1: unknown tool "shell.runn"`,
		`rules.yaml:5: allow rule 1: unknown field "hots"`,
		`rules.yaml:7: allow rule 2: command: bad text pattern "[x"`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want it to start %q", i, lines[i], w)
		}
	}
}

func TestParseBadTools(t *testing.T) {
	for _, tools := range [][]Tool{
		{{Name: ""}},
		{{Name: "a*"}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "a", Fields: map[string]Kind{"tool": Text}}},
		{{Name: "a", Fields: map[string]Kind{"reason": Text}}},
		{{Name: "a", Fields: map[string]Kind{"x": Kind(9)}}},
	} {
		if _, err := Parse("rules.yaml", nil, tools); err == nil {
			t.Errorf("Parse with tools %+v: no error", tools)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(p, []byte("deny:\n  - tool: shell.run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(p, testTools)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Decide("shell.run", nil)
	if d.Action != Deny || d.Rule.File != p || d.Rule.Line != 2 || d.Rule.Index != 1 {
		t.Errorf("Decide = %+v, rule %+v", d, d.Rule)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), testTools); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load of a missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte("deny:\n  - tool: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, testTools); err == nil || !strings.HasPrefix(err.Error(), p+":2: deny rule 1: ") {
		t.Errorf("Load of a bad file: %v", err)
	}
}
