package webfetch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// addrLiteral matches IPv4 and IPv6 literals and ":port" suffixes: none
// may reach the model except inside the URL it asked for.
var addrLiteral = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b|(?i:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}|:\d{2,5}\b`)

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestFailureTextNamesNoAddress fails a fetch in each way a resolver, a
// dialer or a server can, and checks that the model is told what
// happened without the resolver's address or what the name resolved to;
// the log keeps both.
func TestFailureTextNamesNoAddress(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls") }))
	t.Cleanup(tlsSrv.Close)
	tlsURL, _ := url.Parse(tlsSrv.URL)
	resetPort := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\npartial")
		buf.Flush()
		// An abortive close: the client reads a reset, or a short body.
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	closed := freePort(t)

	at := func(addrs ...string) resolverFunc {
		return func(context.Context, string, string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range addrs {
				out = append(out, netip.MustParseAddr(a))
			}
			return out, nil
		}
	}
	failing := func(err error) resolverFunc {
		return func(context.Context, string, string) ([]netip.Addr, error) { return nil, err }
	}
	tests := []struct {
		name         string
		resolver     Resolver
		allowPrivate bool
		trustTLS     bool
		url          string
		want         string // in the model's text
		inLog        string // in the log, not in the model's text
	}{
		{"no such host", failing(&net.DNSError{Err: "no such host", Name: "example.com", Server: "10.0.0.53:53", IsNotFound: true}),
			false, false, "https://example.com/", "could not resolve example.com: no such host", "10.0.0.53:53"},
		{"lookup timeout", failing(&net.DNSError{Err: "i/o timeout", Name: "example.com", Server: "[fd00::53]:53", IsTimeout: true}),
			false, false, "https://example.com/", "could not resolve example.com: the lookup timed out", "fd00::53"},
		{"lookup failure in other words", failing(errors.New("lookup example.com on 192.168.1.1:53: server misbehaving")),
			false, false, "https://example.com/", "the request failed", "192.168.1.1:53"},
		{"no address", at(), false, false, "https://example.com/", "could not resolve example.com: it has no address", "web-fetch failed"},
		{"resolves to a private address", at("10.0.0.5"), false, false, "http://example.com/", "refused: destination not allowed: the address is private", "10.0.0.5:80"},
		{"resolves to a v6 private address", at("fd12:3456::1"), false, false, "https://example.com/", "the address is private", "fd12:3456::1"},
		{"resolves to metadata", at("169.254.169.254"), true, false, "http://example.com/", "the address is a cloud metadata address", "169.254.169.254:80"},
		{"resolves to the Azure WireServer", at("168.63.129.16"), false, false, "http://example.com/", "the address is a cloud metadata address", "168.63.129.16:80"},
		{"connection refused", at("127.0.0.1"), true, false, "http://example.com:" + closed + "/", "connection refused", "127.0.0.1:" + closed},
		{"untrusted certificate", at("127.0.0.1"), true, false, "https://example.com:" + tlsURL.Port() + "/", "not signed by a trusted authority", "unknown authority"},
		{"certificate for another name", at("127.0.0.1"), true, true, "https://other.example.net:" + tlsURL.Port() + "/", "not valid for other.example.net", "web-fetch failed"},
		{"plain http on a TLS port", at("127.0.0.1"), true, false, "https://example.com:" + resetPort + "/", "HTTP response to HTTPS client", "web-fetch failed"},
		{"reset while reading", at("127.0.0.1"), true, false, "http://example.com:" + resetPort + "/", "while reading the body", "web-fetch failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs, logger := newLogCapture()
			f := newFetcher(t, Config{Resolver: tt.resolver, AllowPrivate: tt.allowPrivate, Logger: logger})
			if tt.trustTLS {
				pool := x509.NewCertPool()
				pool.AddCert(tlsSrv.Certificate())
				f.client.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool
			}
			_, err := invoke(t, f, tt.url)
			if err == nil {
				t.Fatal("the fetch succeeded")
			}
			text := err.Error()
			if !strings.Contains(text, tt.want) {
				t.Errorf("model's text %q lacks %q", text, tt.want)
			}
			if m := addrLiteral.FindString(strings.ReplaceAll(text, tt.url, "")); m != "" {
				t.Errorf("model's text %q names an address or port: %q", text, m)
			}
			if !logs.contains(tt.inLog) {
				t.Errorf("log lacks %q:\n%s", tt.inLog, logs)
			}
		})
	}
}
