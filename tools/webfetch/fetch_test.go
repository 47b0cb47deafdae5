package webfetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeResolver answers from a map, so tests can point any name at an
// httptest server without touching DNS.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	asked []string
}

func newResolver(pairs ...string) *fakeResolver {
	r := &fakeResolver{hosts: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		r.hosts[pairs[i]] = append(r.hosts[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// testNames all resolve to the loopback test servers.
var testNames = []string{"example.com", "other.example.net", "unlisted.example.org", "a.docs.example.org"}

func newFetcher(t *testing.T, cfg Config) *Fetcher {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = NewMemStore()
	}
	if cfg.Resolver == nil {
		r := newResolver()
		for _, n := range testNames {
			r.hosts[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		cfg.Resolver = r
	}
	if cfg.Seed == nil {
		cfg.Seed = []string{"example.com", "other.example.net"}
	}
	f, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serve starts an httptest server and returns its port.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Port()
}

// invoke runs the fetch tool as the loop would for an unapproved call.
func invoke(t *testing.T, f *Fetcher, rawURL string) (string, error) {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"url": rawURL})
	return toolByName(t, f, ToolFetch).Invoke(context.Background(), in)
}

// fetchApproved runs a fetch as a human-approved call for rawURL's host.
func fetchApproved(t *testing.T, f *Fetcher, rawURL string) (string, error) {
	t.Helper()
	tg, err := f.checkURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return f.fetch(context.Background(), tg, tg.host)
}

func wantErr(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v; want one containing %q", err, sub)
	}
}

func TestFetchListedHTMLBecomesMarkdown(t *testing.T) {
	var ua atomic.Value
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.UserAgent())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>T</title><script>evil()</script></head>
<body><h1>Hello</h1><p>Read <a href="/docs">the docs</a>.</p></body></html>`)
	}))
	f := newFetcher(t, Config{AllowPrivate: true, UserAgent: "TollgateTest/1"})
	out, err := invoke(t, f, "http://example.com:"+port+"/page")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Hello", "[the docs](http://example.com:" + port + "/docs)", "text/html"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "evil()") {
		t.Errorf("script text leaked into the output:\n%s", out)
	}
	if ua.Load() != "TollgateTest/1" {
		t.Errorf("User-Agent = %v", ua.Load())
	}
}

func TestFetchDefaultUserAgentNamesTheBot(t *testing.T) {
	var ua atomic.Value
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.UserAgent())
		fmt.Fprint(w, "ok")
	}))
	f := newFetcher(t, Config{AllowPrivate: true})
	if _, err := invoke(t, f, "http://example.com:"+port+"/"); err != nil {
		t.Fatal(err)
	}
	if got, _ := ua.Load().(string); !strings.HasPrefix(got, "Tollgate/") {
		t.Errorf("User-Agent = %q", got)
	}
}

func TestFetchPassesTextJSONXMLThrough(t *testing.T) {
	bodies := map[string]string{
		"/t": "text/plain; charset=utf-8",
		"/j": "application/json",
		"/x": "application/xml",
		"/a": "application/atom+xml",
		"/m": "text/markdown",
	}
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", bodies[r.URL.Path])
		fmt.Fprintf(w, `<keep>{"path": %q} *as is*</keep>`, r.URL.Path)
	}))
	f := newFetcher(t, Config{AllowPrivate: true})
	for path := range bodies {
		out, err := invoke(t, f, "http://example.com:"+port+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if want := fmt.Sprintf(`<keep>{"path": %q} *as is*</keep>`, path); !strings.HasSuffix(out, want) {
			t.Errorf("%s: output changed the body:\n%s", path, out)
		}
	}
}

func TestFetchDecodesLegacyCharset(t *testing.T) {
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
		w.Write([]byte("caf\xe9"))
	}))
	out, err := invoke(t, newFetcher(t, Config{AllowPrivate: true}), "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "café") {
		t.Errorf("output %q", out)
	}
}

func TestFetchRefusesBinaryContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/png":
			w.Header().Set("Content-Type", "image/png")
		case "/lying":
			w.Header().Set("Content-Type", "text/plain")
		case "/sniffed":
			w.Header()["Content-Type"] = nil // let the client sniff
		case "/octet":
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		w.Write(png)
	}))
	f := newFetcher(t, Config{AllowPrivate: true})
	for path, want := range map[string]string{
		"/png":     "content type image/png cannot be read",
		"/lying":   "binary",
		"/sniffed": "content type image/png cannot be read",
		"/octet":   "application/octet-stream cannot be read",
	} {
		_, err := invoke(t, f, "http://example.com:"+port+path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want %q", path, err, want)
		}
	}
}

func TestFetchReportsHTTPErrors(t *testing.T) {
	port := serve(t, http.NotFoundHandler())
	_, err := invoke(t, newFetcher(t, Config{AllowPrivate: true}), "http://example.com:"+port+"/missing")
	wantErr(t, err, "404 Not Found")
}

func TestFetchHugeBodyIsCut(t *testing.T) {
	const size = 5 << 20
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		for written := 0; written < size; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	f := newFetcher(t, Config{AllowPrivate: true, MaxBody: 1 << 20, MaxResult: 1000})
	out, err := invoke(t, f, "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"only the first 1048576 were read",
		"the content has 1048576 characters; only the first 1000 are shown",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if len(out) > 2000 {
		t.Errorf("output is %d bytes; MaxResult was not applied", len(out))
	}
}

// TestFetchGzipBombIsBoundedAfterDecompression: the limit counts the
// bytes after decompression, so a small compressed body cannot blow up.
func TestFetchGzipBombIsBoundedAfterDecompression(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("a"), 4<<20))
	zw.Close()
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz.Bytes())
	}))
	f := newFetcher(t, Config{AllowPrivate: true, MaxBody: 64 << 10, MaxResult: 100})
	out, err := invoke(t, f, "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "only the first 65536 were read") || !strings.Contains(out, "the content has 65536 characters") {
		t.Errorf("the decompressed body was not cut at MaxBody:\n%s", out)
	}
}

func TestFetchSlowBodyTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "first bytes")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	f := newFetcher(t, Config{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	_, err := invoke(t, f, "http://example.com:"+port+"/")
	wantErr(t, err, "timed out after 200ms while reading the body")
}

func TestFetchSlowHeadersTimeOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	f := newFetcher(t, Config{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	_, err := invoke(t, f, "http://example.com:"+port+"/")
	wantErr(t, err, "timed out after 200ms")
}

// TestFetchUnlistedWithoutApprovalIsRefused: the gate is not the only
// guard; Invoke refuses too, should it ever be reached without approval.
func TestFetchUnlistedWithoutApprovalIsRefused(t *testing.T) {
	var hits atomic.Int32
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	_, err := invoke(t, newFetcher(t, Config{AllowPrivate: true}), "http://unlisted.example.org:"+port+"/")
	wantErr(t, err, "not on the allowlist and this call was not approved")
	if hits.Load() != 0 {
		t.Errorf("the server was contacted %d times", hits.Load())
	}
}

// TestConnectTimeCheckRefusesListedNameOnLoopback: a listed name that
// resolves to 127.0.0.1 is refused where the connection is made.
func TestConnectTimeCheckRefusesListedNameOnLoopback(t *testing.T) {
	r := newResolver("example.com", "127.0.0.1", "v6.example.com", "::1", "mapped.example.com", "::ffff:127.0.0.1",
		"meta.example.com", "169.254.169.254")
	f := newFetcher(t, Config{Resolver: r, Seed: []string{"example.com", "*.example.com"}})
	fetch := toolByName(t, f, ToolFetch)
	for _, host := range []string{"example.com", "v6.example.com", "mapped.example.com", "meta.example.com"} {
		// The gate lets it through unasked, so the refusal below can only
		// come from the connect-time check.
		req, err := fetch.Gate(context.Background(), json.RawMessage(`{"url":"http://`+host+`/"}`))
		if err != nil || req.Required {
			t.Fatalf("%s: gate = %+v, %v; want listed, so the check under test is the connect-time one", host, req, err)
		}
		_, err = invoke(t, f, "http://"+host+"/")
		if !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: error %v; want ErrBlocked", host, err)
		}
		wantErr(t, err, "refused")
	}
	if got := r.lookups(); len(got) != 4 {
		t.Errorf("resolver asked for %v; the names must have been resolved and then refused", got)
	}
}

// TestConnectTimeCheckCatchesRebinding: whatever the name resolves to at
// connect time is what is checked, even if it resolved outside before.
func TestConnectTimeCheckCatchesRebinding(t *testing.T) {
	var n atomic.Int32
	rebind := resolverFunc(func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		if n.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
	})
	logs, logger := newLogCapture()
	f := newFetcher(t, Config{Resolver: rebind, Logger: logger})
	// A first lookup (as a pre-check would do) sees a public address.
	if a, _ := rebind.LookupNetIP(context.Background(), "ip", "example.com"); !a[0].IsGlobalUnicast() {
		t.Fatal("setup")
	}
	_, err := invoke(t, f, "http://example.com/")
	if !errors.Is(err, ErrBlocked) || strings.Contains(err.Error(), "10.0.0.7") {
		t.Fatalf("error %v; want the rebound address refused without naming it", err)
	}
	if !logs.contains("addr=10.0.0.7:80") {
		t.Fatalf("the log does not name the rebound address:\n%s", logs)
	}
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

func TestControlVerdicts(t *testing.T) {
	f := newFetcher(t, Config{})
	priv := newFetcher(t, Config{AllowPrivate: true})
	tests := []struct {
		network, addr string
		ok, okPrivate bool
	}{
		{"tcp4", "93.184.215.14:443", true, true},
		{"tcp4", "93.184.215.14:80", true, true},
		{"tcp4", "93.184.215.14:22", false, true},
		{"tcp6", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", true, true},
		{"tcp4", "127.0.0.1:443", false, true},
		{"tcp4", "10.1.2.3:80", false, true},
		{"tcp4", "172.16.0.1:80", false, true},
		{"tcp4", "192.168.0.1:80", false, true},
		{"tcp4", "100.64.1.1:80", false, true},
		{"tcp4", "0.0.0.0:80", false, true},
		{"tcp4", "224.0.0.1:80", false, true},
		{"tcp6", "[::1]:443", false, true},
		{"tcp6", "[::]:443", false, true},
		{"tcp6", "[fc00::1]:443", false, true},
		{"tcp6", "[fe80::1]:443", false, true},
		{"tcp6", "[ff02::1]:443", false, true},
		{"tcp6", "[::ffff:127.0.0.1]:443", false, true},
		{"tcp6", "[::ffff:10.0.0.1]:443", false, true},
		{"tcp6", "[64:ff9b::a00:1]:443", false, true},
		{"tcp4", "169.254.169.254:80", false, false},
		{"tcp6", "[::ffff:169.254.169.254]:80", false, false},
		{"tcp6", "[fd00:ec2::254]:80", false, false},
		{"tcp4", "100.100.100.200:80", false, false},
		{"tcp4", "168.63.129.16:80", false, false},
		{"tcp4", "192.0.0.192:80", false, false},
		{"tcp6", "[fd00:ec2::23]:80", false, false},
		{"tcp6", "[fd20:ce::254]:80", false, false},
		{"tcp6", "[2002:a83f:8110::1]:80", false, false},
		{"udp4", "93.184.215.14:443", false, false},
	}
	for _, tt := range tests {
		var raw syscall.RawConn
		if err := f.control(context.Background(), tt.network, tt.addr, raw); (err == nil) != tt.ok {
			t.Errorf("control(%s %s) = %v; want ok=%v", tt.network, tt.addr, err, tt.ok)
		}
		if err := priv.control(context.Background(), tt.network, tt.addr, raw); (err == nil) != tt.okPrivate {
			t.Errorf("AllowPrivate control(%s %s) = %v; want ok=%v", tt.network, tt.addr, err, tt.okPrivate)
		}
	}
}

// TestNoProxyFromEnvironment: a proxy would make the connection on our
// behalf, out of reach of the address check. net/http reads the proxy
// variables once per process, so the check runs in a fresh child process
// whose environment names a proxy from the start.
func TestNoProxyFromEnvironment(t *testing.T) {
	if os.Getenv("WEBFETCH_PROXY_CHILD") == "1" {
		noProxyChild(t)
		return
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "from the proxy")
	}))
	t.Cleanup(proxy.Close)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoProxyFromEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "WEBFETCH_PROXY_CHILD=1",
		"HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "HTTPS_PROXY="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fetched directly") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func noProxyChild(t *testing.T) {
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "direct") }))
	out, err := invoke(t, newFetcher(t, Config{AllowPrivate: true}), "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "direct") {
		t.Fatalf("went through the proxy: %q", out)
	}
	t.Log("fetched directly")
}

// redirector serves a site per host name: /go?to=X redirects to X, any
// other path answers with host and path.
func redirector(hits *sync.Map) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		n, _ := hits.LoadOrStore(host, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/chain/") {
			var i int
			fmt.Sscanf(r.URL.Path, "/chain/%d", &i)
			if i > 0 {
				http.Redirect(w, r, fmt.Sprintf("/chain/%d", i-1), http.StatusMovedPermanently)
				return
			}
		}
		switch r.URL.Path {
		case "/loop-a":
			http.Redirect(w, r, "/loop-b", http.StatusTemporaryRedirect)
			return
		case "/loop-b":
			http.Redirect(w, r, "/loop-a", http.StatusPermanentRedirect)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "page %s%s", host, r.URL.Path)
	})
}

func hitsOf(hits *sync.Map, host string) int32 {
	n, ok := hits.Load(host)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

func TestRedirects(t *testing.T) {
	var hits sync.Map
	port := serve(t, redirector(&hits))
	base := func(host string) string { return "http://" + host + ":" + port }
	f := newFetcher(t, Config{AllowPrivate: true})

	t.Run("within the same listed host", func(t *testing.T) {
		out, err := invoke(t, f, base("example.com")+"/go?to=/target")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out, "page example.com/target") {
			t.Errorf("output %q", out)
		}
	})
	t.Run("to another listed host", func(t *testing.T) {
		out, err := invoke(t, f, base("example.com")+"/go?to="+url.QueryEscape(base("other.example.net")+"/x"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out, "page other.example.net/x") || !strings.Contains(out, "Fetched "+base("other.example.net")+"/x") {
			t.Errorf("output %q", out)
		}
	})
	t.Run("to an unlisted host is reported, not followed", func(t *testing.T) {
		to := base("unlisted.example.org") + "/secret"
		_, err := invoke(t, f, base("example.com")+"/go?to="+url.QueryEscape(to))
		wantErr(t, err, "redirects to "+to+", whose domain is not on the allowlist")
		wantErr(t, err, ToolFetch)
		if n := hitsOf(&hits, "unlisted.example.org"); n != 0 {
			t.Errorf("unlisted host was contacted %d times", n)
		}
	})
	t.Run("approved call follows within its host but not to an unlisted one", func(t *testing.T) {
		out, err := fetchApproved(t, f, base("unlisted.example.org")+"/go?to=/next")
		if err != nil || !strings.HasSuffix(out, "page unlisted.example.org/next") {
			t.Fatalf("got %q, %v", out, err)
		}
		_, err = fetchApproved(t, f, base("unlisted.example.org")+"/go?to="+url.QueryEscape(base("a.docs.example.org")+"/"))
		wantErr(t, err, "not on the allowlist, so it was not followed")
		if n := hitsOf(&hits, "a.docs.example.org"); n != 0 {
			t.Errorf("second unlisted host contacted %d times", n)
		}
	})
	t.Run("to a metadata address", func(t *testing.T) {
		_, err := invoke(t, f, base("example.com")+"/go?to="+url.QueryEscape("http://169.254.169.254/latest/meta-data/"))
		wantErr(t, err, "redirect to http://169.254.169.254/latest/meta-data/ refused")
		if !errors.Is(err, ErrBlocked) {
			t.Errorf("error %v is not ErrBlocked", err)
		}
	})
	t.Run("with user-info or another scheme", func(t *testing.T) {
		_, err := invoke(t, f, base("example.com")+"/go?to="+url.QueryEscape("http://u:p@other.example.net:"+port+"/"))
		wantErr(t, err, "user-info")
		_, err = invoke(t, f, base("example.com")+"/go?to="+url.QueryEscape("file:///etc/passwd"))
		wantErr(t, err, "only http and https")
	})
	t.Run("a loop", func(t *testing.T) {
		_, err := invoke(t, f, base("example.com")+"/loop-a")
		wantErr(t, err, "redirect loop")
	})
	t.Run("five hops are followed", func(t *testing.T) {
		out, err := invoke(t, f, base("example.com")+"/chain/5")
		if err != nil || !strings.HasSuffix(out, "page example.com/chain/0") {
			t.Fatalf("got %q, %v", out, err)
		}
	})
	t.Run("six are too many", func(t *testing.T) {
		_, err := invoke(t, f, base("example.com")+"/chain/6")
		wantErr(t, err, "more than 5 redirects")
	})
}

// TestRedirectToPrivateAddressWithChecksOn runs with the real address
// checks, except that the test server's own address is let through.
func TestRedirectToPrivateAddressWithChecksOn(t *testing.T) {
	var hits sync.Map
	port := serve(t, redirector(&hits))
	r := newResolver("127.0.0.1", "127.0.0.1", "intranet.example.com", "10.20.30.40")
	f := newFetcher(t, Config{Resolver: r, Seed: []string{"127.0.0.1", "intranet.example.com"}})
	server := netip.MustParseAddr("127.0.0.1")
	f.checkAddr = func(ap netip.AddrPort) error {
		if ap.Addr() == server {
			return nil
		}
		return f.defaultCheckAddr(ap)
	}
	base := "http://127.0.0.1:" + port
	for to, want := range map[string]string{
		"http://192.168.1.1/":               "redirect to http://192.168.1.1/ refused",
		"http://[::ffff:10.0.0.1]/":         "refused",
		"http://localhost/":                 "refused",
		"http://intranet.example.com/admin": "refused: destination not allowed: the address is private", // listed, but resolves inward: connect time
		"http://0x7f000001/":                "non-standard form",
	} {
		_, err := invoke(t, f, base+"/go?to="+url.QueryEscape(to))
		wantErr(t, err, want)
		if !strings.Contains(to, "0x7f") && !errors.Is(err, ErrBlocked) {
			t.Errorf("redirect to %s: %v is not ErrBlocked", to, err)
		}
	}
}

func TestRedirectHTTPSToHTTPRefused(t *testing.T) {
	var hits sync.Map
	plain := serve(t, redirector(&hits))
	tlsSrv := httptest.NewTLSServer(redirector(&hits))
	t.Cleanup(tlsSrv.Close)
	u, _ := url.Parse(tlsSrv.URL)
	f := newFetcher(t, Config{AllowPrivate: true})
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	f.client.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool

	base := "https://example.com:" + u.Port()
	out, err := invoke(t, f, base+"/go?to=/safe")
	if err != nil || !strings.HasSuffix(out, "page example.com/safe") {
		t.Fatalf("https fetch: %q, %v", out, err)
	}
	_, err = invoke(t, f, base+"/go?to="+url.QueryEscape("http://example.com:"+plain+"/"))
	wantErr(t, err, "redirect from https to plain http")
	if n := hitsOf(&hits, "example.com"); n != 3 {
		t.Errorf("example.com hit %d times; want 3 (the https pages only)", n)
	}
}

// TestFetchLargeHTMLIsCutBeforeConversion: only the start of a big page
// is converted, and the model is told the page goes on.
func TestFetchLargeHTMLIsCutBeforeConversion(t *testing.T) {
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><h1>Start</h1>")
		for i := range 20000 {
			fmt.Fprintf(w, "<p>paragraph %d</p>", i)
		}
		fmt.Fprint(w, "<p>THE END</p></body></html>")
	}))
	out, err := invoke(t, newFetcher(t, Config{AllowPrivate: true, MaxResult: 500}), "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# Start") || !strings.Contains(out, "paragraph 1") || strings.Contains(out, "THE END") ||
		!strings.HasSuffix(out, "[Cut: the page is longer; only the first 500 characters are shown.]") {
		t.Fatalf("output:\n%s", out)
	}
}

// TestFetchDeeplyNestedHTML: a hostile page nesting elements very deeply
// gives a result or an error, never a crash.
func TestFetchDeeplyNestedHTML(t *testing.T) {
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, strings.Repeat("<div>", 300000)+"deep text")
	}))
	out, err := invoke(t, newFetcher(t, Config{AllowPrivate: true}), "http://example.com:"+port+"/")
	if err == nil && !strings.Contains(out, "deep text") {
		t.Fatalf("output lost the text: %q", out[:min(len(out), 200)])
	}
}

// TestSeededInternalHostsSkipTheChecks: WEBFETCH_ALLOWED_DOMAINS is the
// operator's own list; a host in it that can only be internal (localhost,
// an IP literal) is reachable with the checks on, and only that host.
func TestSeededInternalHostsSkipTheChecks(t *testing.T) {
	var hits atomic.Int32
	var port string
	port = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/go" {
			http.Redirect(w, r, "http://127.0.0.2:"+port+"/", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "internal page")
	}))
	r := newResolver("localhost", "127.0.0.1", "example.com", "127.0.0.1")
	f := newFetcher(t, Config{Resolver: r, Seed: []string{"localhost", "127.0.0.1", "example.com", "169.254.169.254"}})
	for _, u := range []string{"http://localhost:" + port + "/", "http://127.0.0.1:" + port + "/"} {
		out, err := invoke(t, f, u)
		if err != nil || !strings.Contains(out, "internal page") {
			t.Fatalf("%s: %q, %v", u, out, err)
		}
	}
	if hits.Load() != 2 {
		t.Fatalf("hits = %d", hits.Load())
	}
	// A public name keeps the checks even when listed: it may resolve anywhere.
	if _, err := invoke(t, f, "http://example.com:"+port+"/"); !errors.Is(err, ErrBlocked) {
		t.Errorf("listed public name on loopback: %v, want ErrBlocked", err)
	}
	// Another internal address is refused, even with a human's approval.
	if _, err := f.checkURL("http://127.0.0.2:" + port + "/"); !errors.Is(err, ErrBlocked) {
		t.Errorf("unlisted loopback address: %v, want ErrBlocked", err)
	}
	// A redirect away from the trusted host is checked as usual.
	if _, err := invoke(t, f, "http://127.0.0.1:"+port+"/go"); !errors.Is(err, ErrBlocked) {
		t.Errorf("redirect to another loopback address: %v, want ErrBlocked", err)
	}
	// Metadata addresses stay refused even when the operator lists one.
	if _, err := invoke(t, f, "http://169.254.169.254/latest/meta-data/"); !errors.Is(err, ErrBlocked) {
		t.Errorf("seeded metadata address: %v, want ErrBlocked", err)
	}
	if hits.Load() != 3 {
		t.Fatalf("hits = %d; only the trusted host may have been reached", hits.Load())
	}
}
