package webfetch

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// hostilePages are bodies at the 2 MiB limit made of markup with no
// text: the pages that cost the most memory per byte to convert.
func hostilePages() map[string][]byte {
	fill := func(unit string) []byte {
		return []byte(strings.Repeat(unit, DefaultMaxBody/len(unit)))
	}
	attrs := []byte("<div " + strings.Repeat("a ", DefaultMaxBody/2-4) + ">")
	return map[string][]byte{
		"nested-divs":  fill("<div>"),
		"sibling-divs": fill("<div></div>"),
		"anchors":      fill("<a>"),
		"links":        fill(`<a href="/x">`),
		"attributes":   attrs,
		"table-cells":  fill("<td>"),
	}
}

// heapPeak samples HeapInuse while it runs, so a benchmark can report
// the peak of one conversion and not only what it allocated in total.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	done sync.WaitGroup
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-h.stop:
				return
			default:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > h.peak.Load() {
				h.peak.Store(ms.HeapInuse - base)
			}
			runtime.Gosched()
		}
	}()
	return h
}

func (h *heapPeak) end() uint64 {
	close(h.stop)
	h.done.Wait()
	return h.peak.Load()
}

// BenchmarkRenderHostileMarkup renders each hostile page and reports,
// besides the usual allocation figures, peak-B/op: the highest heap in
// use above the start, sampled while the conversions ran.
func BenchmarkRenderHostileMarkup(b *testing.B) {
	f, err := New(context.Background(), Config{Store: NewMemStore()})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("https://example.com/hostile")
	for name, body := range hostilePages() {
		b.Run(name, func(b *testing.B) {
			runtime.GC()
			peak := startHeapPeak()
			b.ReportAllocs()
			for b.Loop() {
				resp := &http.Response{
					StatusCode: 200,
					Header:     http.Header{"Content-Type": {"text/html; charset=utf-8"}},
					Body:       io.NopCloser(bytes.NewReader(body)),
				}
				if _, err := f.render(context.Background(), u, resp); err != nil {
					b.Log(err)
				}
			}
			b.ReportMetric(float64(peak.end()), "peak-B/op")
		})
	}
}
