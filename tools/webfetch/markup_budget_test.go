package webfetch

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
)

func renderPage(t *testing.T, f *Fetcher, page string) string {
	t.Helper()
	u, _ := url.Parse("https://example.com/p")
	out, err := f.render(context.Background(), u, &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/html"}},
		Body:       io.NopCloser(strings.NewReader(page)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostileMarkupAllocationIsBounded: a 2 MiB page of markup with no
// text cost up to 1.1 GiB allocated in one conversion; the bound here
// is a twentieth of that, far above what the scan needs.
func TestHostileMarkupAllocationIsBounded(t *testing.T) {
	f := newFetcher(t, Config{})
	for name, body := range hostilePages() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		renderPage(t, f, string(body))
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
			t.Errorf("%s: one render allocated %d MiB", name, n>>20)
		}
	}
}

// TestTooMuchMarkupIsReadAsPlainText: past the element or depth bound
// the text is still there, without formatting, and the model is told.
func TestTooMuchMarkupIsReadAsPlainText(t *testing.T) {
	f := newFetcher(t, Config{})
	for name, page := range map[string]string{
		"deep":                            strings.Repeat("<div>", 300000) + "deep text",
		"many":                            strings.Repeat("<a>", maxElements+1) + "<p>many text</p><script>hidden()</script>",
		"just deep enough for the parser": strings.Repeat("<section>", maxDepth+1) + "deep text",
	} {
		out := renderPage(t, f, page)
		if !strings.Contains(out, "text is shown without formatting") || !strings.Contains(out, "text") || strings.Contains(out, "hidden()") {
			t.Errorf("%s: output %q", name, out[:min(len(out), 300)])
		}
	}
	// An ordinary page is converted as before.
	out := renderPage(t, f, "<ul>"+strings.Repeat("<li>item", 2000)+"</ul><h1>Title</h1>")
	if strings.Contains(out, "without formatting") || !strings.Contains(out, "# Title") {
		t.Errorf("ordinary page: %q", out[len(out)-200:])
	}
}

// TestHugeTagIsCut: one tag of a million attributes is one token; the
// scan stops before it and converts what came first.
func TestHugeTagIsCut(t *testing.T) {
	f := newFetcher(t, Config{})
	var page bytes.Buffer
	page.WriteString("<h1>Before</h1><div ")
	page.WriteString(strings.Repeat("a ", 1<<20))
	page.WriteString(">after</div>")
	out := renderPage(t, f, page.String())
	if !strings.Contains(out, "# Before") || strings.Contains(out, "after") || !strings.Contains(out, "could not be read") {
		t.Errorf("output %q", out)
	}
}
