package files

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"tollgate/prompt"
)

func TestRead(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "line %02d\n", i) // 8 bytes each
		}
		return b.String()
	}
	tests := []struct {
		name    string
		content string
		in      readInput
		want    string // the whole result
		err     error
		errText string
	}{
		{name: "whole", content: "a\nb", in: readInput{}, want: "a\nb"},
		{name: "empty", content: "", want: "[docs/f is empty]"},
		{name: "offset and limit", content: lines(5), in: readInput{Offset: 2, Limit: 2},
			want: "line 02\nline 03\n\n[lines 2-3 of docs/f; more follow: read on with offset=4]"},
		{name: "limit reaching the end", content: lines(3), in: readInput{Offset: 2, Limit: 2}, want: "line 02\nline 03\n"},
		{name: "past the end", content: lines(3), in: readInput{Offset: 9}, want: "[docs/f has 3 lines; offset 9 is past its end]"},
		{name: "cut at MaxRead on a line end", content: lines(10), in: readInput{},
			want: "line 01\nline 02\nline 03\nline 04\n\n[cut at 32 bytes: lines 1-4 of docs/f; more follow: read on with offset=5]"},
		{name: "one long line cut", content: strings.Repeat("x", 50) + "\n", in: readInput{},
			want: strings.Repeat("x", 36) + "\n[line 1 of docs/f is cut at 36 bytes]"},
		{name: "NUL refused", content: "text\x00more", err: ErrBinary},
		{name: "not UTF-8 refused", content: "caf\xe9\n", err: ErrBinary},
		{name: "negative offset", content: "a", in: readInput{Offset: -1}, errText: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			f, err := New(t.Context(), Config{Roots: []Root{{Name: "docs", Path: w.docs}}, MaxRead: 36})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w.f = f
			file(t, w.docs, "f", tt.content)
			tt.in.Path = "docs/f"
			got, err := w.invoke(t, ToolRead, tt.in, prompt.CallInfo{})
			switch {
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("read = %q, %v; want %v", got, err, tt.err)
				}
			case tt.errText != "":
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("read = %q, %v; want %q", got, err, tt.errText)
				}
			case err != nil || got != tt.want:
				t.Fatalf("read = %q, %v;\nwant %q", got, err, tt.want)
			}
		})
	}
}

func TestReadAFolderPointsToList(t *testing.T) {
	w := newWorld(t)
	if _, err := w.invoke(t, ToolRead, readInput{Path: "docs"}, prompt.CallInfo{}); err == nil || !strings.Contains(err.Error(), "is a folder; list it with files.list") {
		t.Fatalf("read docs: %v", err)
	}
}

func TestSearch(t *testing.T) {
	w := newWorld(t)
	for i := range 3 {
		file(t, w.docs, fmt.Sprintf("d%d/f.txt", i), strings.Repeat("hit here\n", 4))
	}
	file(t, w.docs, "bin.dat", "hit\x00")
	file(t, w.docs, ".git/config", "hit in git\n")
	file(t, w.docs, "long.txt", "hit "+strings.Repeat("y", 500)+"\n")
	tests := []struct {
		name string
		in   searchInput
		want []string // lines of the result, in order
	}{
		{name: "capped", in: searchInput{Path: "docs", Pattern: "hit", Max: 5}, want: []string{
			"docs/d0/f.txt:1: hit here", "docs/d0/f.txt:2: hit here", "docs/d0/f.txt:3: hit here", "docs/d0/f.txt:4: hit here",
			"docs/d1/f.txt:1: hit here", "[stopped at 5 matching lines; narrow the path or pattern]", "[1 files skipped: not text, or over 1048576 bytes]",
		}},
		{name: "one file", in: searchInput{Path: "docs/d2/f.txt", Pattern: "here", Max: 2}, want: []string{
			"docs/d2/f.txt:1: hit here", "docs/d2/f.txt:2: hit here", "[stopped at 2 matching lines; narrow the path or pattern]",
		}},
		{name: "regexp, long line cut", in: searchInput{Path: "docs", Pattern: "^hit y+$", Regexp: true}, want: []string{
			"docs/long.txt:1: hit " + strings.Repeat("y", maxMatchLineText-4) + "…", "[1 files skipped: not text, or over 1048576 bytes]",
		}},
		{name: "none", in: searchInput{Path: "docs/d1", Pattern: "absent"}, want: []string{"[no match in 1 files under docs/d1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.invoke(t, ToolSearch, tt.in, prompt.CallInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(tt.want, "\n") + "\n"; got != want {
				t.Errorf("search =\n%s\nwant\n%s", got, want)
			}
		})
	}
	if _, err := w.invoke(t, ToolSearch, searchInput{Path: "docs", Pattern: "(", Regexp: true}, prompt.CallInfo{}); err == nil || !strings.HasPrefix(err.Error(), "pattern:") {
		t.Errorf("a bad regexp: %v", err)
	}
}

func TestListIsCapped(t *testing.T) {
	w := newWorld(t)
	for i := range maxEntries + 3 {
		file(t, w.docs, fmt.Sprintf("f%04d", i), "")
	}
	got, err := w.invoke(t, ToolList, listInput{Path: "docs/"}, prompt.CallInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, fmt.Sprintf("docs: %d entries\nfile  f0000 (0 bytes)\n", maxEntries+3)) || !strings.HasSuffix(got, "[3 more not shown]\n") {
		t.Errorf("list = %.200q … %q", got, got[len(got)-60:])
	}
}
