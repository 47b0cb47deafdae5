package policy

import (
	"strings"
	"testing"
)

const orderRules = `# Checked in this order: deny, then ask, then allow.
deny:
  - tool: web-fetch.fetch
    host: "*.internal.example.com"
    reason: internal hosts stay internal
  - tool: web-fetch.fetch
    host: "*.example.com"
ask:
  - tool: "web-fetch.*"
    host: ask.example.org
  - tool: shell.run
    command: "rm *"
allow:
  - tool: web-fetch.fetch
    host: [docs.python.org, "*.example.com", ask.example.org]
    path: "/3/**"
  - tool: web-fetch.fetch
    host: docs.python.org
  - tool: shell.run
    command: ["ls", "ls *", "rm -i *"]
  - tool: "web-fetch.*"
    host: free.example.net
`

func TestDecideOrder(t *testing.T) {
	r := mustParse(t, orderRules)
	if r.Len() != 8 {
		t.Fatalf("Len = %d, want 8", r.Len())
	}
	type f = map[string]string
	tests := []struct {
		name   string
		tool   string
		fields f
		action Action
		list   Action
		index  int
		line   int
	}{
		{"deny beats allow", "web-fetch.fetch", f{"host": "a.internal.example.com", "path": "/3/x"}, Deny, Deny, 1, 3},
		{"first deny rule that matches is reported", "web-fetch.fetch", f{"host": "a.example.com", "path": "/3/x"}, Deny, Deny, 2, 6},
		{"ask beats allow", "web-fetch.fetch", f{"host": "ask.example.org", "path": "/3/x"}, Ask, Ask, 1, 9},
		{"ask by prefix", "web-fetch.search", f{"host": "ASK.example.org.", "query": "q"}, Ask, Ask, 1, 9},
		{"ask beats an allow list entry", "shell.run", f{"command": "rm -i x"}, Ask, Ask, 2, 11},
		{"first allow rule that matches is reported", "web-fetch.fetch", f{"host": "docs.python.org", "path": "/3/tutorial"}, Allow, Allow, 1, 14},
		{"second allow rule when the first's path fails", "web-fetch.fetch", f{"host": "docs.python.org", "path": "/2/"}, Allow, Allow, 2, 17},
		{"second allow rule when the path is absent", "web-fetch.fetch", f{"host": "docs.python.org"}, Allow, Allow, 2, 17},
		{"allow list alternative", "shell.run", f{"command": "ls -la"}, Allow, Allow, 3, 19},
		{"allow for every tool", "web-fetch.search", f{"host": "free.example.net"}, Allow, Allow, 4, 21},
		{"absent field does not match", "shell.run", f{}, None, None, 0, 0},
		{"nothing matches", "web-fetch.fetch", f{"host": "pypi.org"}, None, None, 0, 0},
		{"dot-dot is not allowed", "web-fetch.fetch", f{"host": "www.python.org", "path": "/3/../admin"}, None, None, 0, 0},
		{"unknown tool: deny-by-field rules cannot match, allow never", "mail.send", f{"host": "free.example.net"}, None, None, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := r.Decide(tc.tool, tc.fields)
			if d.Action != tc.action {
				t.Fatalf("Action = %q, want %q (%s)", d.Action, tc.action, d.Why)
			}
			if tc.action == None {
				if d.Rule != nil || d.Why != "no rule matches" {
					t.Errorf("None decision = %+v", d)
				}
				return
			}
			if d.Rule.Action != tc.list || d.Rule.Index != tc.index || d.Rule.Line != tc.line {
				t.Errorf("rule = %s (index %d), want %s rule %d on line %d", d.Rule, d.Rule.Index, tc.list, tc.index, tc.line)
			}
		})
	}
}

func TestDecideUnknownTool(t *testing.T) {
	r := mustParse(t, "deny:\n  - tool: \"web-*\"\nallow:\n  - tool: \"*\"\n")
	if d := r.Decide("web-new.tool", nil); d.Action != Deny {
		t.Errorf("a deny rule naming only a tool prefix should cover a tool the rules were not loaded with: %+v", d)
	}
	if d := r.Decide("other", nil); d.Action != None {
		t.Errorf("an allow rule should not cover a tool the rules were not loaded with: %+v", d)
	}
}

func TestDecideWhy(t *testing.T) {
	r := mustParse(t, orderRules)
	d := r.Decide("web-fetch.fetch", map[string]string{"host": "a.internal.example.com"})
	want := `deny rule 1 (rules.yaml:3) matches: tool "web-fetch.fetch", host "a.internal.example.com" matches "*.internal.example.com" (internal hosts stay internal)`
	if d.Why != want {
		t.Errorf("Why =\n  %s\nwant\n  %s", d.Why, want)
	}
	d = r.Decide("web-fetch.search", map[string]string{"host": "ask.example.org"})
	want = `ask rule 1 (rules.yaml:9) matches: tool "web-fetch.search" matches "web-fetch.*", host "ask.example.org" matches "ask.example.org"`
	if d.Why != want {
		t.Errorf("Why =\n  %s\nwant\n  %s", d.Why, want)
	}
}

func TestRuleString(t *testing.T) {
	r := mustParse(t, orderRules)
	var got []string
	for _, l := range r.lists {
		for _, rule := range l {
			got = append(got, rule.String())
		}
	}
	want := []string{
		`rules.yaml:3: deny web-fetch.fetch host="*.internal.example.com"`,
		`rules.yaml:6: deny web-fetch.fetch host="*.example.com"`,
		`rules.yaml:9: ask web-fetch.* host="ask.example.org"`,
		`rules.yaml:11: ask shell.run command="rm *"`,
		`rules.yaml:14: allow web-fetch.fetch host=["docs.python.org", "*.example.com", "ask.example.org"] path="/3/**"`,
		`rules.yaml:17: allow web-fetch.fetch host="docs.python.org"`,
		`rules.yaml:19: allow shell.run command=["ls", "ls *", "rm -i *"]`,
		`rules.yaml:21: allow web-fetch.* host="free.example.net"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("String:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestExplain(t *testing.T) {
	r := mustParse(t, `deny:
  - tool: web-fetch.fetch
    host: "*.corp.example"
ask:
  - tool: shell.run
allow:
  - tool: web-fetch.fetch
    host: docs.python.org
    path: "/3/**"
  - tool: web-fetch.fetch
    host: docs.python.org
`)
	got := r.Explain("web-fetch.fetch", map[string]string{"host": "docs.python.org", "path": "/3/../admin"})
	want := []string{
		`rules.yaml:2: deny web-fetch.fetch host="*.corp.example": does not match: host "docs.python.org" is not "*.corp.example"`,
		`rules.yaml:5: ask shell.run: does not match: tool "web-fetch.fetch" is not "shell.run"`,
		`rules.yaml:7: allow web-fetch.fetch host="docs.python.org" path="/3/**": does not match: path "/3/../admin" is not "/3/**": it has a ".." segment and an allow pattern must spell those out`,
		`rules.yaml:10: allow web-fetch.fetch host="docs.python.org": matches`,
		`decision: allow: allow rule 2 (rules.yaml:10) matches: tool "web-fetch.fetch", host "docs.python.org" matches "docs.python.org"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Explain:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = r.Explain("web-fetch.fetch", map[string]string{"path": "/"})
	if last := got[len(got)-1]; last != "decision: none: no rule matches" {
		t.Errorf("last line = %q", last)
	}
	if !strings.HasSuffix(got[0], `does not match: the call has no host`) {
		t.Errorf("first line = %q", got[0])
	}
}
