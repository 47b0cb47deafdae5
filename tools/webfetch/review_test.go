package webfetch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
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
