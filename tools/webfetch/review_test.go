package webfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"tollgate/prompt"
)

// TestInvalidUTF8HostIsRefused: idna turns each invalid byte into U+FFFD
// ("xn--zn7c"), so "\xff.ac" and "\xfe.ac" were added as one entry that
// Canonical then refused: remove-domain could never take it away again.
func TestInvalidUTF8HostIsRefused(t *testing.T) {
	for _, in := range []string{"\xff.ac", "\x900", "exa\xc0mple.com", "*.\xffexample.com"} {
		if c, err := Canonical(in); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Canonical(%q) = %q, %v; want a UTF-8 error", in, c, err)
		}
		if c, err := ValidateNewDomain(in); err == nil {
			t.Errorf("ValidateNewDomain(%q) = %q; want an error", in, c)
		}
	}
	f := newFetcher(t, Config{})
	if _, err := f.checkURL("http://\x8c\xef\xbc.\uff43\uff4f/"); err == nil {
		t.Error("checkURL accepted a host with invalid UTF-8")
	}
	in, _ := json.Marshal(map[string]string{"domain": "\xff.ac"})
	if _, err := toolByName(t, f, ToolAddDomain).Gate(context.Background(), in); err == nil {
		t.Error("add-domain gate accepted a host with invalid UTF-8")
	}
}

// TestMetadataInIPv6TranslationFormsStaysRefused: with AllowPrivate the
// metadata check was the only guard left, and it knew only the
// IPv4-mapped form. A NAT64 gateway (AWS offers one for IPv6-only
// subnets) turns 64:ff9b::a9fe:a9fe back into 169.254.169.254.
func TestMetadataInIPv6TranslationFormsStaysRefused(t *testing.T) {
	f := newFetcher(t, Config{AllowPrivate: true})
	for _, host := range []string{
		"64:ff9b::a9fe:a9fe",                   // NAT64 well-known prefix (RFC 6052)
		"64:ff9b::169.254.169.254",             // the same, dotted
		"64:ff9b:1::a9fe:a9fe",                 // NAT64 local-use prefix (RFC 8215), /96
		"64:ff9b:1:a9fe:a9:fe00::",             // local-use prefix, /48 layout
		"64:ff9b::6464:64c8",                   // Alibaba's 100.100.100.200 over NAT64
		"2002:a9fe:a9fe::1",                    // 6to4 (RFC 3056)
		"::a9fe:a9fe",                          // IPv4-compatible (deprecated)
		"2001:0:4136:e378:8000:63bf:5601:5601", // Teredo, client 169.254.169.254 inverted
		"::ffff:169.254.169.254",               // IPv4-mapped, already refused
	} {
		u := "http://[" + host + "]/"
		if _, err := f.checkURL(u); !errors.Is(err, ErrBlocked) {
			t.Errorf("checkURL(%s) = %v; want ErrBlocked", u, err)
		}
		if err := f.control(context.Background(), "tcp6", "["+host+"]:80", nil); !errors.Is(err, ErrBlocked) {
			t.Errorf("control(%s) = %v; want ErrBlocked", host, err)
		}
	}
	// The same forms of a public address stay reachable.
	for _, host := range []string{"64:ff9b::808:808", "2002:808:808::1", "64:ff9b:1::808:808"} {
		if err := f.control(context.Background(), "tcp6", "["+host+"]:80", nil); err != nil {
			t.Errorf("control(%s) = %v; want allowed", host, err)
		}
	}
}

// TestAddedWildcardStopsAtAPublicSuffix: amazonaws.com is a registrable
// domain, so add-domain takes "*.amazonaws.com", but s3.amazonaws.com
// below it is a public suffix: anyone can own evil.s3.amazonaws.com. A
// wildcard the model added must not reach across that boundary; one the
// operator seeded still does (the operator is trusted).
func TestAddedWildcardStopsAtAPublicSuffix(t *testing.T) {
	ctx := context.Background()
	f := newFetcher(t, Config{Seed: []string{"*.github.com"}})
	for _, d := range []string{"*.amazonaws.com", "*.example.org"} {
		in, _ := json.Marshal(map[string]string{"domain": d})
		approved := prompt.ContextWithCall(ctx, prompt.CallInfo{Approved: true, ApprovedBy: "alice"})
		if _, err := toolByName(t, f, ToolAddDomain).Invoke(approved, in); err != nil {
			t.Fatalf("add %s: %v", d, err)
		}
	}
	fetch := toolByName(t, f, ToolFetch)
	for _, tt := range []struct {
		url  string
		want verdict
	}{
		{"https://attacker.s3.amazonaws.com/x", approve("attacker.s3.amazonaws.com")},
		{"https://x.s3.us-east-1.amazonaws.com/", approve("x.s3.us-east-1.amazonaws.com")},
		{"https://ec2.amazonaws.com/", listed},
		{"https://a.b.example.org/", listed},
		{"https://gist.github.com/", listed},
	} {
		checkVerdict(t, fetch, map[string]string{"url": tt.url}, tt.want)
	}

	seeded := newFetcher(t, Config{Seed: []string{"*.amazonaws.com"}})
	checkVerdict(t, toolByName(t, seeded, ToolFetch), map[string]string{"url": "https://attacker.s3.amazonaws.com/"}, listed)
}

// TestServerTextInErrorsIsBounded: a page chose how long the error the
// model reads was: a 60 kB Location, status line or garbage response
// came back whole, three times the result limit.
func TestServerTextInErrorsIsBounded(t *testing.T) {
	long := strings.Repeat("a", 60000)
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-unlisted":
			w.Header().Set("Location", "http://unlisted.example.org/"+long)
			w.WriteHeader(http.StatusFound)
		case "/to-listed":
			w.Header().Set("Location", "/"+long)
			w.WriteHeader(http.StatusFound)
		case "/status", "/garbage":
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			if r.URL.Path == "/status" {
				fmt.Fprintf(buf, "HTTP/1.1 500 %s\r\nContent-Length: 0\r\n\r\n", long)
			} else {
				fmt.Fprintf(buf, "%s\r\n\r\n", long)
			}
			buf.Flush()
		}
	}))
	f := newFetcher(t, Config{AllowPrivate: true})
	for _, path := range []string{"/to-unlisted", "/to-listed", "/status", "/garbage"} {
		out, err := invoke(t, f, "http://example.com:"+port+path)
		if err == nil {
			t.Errorf("%s: no error, output of %d bytes", path, len(out))
			continue
		}
		if n := len(err.Error()); n > 10000 {
			t.Errorf("%s: error of %d bytes: %.200s", path, n, err)
		}
	}
	if _, err := f.checkURL("http://example.com/" + long); err == nil || len(err.Error()) > 1000 {
		t.Errorf("a 60 kB URL: %.200v", err)
	}
}

// TestContentTypeEchoIsBounded: the media type is quoted in the result's
// first line and in errors; a server could make it 60 kB.
func TestContentTypeEchoIsBounded(t *testing.T) {
	long := strings.Repeat("a", 60000)
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/"+long)
		case "/other":
			w.Header().Set("Content-Type", "application/"+long)
		case "/bad":
			w.Header().Set("Content-Type", "text/html; "+long)
		}
		fmt.Fprint(w, "hello")
	}))
	f := newFetcher(t, Config{AllowPrivate: true})
	for _, path := range []string{"/text", "/other", "/bad"} {
		out, err := invoke(t, f, "http://example.com:"+port+path)
		if n := len(out); n > 1000 || err == nil && !strings.Contains(out, "hello") {
			t.Errorf("%s: output of %d bytes: %.200s", path, n, out)
		}
		if err != nil && len(err.Error()) > 1000 {
			t.Errorf("%s: error of %d bytes: %.200s", path, len(err.Error()), err)
		}
	}
}

// TestEveryResolvedAddressIsCheckedOnItsOwn: a name that resolves to
// several addresses, some refused, reaches only the allowed ones; the
// refused one is never connected to, even when something listens there.
func TestEveryResolvedAddressIsCheckedOnItsOwn(t *testing.T) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var reached sync.Map
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
		reached.Store(local, true)
		fmt.Fprint(w, "hello from "+local)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	r := newResolver("example.com", "127.0.0.1", "example.com", "127.0.0.2")
	logs, logger := newLogCapture()
	f := newFetcher(t, Config{Resolver: r, AllowPrivate: true, Logger: logger})
	refused := netip.MustParseAddr("127.0.0.1")
	f.checkAddr = func(ap netip.AddrPort) error {
		if ap.Addr() == refused {
			return fmt.Errorf("%w: %s (test)", ErrBlocked, ap)
		}
		return nil
	}
	out, err := invoke(t, f, fmt.Sprintf("http://example.com:%d/", port))
	if err != nil || !strings.Contains(out, "hello from 127.0.0.2") {
		t.Fatalf("got %q, %v; want the page from the allowed address", out, err)
	}
	if _, ok := reached.Load(netip.AddrPortFrom(refused, port).String()); ok {
		t.Fatal("the refused address was connected to")
	}
	// Refuse both: the fetch fails and says why; the log names each
	// address, the model's text none.
	f.checkAddr = func(ap netip.AddrPort) error { return fmt.Errorf("%w: %s (test)", ErrBlocked, ap.Addr()) }
	_, err = invoke(t, f, fmt.Sprintf("http://example.com:%d/", port))
	if !errors.Is(err, ErrBlocked) || strings.Contains(err.Error(), "127.0.0.") {
		t.Fatalf("error %v; want a refusal that names no address", err)
	}
	if !logs.contains("127.0.0.1") || !logs.contains("127.0.0.2") {
		t.Fatalf("log does not name both refused addresses:\n%s", logs)
	}
}
