package webfetch

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
)

// The seeds are the shapes that broke, or nearly broke, a parser:
// they run as plain tests on every `go test`.
var fuzzHostSeeds = []string{
	"example.com", "EXAMPLE.com.", "*.example.com", "*.com", "*.github.io",
	"127.1", "0x7f000001", "2130706433", "[::1]", "::ffff:127.0.0.1",
	"fe80::1%eth0", "xn--pple-43d.com", "аpple.com", "ｅｘａｍｐｌｅ．ｃｏｍ",
	"１２７．０．０．１", "example.com..", ".example.com", "a..b.com",
	"*.*.example.com", "*", "*.", "example.com:443", "user@example.com",
	"exa%6dple.com", "example.com/", "example.com\\@evil.com",
	strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 130) + "com",
	"xn--", "xn--.com", "-example.com", "example-.com", "ex_ample.com",
	"\u202eexample.com", "example\u3002com", "foo.ck", "www.ck",
	"127.0.0.1.nip.io", "169-254-169-254.sslip.io", "0x7f000001.nip.io", "7f000001.nip.io",
	"0--1.sslip.io", "app-10-0-0-1.example.com", "metadata.goog", "app.localtest.me",
	" example.com", "example.com\t", "ｅxample.com", "\u212aelvin.com", "\u0130nstagram.com",
	"bu\u0308cher.de", "bücher.de", "BÜCHER.de", "ex\u00adample.com", "*.bücher.de",
	"localhost:8080", "[::1]:8080", "nas.local:5000", "example.com:8080", "*.x.local:80",
}

// FuzzCanonical: Canonical never panics, and what it accepts is a fixed
// point in the allowlist's form.
func FuzzCanonical(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || again != c {
			t.Fatalf("Canonical(%q) = %q, not a fixed point: %q, %v", in, c, again, err)
		}
		name := strings.TrimPrefix(c, "*.")
		if _, isIP := parseIP(name); isIP {
			return
		}
		if c != strings.ToLower(c) || strings.HasSuffix(c, ".") || strings.Contains(name, "*") ||
			strings.ContainsAny(c, "/?#@\\%: \t\r\n") || !utf8.ValidString(c) || len(name) > 253 {
			t.Fatalf("Canonical(%q) = %q: not a bare lower-case ASCII host name", in, c)
		}
		for _, r := range c {
			if r >= utf8.RuneSelf {
				t.Fatalf("Canonical(%q) = %q: not ASCII", in, c)
			}
		}
	})
}

// FuzzValidateNewDomain: what the model may add is canonical, a name, and
// never a public suffix or a wildcard over one.
func FuzzValidateNewDomain(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := ValidateNewDomain(in)
		if err != nil {
			return
		}
		if again, err := Canonical(c); err != nil || again != c {
			t.Fatalf("ValidateNewDomain(%q) = %q, not canonical: %q, %v", in, c, again, err)
		}
		name := strings.TrimPrefix(c, "*.")
		if _, isIP := parseIP(name); isIP {
			t.Fatalf("ValidateNewDomain(%q) = %q: an IP address", in, c)
		}
		if ps, _ := publicsuffix.PublicSuffix(name); ps == name {
			t.Fatalf("ValidateNewDomain(%q) = %q: a public suffix", in, c)
		}
		if publicName(name) != nil || name == "localhost" {
			t.Fatalf("ValidateNewDomain(%q) = %q: not a public name", in, c)
		}
		if underAny(name, metadataHosts) != "" {
			t.Fatalf("ValidateNewDomain(%q) = %q: a metadata service", in, c)
		}
		for _, ip := range spelledAddrs(name, underAny(name, addressDomains) != "") {
			if checkMetadata(netip.AddrPortFrom(ip, 80)) != nil || ip.IsLoopback() || ip.IsPrivate() {
				t.Fatalf("ValidateNewDomain(%q) = %q: spells the inward address %s", in, c, ip)
			}
		}
	})
}

// FuzzAddDomain: what add-domain asks a human about is what was written,
// up to ASCII case and a trailing dot, and the question names it.
func FuzzAddDomain(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := validateAdd(in)
		if err != nil {
			return
		}
		if canon, err := Canonical(in); err != nil || canon != c {
			t.Fatalf("validateAdd(%q) = %q; Canonical says %q, %v", in, c, canon, err)
		}
		w := strings.TrimSuffix(in, ".")
		if !strings.EqualFold(w, c) && !strings.EqualFold(w, unicodeForm(c)) {
			t.Fatalf("validateAdd(%q) = %q: written otherwise than stored", in, c)
		}
		if strings.ContainsFunc(in, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u212a' }) {
			t.Fatalf("validateAdd(%q) = %q: accepted padding or a look-alike", in, c)
		}
		if reason := AddDomainReason(c); !strings.Contains(reason, c) || !strings.Contains(reason, unicodeForm(c)) {
			t.Fatalf("reason %q does not name %q", reason, c)
		}
	})
}

// FuzzParseOperatorEntry: an operator entry is a canonical host, and a
// port only ever follows an internal host.
func FuzzParseOperatorEntry(f *testing.F) {
	for _, s := range fuzzHostSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, port, err := parseOperatorEntry(in)
		if err != nil {
			return
		}
		if again, err := Canonical(h); err != nil || again != h {
			t.Fatalf("parseOperatorEntry(%q) = %q, not canonical: %q, %v", in, h, again, err)
		}
		if port != 0 && (!isInternal(h) || strings.HasPrefix(h, "*.")) {
			t.Fatalf("parseOperatorEntry(%q) = %q port %d: a port on a public host or wildcard", in, h, port)
		}
	})
}

// FuzzCheckURL: checkURL never panics; a URL it accepts (checks on) is
// http(s) on 80/443 to a public name or a safe address, and what
// net/http dials for it is the host that was checked.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/", "http://example.com:80/a?b#c", "https://a@b/",
		"https://example.com?@evil.com/", "https://example.com#@evil.com/",
		"http://127.1/", "http://0x7f.1/", "http://[::ffff:127.0.0.1]/", "http://[::1]:80/",
		"http://[fe80::1%25eth0]/", "http://169.254.169.254/", "http://0.0.0.0/",
		"http://exa%6dple.com/", "http://example.com%2e/", "http://example.com./",
		"http://EXAMPLE.com:0443/", "http://example.com:/", "http://example.com:65536/",
		"file:///etc/passwd", "gopher://example.com/", "http:/example.com/", "http:example.com",
		"//example.com/", "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::]/",
		"http://example.com\\@evil.com/", "http://ｅｘａｍｐｌｅ．ｃｏｍ/", "http://１２７．０．０．１/",
		"http://[::]/", "http://localhost./", "http://foo.localhost/", "http://nas.local/",
		"http://dev/", "http://foo/containers/json", "http://127.0.0.1.nip.io/", "http://169-254-169-254.sslip.io/",
		"http://0x7f000001.nip.io/", "http://127-0-0-1.nip.io/", "http://0--1.sslip.io/", "http://metadata.tencentyun.com/",
		"http://metadata.platformequinix.com/", "http://app.localtest.me/",
		"http://168.63.129.16/", "http://[::ffff:168.63.129.16]/", "http://192.0.0.192/", "http://[fd00:ec2::23]/",
	} {
		f.Add(s)
	}
	fe, err := New(context.Background(), Config{Store: NewMemStore(), Seed: []string{"example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := fe.checkURL(raw)
		if err != nil {
			return
		}
		u := tg.url
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil || tg.internal {
			t.Fatalf("checkURL(%q) accepted %q", raw, u)
		}
		req, err := http.NewRequest(http.MethodGet, u.String(), nil)
		if err != nil {
			t.Fatalf("checkURL(%q) = %q, which net/http refuses: %v", raw, u, err)
		}
		if got, _ := Canonical(req.URL.Hostname()); got != tg.host || req.URL.Hostname() != strings.Trim(u.Host[:len(u.Host)-len(portSuffix(u.Host))], "[]") {
			t.Fatalf("checkURL(%q): checked host %q, net/http would dial %q", raw, tg.host, req.URL.Host)
		}
		if p := req.URL.Port(); p != "" && strings.TrimLeft(p, "0") != "80" && strings.TrimLeft(p, "0") != "443" {
			t.Fatalf("checkURL(%q) accepted port %q", raw, p)
		}
		if ip, ok := parseIP(tg.host); ok {
			if err := fe.guard.SafeAddr(ip); err != nil {
				t.Fatalf("checkURL(%q) accepted %s: %v", raw, ip, err)
			}
			if checkMetadata(netip.AddrPortFrom(ip, 80)) != nil {
				t.Fatalf("checkURL(%q) accepted metadata %s", raw, ip)
			}
		} else if publicName(tg.host) != nil {
			t.Fatalf("checkURL(%q) accepted non-public name %q", raw, tg.host)
		}
		if fe.checkTarget(tg) != nil {
			return
		}
		if _, isIP := parseIP(tg.host); !isIP && tg.host != "example.com" {
			if !strings.Contains(tg.host, ".") || underAny(tg.host, metadataHosts) != "" || underAny(tg.host, loopbackDomains) != "" {
				t.Fatalf("checkTarget passed %q", tg.host)
			}
			for _, ip := range spelledAddrs(tg.host, underAny(tg.host, addressDomains) != "") {
				if fe.guard.SafeAddr(ip) != nil || checkMetadata(netip.AddrPortFrom(ip, 80)) != nil {
					t.Fatalf("checkTarget passed %q, which spells %s", tg.host, ip)
				}
			}
		}
	})
}

// portSuffix is ":port" at the end of a host[:port], or "".
func portSuffix(hostport string) string {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.HasSuffix(hostport, "]") {
		return ""
	}
	if strings.HasPrefix(hostport, "[") || strings.Count(hostport, ":") == 1 {
		return hostport[i:]
	}
	return ""
}

// FuzzRenderHTML: a hostile page must not crash the process (the loop
// does not recover a tool's panic): parsing, pruning and conversion
// give text or an error, within the result limit.
func FuzzRenderHTML(f *testing.F) {
	for _, s := range []string{
		"<p>hi</p>", "<table><tr><td>a<td>b</table>", "<pre>```</pre>", "<a href='javascript:x'>x</a>",
		"<ul><li><ol><li>x</ol></ul>", "<code>`a``b`</code>", "<meta charset=utf-16><p>x",
		"<svg><foreignObject><p>x</svg>", "<select><option>x<template><p>y</template>", "<img src=x alt='[a](b)'>",
		"<blockquote><blockquote>> x</blockquote></blockquote>", "<h1>#</h1><hr><br>",
		// Past the markup bounds: the plain-text reading.
		strings.Repeat("<a>", maxElements+1) + "x", strings.Repeat("<div>", maxDepth+1) + "<script>x</script>y",
		strings.Repeat("<td>", maxElements) + "<div " + strings.Repeat("a ", maxTokenBytes) + ">",
	} {
		f.Add(s)
	}
	fe, err := New(context.Background(), Config{Store: NewMemStore(), MaxResult: 200})
	if err != nil {
		f.Fatal(err)
	}
	u, _ := url.Parse("https://example.com/a/b")
	f.Fuzz(func(t *testing.T, page string) {
		resp := &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"text/html"}},
			Body:       io.NopCloser(strings.NewReader(page)),
		}
		out, err := fe.render(context.Background(), u, resp)
		if err == nil && utf8.RuneCountInString(out) > 200+200+len(u.String()) {
			t.Fatalf("result of %d runes", utf8.RuneCountInString(out))
		}
	})
}
