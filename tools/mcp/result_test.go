package mcp_test

import (
	"strings"
	"testing"

	"tollgate/tools/mcp"
)

// TestResultsAreTextTheModelCanRead: content the model cannot read is
// described, not dropped; structured content stands in for missing
// text; a tool's error is an error.
func TestResultsAreTextTheModelCanRead(t *testing.T) {
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: httpServer(t, newTestServer(false))}}}, mcp.Options{})
	out, err := h.call(t, "mcp.web.media", `{}`)
	want := "here:\n[image: image/png, 5 bytes]\n[audio: audio/wav, 3 bytes]\n[resource link: file:///a.txt (text/plain)]\n" +
		"[resource: file:///b.txt (text/plain)]\nbee\n[resource: file:///c.bin (application/octet-stream), 7 bytes]"
	if err != nil || out != want {
		t.Fatalf("media result %v:\n%s\nwant\n%s", err, out, want)
	}
	out, err = h.call(t, "mcp.web.structured", `{}`)
	if err != nil || out != `{"n":7}` {
		t.Fatalf("structured result %q, %v", out, err)
	}
	if _, err := h.call(t, "mcp.web.fail", `{}`); err == nil || err.Error() != "disk full" {
		t.Fatalf("failing tool: %v", err)
	}
}

// TestLongResultIsCutAndMarked: the model gets MaxResult bytes and a
// note of how much there was.
func TestLongResultIsCutAndMarked(t *testing.T) {
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: httpServer(t, newTestServer(false))}}}, mcp.Options{MaxResult: 100})
	out, err := h.call(t, "mcp.web.big", `{"size": 1000}`)
	if err != nil || out != strings.Repeat("x", 100)+"\n[result cut at 100 bytes of 1000]" {
		t.Fatalf("big result %q, %v", out, err)
	}
	out, err = h.call(t, "mcp.web.big", `{"size": 100}`)
	if err != nil || out != strings.Repeat("x", 100) {
		t.Fatalf("result of exactly MaxResult %q, %v", out, err)
	}
}
