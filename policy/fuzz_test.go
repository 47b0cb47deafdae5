package policy

import (
	"strings"
	"testing"
)

// FuzzParse feeds any bytes to Parse and, when they parse, any call to Decide
// and Explain: nothing may panic, an error must name the file, and Decide
// must agree with Explain's last line.
func FuzzParse(f *testing.F) {
	f.Add([]byte(orderRules), "web-fetch.fetch", "docs.python.org", "/3/x", "ls")
	f.Add([]byte("deny:\n  - tool: \"*\"\n"), "shell.run", "", "", "rm -rf /")
	f.Add([]byte("allow:\n  - {tool: shell.run, command: [\"[a-\\\\]]*\"]}\n"), "shell.run", "", "", "]x")
	f.Add([]byte("ask:\n  - tool: web-fetch.fetch\n    path: /a/**/b/*\n    host: \"*.x\"\n"), "web-fetch.fetch", "A.X.", "/a//b/../b/c", "")
	f.Add([]byte("deny: &a [x]\nask: *a\n"), "", "", "", "")
	f.Fuzz(func(t *testing.T, data []byte, tool, host, path, cmd string) {
		r, err := Parse("f.yaml", data, testTools)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		fields := map[string]string{"host": host, "path": path, "url": path, "query": cmd, "command": cmd}
		d := r.Decide(tool, fields)
		lines := r.Explain(tool, fields)
		if len(lines) != r.Len()+1 {
			t.Fatalf("Explain gave %d lines for %d rules", len(lines), r.Len())
		}
		last := lines[len(lines)-1]
		if d.Action == None {
			if d.Rule != nil || last != "decision: none: no rule matches" {
				t.Fatalf("None with rule %v, Explain %q", d.Rule, last)
			}
			return
		}
		if d.Rule == nil || d.Rule.Action != d.Action || last != "decision: "+string(d.Action)+": "+d.Why {
			t.Fatalf("decision %+v, Explain %q", d, last)
		}
	})
}

// FuzzMatch compiles any pattern of each Kind and matches any value: nothing
// may panic, and an allow rule (strict) never matches what the same pattern
// in a deny rule would not.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"*.example.com", "a.example.com"},
		{"/3/**", "/3/../x"},
		{"[^a-z]?\\*", "1x*"},
		{"**", ""},
		{"/a/**/b/**/c", "/a/b/x/b/c"},
	} {
		f.Add(uint8(0), s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, k uint8, pattern, value string) {
		kind := Kind(k % 3)
		m, err := compile(kind, pattern)
		if err != nil {
			return
		}
		strict, _ := m.match(value, true)
		loose, _ := m.match(value, false)
		if strict && !loose {
			t.Fatalf("%v %q: %q matches as allow but not as deny", kind, pattern, value)
		}
	})
}
