package policy

import "testing"

// TestMatch runs each pattern as an allow rule (strict) and as a deny rule,
// through compile and match.
func TestMatch(t *testing.T) {
	const y, n = true, false
	tests := []struct {
		kind        Kind
		pattern     string
		value       string
		allow, deny bool
	}{
		// Text: anchored glob, '*' crosses '/', case matters.
		{Text, "git status*", "git status", y, y},
		{Text, "git status*", "git status --short", y, y},
		{Text, "git status*", "xgit status", n, n},
		{Text, "*.txt", "a/b/notes.txt", y, y},
		{Text, "*.txt", "notes.txt.sh", n, n},
		{Text, "a*b*c", "a/x/b/y/c", y, y},
		{Text, "a?c", "abc", y, y},
		{Text, "a?c", "ac", n, n},
		{Text, "a?c", "a/c", y, y},
		{Text, "a?c", "aéc", y, y}, // ? is one rune, not one byte
		{Text, `a\*c`, "a*c", y, y},
		{Text, `a\*c`, "abc", n, n},
		{Text, `\\`, `\`, y, y},
		{Text, "[a-c]x", "bx", y, y},
		{Text, "[a-c]x", "dx", n, n},
		{Text, "[^a-c]x", "dx", y, y},
		{Text, "[!a-c]x", "ax", n, n},
		{Text, `[\]]`, "]", y, y},
		{Text, "[-a]", "-", y, y},
		{Text, "ABC", "abc", n, n},
		{Text, "*", "", y, y},
		{Text, "?", "", n, n},
		{Text, "x", "", n, n},
		{Text, "*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", n, n},

		// Path: segments, globstar, and the strict allow reading.
		{Path, "/docs/*", "/docs/a", y, y},
		{Path, "/docs/*", "/docs/a/b", n, n},
		{Path, "/docs/*", "/docs", n, n},
		{Path, "/docs/*", "/docs/", y, y},
		{Path, "/docs/*.html", "/docs/a/b.html", n, n},
		{Path, "/docs/?", "/docs/a", y, y},
		{Path, "/docs/?", "/docs//", n, n},
		{Path, "/3/**", "/3", y, y},
		{Path, "/3/**", "/3/", y, y},
		{Path, "/3/**", "/3/a/b", y, y},
		{Path, "/3/**", "/30", n, n},
		{Path, "/3/**", "/3/../admin", n, y}, // deny takes the raw reading too
		{Path, "/3/**", "/3/a/../b", n, y},   // allow refuses "..", deny sees /3/b
		{Path, "/3/**", "/3//x", n, y},
		{Path, "/a/**/z", "/a/z", y, y},
		{Path, "/a/**/z", "/a/b/c/z", y, y},
		{Path, "/a/**/z", "/a/b/c/zz", n, n},
		{Path, "**", "", y, y},
		{Path, "**", "/any/thing", y, y},
		{Path, "/admin/**", "/public/../admin/x", n, y},
		{Path, "/admin/**", "/public/%2e%2e/admin", n, y},
		{Path, "/admin/**", `/public\..\admin`, n, y},
		{Path, "/docs/*", "/docs/a%2fb", n, y}, // an encoded slash may be a separator
		{Path, "/docs/*", "/docs/..", n, y},
		{Path, "/a/../b", "/a/../b", y, y}, // the pattern spells out ".."
		{Path, "/a//b", "/a//b", y, y},
		{Path, "https://x.example/**", "https://x.example/a", y, y},
		{Path, "https://x.example/**", "https://x.example//a", n, y},
		{Path, "https://x.example/**", "https://x.example/a/../../b", n, y},
		{Path, "docs/*", "/docs/a", n, n}, // anchored: relative is not absolute
		{Path, `/a\*`, "/a*", y, y},
		{Path, `/a\*`, "/ab", n, n},
		{Path, "/[a-c]/x", "/b/x", y, y},
		{Path, "/DOCS/*", "/docs/a", n, n},

		// Host: labels, case, trailing dot, look-alikes.
		{Host, "example.com", "example.com", y, y},
		{Host, "example.com", "EXAMPLE.COM.", y, y},
		{Host, "EXAMPLE.com.", "example.com", y, y},
		{Host, "example.com", "example.com..", n, n},
		{Host, "example.com", "a.example.com", n, n},
		{Host, "example.com", "evilexample.com", n, n},
		{Host, "*.example.com", "a.example.com", y, y},
		{Host, "*.example.com", "a.b.example.com", y, y},
		{Host, "*.example.com", "example.com", n, n},
		{Host, "*.example.com", ".example.com", n, n},
		{Host, "*.example.com", "evilexample.com", n, n},
		{Host, "*.example.com", "example.com.evil.net", n, n},
		{Host, "*.example.com", "a.example.com.evil.net", n, n},
		{Host, "*.example.com", "A.Example.COM.", y, y},
		{Host, "*.example.com", "a..example.com", n, y},
		{Host, "*.example.com", "evil.com:1.example.com", n, y},
		{Host, "*.example.com", "evil.com/.example.com", n, y},
		{Host, "example.com", "xn--exmple-cua.com", n, n}, // punycode look-alike
		{Host, "xn--bcher-kva.example", "xn--bcher-kva.example", y, y},
		{Host, "xn--bcher-kva.example", "bücher.example", n, n},
		{Host, "key.example.com", "\u212aey.example.com", n, n}, // Kelvin sign: no Unicode folding
		{Host, "*", "anything.example", y, y},
		{Host, "*", "", n, n},
		{Host, "example.com", "", n, n},
		{Host, "10.0.0.1", "10.0.0.1", y, y},
		{Host, "10.0.0.1", "10.0.0.10", n, n},
		{Host, "::1", "::1", y, y},
	}
	for _, tc := range tests {
		m, err := compile(tc.kind, tc.pattern)
		if err != nil {
			t.Errorf("%v %q: %v", tc.kind, tc.pattern, err)
			continue
		}
		if got, note := m.match(tc.value, true); got != tc.allow {
			t.Errorf("%v %q ~ %q as allow = %v (%s), want %v", tc.kind, tc.pattern, tc.value, got, note, tc.allow)
		}
		if got, note := m.match(tc.value, false); got != tc.deny {
			t.Errorf("%v %q ~ %q as deny = %v (%s), want %v", tc.kind, tc.pattern, tc.value, got, note, tc.deny)
		}
	}
}
