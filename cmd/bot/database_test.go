package main

import (
	"strings"
	"testing"
)

// The URL logged at start never carries the password.
func TestRedactURLHidesThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "",
		"postgres://u:s3cret@db/tollgate": "postgres://u:xxxxx@db/tollgate",
		"host=db user=u password=s3cret":  "(set)",
	} {
		got := redactURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
