package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"tollgate/policy"
	"tollgate/prompt"
	"tollgate/tools/webfetch"
)

func fetchTools(t *testing.T) []*prompt.Tool {
	t.Helper()
	f, err := webfetch.New(context.Background(), webfetch.Config{Store: webfetch.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	return f.Tools()
}

// TestRulesOverWebFetchCalls: the tool list ToolsOf builds gives a fetch
// its url (text), host and path, so rules written against them decide
// real calls as the README's example says.
func TestRulesOverWebFetchCalls(t *testing.T) {
	tools := fetchTools(t)
	byName := map[string]*prompt.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	desc := policy.ToolsOf(tools)
	var fetch policy.Tool
	for _, d := range desc {
		if d.Name == webfetch.ToolFetch {
			fetch = d
		}
	}
	if fetch.Fields["url"] != policy.Text || fetch.Fields["host"] != policy.Host || fetch.Fields["path"] != policy.Path {
		t.Fatalf("fetch fields %v", fetch.Fields)
	}
	rules, err := policy.Parse("rules.yaml", []byte(`
deny:
  - tool: web-fetch.fetch
    host: "*.internal.example.com"
    reason: internal hosts stay internal
ask:
  - tool: web-fetch.add-domain
allow:
  - tool: web-fetch.fetch
    host: docs.python.org
    path: "/3/**"
`), desc)
	if err != nil {
		t.Fatal(err)
	}
	c := policy.Checker{Rules: rules}
	for _, tc := range []struct {
		tool, input string
		want        prompt.PolicyAction
		source, why string
	}{
		{webfetch.ToolFetch, `{"url":"https://docs.python.org/3/library/os.html"}`, prompt.PolicyAllow, "rules.yaml:9", ""},
		{webfetch.ToolFetch, `{"url":"https://DOCS.python.org./3/"}`, prompt.PolicyAllow, "rules.yaml:9", ""},
		{webfetch.ToolFetch, `{"url":"https://docs.python.org/3/../2/x"}`, prompt.PolicyNone, "", ""},
		{webfetch.ToolFetch, `{"url":"https://docs.python.org/2/"}`, prompt.PolicyNone, "", ""},
		{webfetch.ToolFetch, `{"url":"https://docs.python.org.evil.net/3/"}`, prompt.PolicyNone, "", ""},
		{webfetch.ToolFetch, `{"url":"https://wiki.internal.example.com/"}`, prompt.PolicyDeny, "rules.yaml:3", "internal hosts stay internal"},
		{webfetch.ToolAddDomain, `{"domain":"example.org"}`, prompt.PolicyAsk, "rules.yaml:7", ""},
		{webfetch.ToolListDomains, `{}`, prompt.PolicyNone, "", ""},
	} {
		fields, err := prompt.CallFields(byName[tc.tool], json.RawMessage(tc.input))
		if err != nil {
			t.Fatalf("%s: %v", tc.input, err)
		}
		v := c.Check(tc.tool, fields)
		if v.Action != tc.want || v.Source != tc.source {
			t.Errorf("%s %s: %+v, want %q from %q", tc.tool, tc.input, v, tc.want, tc.source)
		}
		if tc.why != "" && v.Why != tc.why {
			t.Errorf("%s: why %q, want the rule's reason %q", tc.input, v.Why, tc.why)
		}
		if tc.want != prompt.PolicyNone && tc.why == "" && !strings.Contains(v.Why, "matches") {
			t.Errorf("%s: why %q does not say what matched", tc.input, v.Why)
		}
	}
	if v := (policy.Checker{}).Check(webfetch.ToolFetch, map[string]string{"host": "x"}); v.Action != prompt.PolicyNone {
		t.Errorf("no rules: %+v", v)
	}
}

func TestDenyToolsRemovesWhatItNames(t *testing.T) {
	tools := fetchTools(t)
	names := func(ts []*prompt.Tool) string {
		var n []string
		for _, t := range ts {
			n = append(n, t.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct {
		patterns []string
		want     string // kept tools, or the error's text
		err      bool
	}{
		{nil, "web-fetch.fetch,web-fetch.add-domain,web-fetch.list-domains,web-fetch.remove-domain", false},
		{[]string{"web-fetch.add-domain", " "}, "web-fetch.fetch,web-fetch.list-domains,web-fetch.remove-domain", false},
		{[]string{"web-fetch.*"}, "", false},
		{[]string{"web-fetch.remove-domain", "web-fetch.add-*"}, "web-fetch.fetch,web-fetch.list-domains", false},
		{[]string{"web-*fetch"}, `"web-*fetch": '*' may only end a pattern`, true},
		{[]string{"web-fetch.fech"}, `"web-fetch.fech" names no tool (tools: web-fetch.fetch,`, true},
		{[]string{"shell.*"}, `"shell.*" names no tool`, true},
	} {
		got, err := policy.DenyTools(tools, tc.patterns)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want %q", tc.patterns, err, tc.want)
		case !tc.err && err != nil:
			t.Errorf("%q: %v", tc.patterns, err)
		case !tc.err && names(got) != tc.want:
			t.Errorf("%q: kept %s, want %s", tc.patterns, names(got), tc.want)
		}
	}
}
