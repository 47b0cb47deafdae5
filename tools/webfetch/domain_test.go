package webfetch

import (
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want string
		err      string // substring; "" means success
	}{
		{in: "example.com", want: "example.com"},
		{in: "  Example.COM  ", want: "example.com"},
		{in: "example.com.", want: "example.com"},
		{in: "*.Example.com.", want: "*.example.com"},
		{in: "bücher.de", want: "xn--bcher-kva.de"},
		{in: "xn--bcher-kva.de", want: "xn--bcher-kva.de"},
		{in: "ＥＸＡＭＰＬＥ．com", want: "example.com"},
		{in: "localhost", want: "localhost"},
		{in: "127.0.0.1", want: "127.0.0.1"},
		{in: "127.0.0.1.", want: "127.0.0.1"},
		{in: "[::1]", want: "::1"},
		{in: "::FFFF:127.0.0.1", want: "::ffff:127.0.0.1"},
		{in: "", err: "empty"},
		{in: "   ", err: "empty"},
		{in: "example.com..", err: "empty label"},
		{in: "example..com", err: "not a valid host name"},
		{in: "https://example.com", err: "is a URL"},
		{in: "example.com/path", err: "not a host name"},
		{in: "example.com:443", err: "without a port"},
		{in: "user@example.com", err: "not a host name"},
		{in: "example%2ecom", err: "not a host name"},
		{in: "ex*ample.com", err: "wildcard"},
		{in: "*example.com", err: "wildcard"},
		{in: "a.*.example.com", err: "wildcard"},
		{in: "*.*.example.com", err: "wildcard"},
		{in: "*.127.0.0.1", err: "wildcard needs a domain"},
		{in: "-example.com", err: "not a valid host name"},
		{in: "exa_mple.com", err: "not a valid host name"},
		{in: strings.Repeat("a", 64) + ".com", err: "not a valid host name"},
		{in: "127.1", err: "non-standard form"},
		{in: "0x7f000001", err: "non-standard form"},
		{in: "2130706433", err: "non-standard form"},
		{in: "0177.0.0.1", err: "non-standard form"},
		{in: "fe80::1%eth0", err: "not a host name"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Canonical(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestAllowlistMatches(t *testing.T) {
	a := newAllowlist([]string{"example.com", "*.docs.example.org", "127.0.0.1"}, nil)
	tests := []struct {
		host string
		want bool
	}{
		{"example.com", true},
		{"www.example.com", false}, // an exact entry lists only itself
		{"evil-example.com", false},
		{"example.com.evil.net", false},
		{"notexample.com", false},
		{"docs.example.org", false}, // a wildcard never lists its apex
		{"a.docs.example.org", true},
		{"a.b.docs.example.org", true},
		{"evil-docs.example.org", false},
		{"docs.example.org.evil.net", false},
		{"127.0.0.1", true},
		{"127.0.0.2", false},
		{"org", false},
	}
	for _, tt := range tests {
		if got := a.matches(tt.host); got != tt.want {
			t.Errorf("matches(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
