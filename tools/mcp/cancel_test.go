package mcp_test

import (
	"strings"
	"testing"
	"time"

	"tollgate/tools/mcp"
)

// TestHangingCallIsCancelled: a call that outlives the timeout fails
// with a message for the model, and the server learns of it
// (notifications/cancelled ends the handler's context) while the
// session stays up for the next call.
func TestHangingCallIsCancelled(t *testing.T) {
	h := start(t, mcp.Config{Servers: []mcp.Server{stdioServer(t, "s", false, nil)}}, mcp.Options{Timeout: 2 * time.Second})
	_, err := h.call(t, "mcp.s.slow", `{}`)
	if err == nil || err.Error() != "timed out after 2s; the call was cancelled" {
		t.Fatalf("slow call: %v", err)
	}
	out, err := h.call(t, "mcp.s.cancelled", `{}`)
	if err != nil || !strings.Contains(out, "slow ended: context canceled") {
		t.Fatalf("the server did not see the cancellation: %q, %v", out, err)
	}
}
