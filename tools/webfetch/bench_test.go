package webfetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkGateListed is the cost the fetch gate adds to a listed call:
// parse, canonicalise, load a 1000-entry allowlist and match.
func BenchmarkGateListed(b *testing.B) {
	st := NewMemStore()
	for i := range 1000 {
		st.AddDomain(context.Background(), fmt.Sprintf("site%d.example.com", i), "bench")
	}
	st.AddDomain(context.Background(), "*.docs.example.org", "bench")
	f, err := New(context.Background(), Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	in := fetchInput{URL: "https://a.b.docs.example.org/guide?page=2"}
	b.ReportAllocs()
	for b.Loop() {
		req, err := f.fetchGate(context.Background(), in)
		if err != nil || req.Required {
			b.Fatal(req, err)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical("Bücher.Example.COM."); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderHTML converts a body at the 2 MiB limit to Markdown:
// the worst case a single fetch can cost after the network.
func BenchmarkRenderHTML(b *testing.B) {
	var page bytes.Buffer
	page.WriteString("<html><head><title>t</title><style>p{}</style></head><body>")
	for i := 0; page.Len() < DefaultMaxBody; i++ {
		fmt.Fprintf(&page, `<h2>Section %d</h2><p>Some <b>bold</b> text with <a href="/p/%d">a link</a>.</p><ul><li>one</li><li>two</li></ul>`, i, i)
	}
	page.WriteString("</body></html>")
	body := page.Bytes()[:DefaultMaxBody]
	f, err := New(context.Background(), Config{Store: NewMemStore()})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("https://example.com/big")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{
			StatusCode: 200,
			Header:     http.Header{"Content-Type": {"text/html; charset=utf-8"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		out, err := f.render(context.Background(), u, resp)
		if err != nil || !strings.Contains(out, "Cut:") {
			b.Fatal(len(out), err)
		}
	}
}
