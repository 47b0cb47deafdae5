package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/prompt"
)

func TestWriteGateShowsTheDiff(t *testing.T) {
	w := newWorld(t)
	file(t, w.docs, "a.md", "one\ntwo\nthree\n")
	req, err := w.gate(t, ToolWrite, writeInput{Path: "docs/a.md", Content: "one\n2\nthree\nfour\n"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("one\ntwo\nthree\n"))
	want := prompt.Requirement{
		Required:    true,
		Reason:      "writes docs/a.md (+2 −1 lines)",
		PreviewName: "change.diff",
		Expect:      "sha256:" + hex.EncodeToString(sum[:]),
		Preview:     "--- a/docs/a.md\n+++ b/docs/a.md\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n",
	}
	if req != want {
		t.Errorf("requirement =\n%+v\nwant\n%+v", req, want)
	}
}

func TestWriteGateOfANewFile(t *testing.T) {
	w := newWorld(t)
	req, err := w.gate(t, ToolWrite, writeInput{Path: "docs/new.md", Content: "hello\n"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Expect != "absent" || req.Reason != "creates docs/new.md (new file, 1 lines)" ||
		!strings.Contains(req.Preview, "+++ b/docs/new.md\n@@ -0,0 +1 @@\n+hello\n") {
		t.Errorf("requirement = %+v", req)
	}
	if _, err := w.gate(t, ToolWrite, writeInput{Path: "docs/no/such/dir.md", Content: "x"}); err == nil ||
		!strings.Contains(err.Error(), "find the folder of docs/no/such/dir.md: no such file or folder") {
		t.Errorf("a missing folder: %v", err)
	}
	if _, err := w.gate(t, ToolWrite, writeInput{Path: "docs", Content: "x"}); err == nil ||
		!strings.Contains(err.Error(), "names the root folder") {
		t.Errorf("the root: %v", err)
	}
}

func TestWriteGateRefusesNoChange(t *testing.T) {
	w := newWorld(t)
	file(t, w.docs, "a.md", "same\n")
	if _, err := w.gate(t, ToolWrite, writeInput{Path: "docs/a.md", Content: "same\n"}); err == nil ||
		!strings.Contains(err.Error(), "no change") {
		t.Errorf("gate: %v, want no change", err)
	}
}

// The table of what an approved write finds when it runs.
func TestApprovedWrite(t *testing.T) {
	tests := []struct {
		name    string
		before  *string // nil: no file
		between func(t *testing.T, p string)
		who     string // "person" approved the diff, or a "rule" allowed it unseen
		err     error
		after   string
	}{
		{name: "unchanged: written", before: ptr("old\n"), who: "person", after: "new\n"},
		{name: "changed in between: refused", before: ptr("old\n"), who: "person", err: ErrChanged, after: "third party\n",
			between: func(t *testing.T, p string) { write(t, p, "third party\n") }},
		{name: "deleted in between: refused", before: ptr("old\n"), who: "person", err: ErrChanged,
			between: func(t *testing.T, p string) { os.Remove(p) }},
		{name: "new file created in between: refused", who: "person", err: ErrChanged, after: "third party\n",
			between: func(t *testing.T, p string) { write(t, p, "third party\n") }},
		{name: "new file: created", who: "person", after: "new\n"},
		{name: "changed in between, allowed unseen: written", before: ptr("old\n"), who: "rule", after: "new\n",
			between: func(t *testing.T, p string) { write(t, p, "third party\n") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := filepath.Join(w.docs, "a.md")
			if tt.before != nil {
				write(t, p, *tt.before)
			}
			in := writeInput{Path: "docs/a.md", Content: "new\n"}
			req, err := w.gate(t, ToolWrite, in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.between != nil {
				tt.between(t, p)
			}
			ci := prompt.CallInfo{}
			if tt.who == "person" {
				ci = approved(req)
			}
			out, err := w.invoke(t, ToolWrite, in, ci)
			if !errors.Is(err, tt.err) {
				t.Fatalf("invoke = %q, %v; want %v", out, err, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), "the file changed after the request was shown; nothing was written") {
				t.Errorf("the model is told %q", err)
			}
			got, rerr := os.ReadFile(p)
			if tt.after == "" {
				if !errors.Is(rerr, os.ErrNotExist) {
					t.Errorf("file = %q, %v; want none", got, rerr)
				}
			} else if string(got) != tt.after {
				t.Errorf("file = %q, want %q", got, tt.after)
			}
			assertNoTempFiles(t, w.docs)
		})
	}
}

func TestWriteKeepsTheModeAndLeavesNoTempFile(t *testing.T) {
	w := newWorld(t)
	p := file(t, w.docs, "sub/a.md", "old\n")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	in := writeInput{Path: "docs/sub/a.md", Content: "new\n"}
	req, err := w.gate(t, ToolWrite, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.invoke(t, ToolWrite, in, approved(req))
	if err != nil {
		t.Fatal(err)
	}
	if out != "Wrote docs/sub/a.md (4 bytes; +1 −1 lines)." {
		t.Errorf("result = %q", out)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	if got := content(t, p); got != "new\n" {
		t.Errorf("content = %q", got)
	}
	assertNoTempFiles(t, w.docs)

	if _, err := w.invoke(t, ToolWrite, writeInput{Path: "docs/fresh.md", Content: "x"}, prompt.CallInfo{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(w.docs, "fresh.md")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("new file: %v, %v; want mode 0644", fi, err)
	}
}

func TestEdit(t *testing.T) {
	tests := []struct {
		name             string
		before, old, new string
		err              string // in the gate's and invoke's error
		after            string
	}{
		{name: "one occurrence replaced exactly", before: "alpha\nbeta\ngamma\n", old: "beta", new: "BETA", after: "alpha\nBETA\ngamma\n"},
		{name: "zero refused", before: "alpha\n", old: "delta", new: "x", err: "old text found 0 times"},
		{name: "two refused", before: "alpha\nalpha\n", old: "alpha\n", new: "x", err: "old text found 2 times; give more context"},
		{name: "overlapping ones counted", before: "aaa\n", old: "aa", new: "x", err: "found 2 times"},
		{name: "empty old refused", before: "alpha\n", old: "", new: "x", err: "old text is empty"},
		{name: "no change refused", before: "alpha\n", old: "alpha", new: "alpha", err: "no change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			p := file(t, w.docs, "e.txt", tt.before)
			in := editInput{Path: "docs/e.txt", Old: tt.old, New: tt.new}
			req, gerr := w.gate(t, ToolEdit, in)
			if tt.err != "" {
				if gerr == nil || !strings.Contains(gerr.Error(), tt.err) {
					t.Errorf("gate: %v, want %q", gerr, tt.err)
				}
				out, err := w.invoke(t, ToolEdit, in, prompt.CallInfo{})
				if tt.err == "no change" {
					// Nobody was asked; there is nothing to do.
					if err != nil || !strings.Contains(out, "nothing was written") {
						t.Errorf("invoke = %q, %v", out, err)
					}
				} else if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("invoke: %v, want %q", err, tt.err)
				}
				if got := content(t, p); got != tt.before {
					t.Errorf("file = %q, want it untouched", got)
				}
				return
			}
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !strings.Contains(req.Preview, "-beta\n+BETA\n") || req.Reason != "writes docs/e.txt (+1 −1 lines)" {
				t.Errorf("requirement = %+v", req)
			}
			if _, err := w.invoke(t, ToolEdit, in, approved(req)); err != nil {
				t.Fatal(err)
			}
			if got := content(t, p); got != tt.after {
				t.Errorf("file = %q, want %q", got, tt.after)
			}
		})
	}
}

func TestEditChangedInBetween(t *testing.T) {
	w := newWorld(t)
	p := file(t, w.docs, "e.txt", "a\nb\n")
	in := editInput{Path: "docs/e.txt", Old: "b", New: "B"}
	req, err := w.gate(t, ToolEdit, in)
	if err != nil {
		t.Fatal(err)
	}
	// Still one "b", but not the file the diff was made from.
	write(t, p, "a\nb\nc\n")
	if _, err := w.invoke(t, ToolEdit, in, approved(req)); !errors.Is(err, ErrChanged) {
		t.Fatalf("invoke: %v, want ErrChanged", err)
	}
	if got := content(t, p); got != "a\nb\nc\n" {
		t.Errorf("file = %q, want the third party's", got)
	}
}

func TestReadOnlyRoot(t *testing.T) {
	w := newWorld(t)
	p := file(t, w.ref, "r.md", "ref needle\n")
	for _, c := range []struct {
		tool string
		in   any
	}{
		{ToolWrite, writeInput{Path: "ref/r.md", Content: "x"}},
		{ToolWrite, writeInput{Path: "ref/new.md", Content: "x"}},
		{ToolEdit, editInput{Path: "ref/r.md", Old: "ref", New: "x"}},
	} {
		if _, err := w.gate(t, c.tool, c.in); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "root ref is read-only") {
			t.Errorf("%s gate %+v: %v, want ErrReadOnly", c.tool, c.in, err)
		}
		if _, err := w.invoke(t, c.tool, c.in, prompt.CallInfo{}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s invoke %+v: %v, want ErrReadOnly", c.tool, c.in, err)
		}
	}
	if got := content(t, p); got != "ref needle\n" {
		t.Errorf("file = %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.ref, "new.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new.md: %v", err)
	}
	for _, c := range []struct {
		tool, want string
		in         any
	}{
		{ToolRead, "ref needle\n", readInput{Path: "ref/r.md"}},
		{ToolList, "file  r.md (11 bytes)", listInput{Path: "ref"}},
		{ToolSearch, "ref/r.md:1: ref needle\n", searchInput{Path: "ref", Pattern: "needle"}},
	} {
		got, err := w.invoke(t, c.tool, c.in, prompt.CallInfo{})
		if err != nil || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, %v; want %q", c.tool, got, err, c.want)
		}
	}
}

func ptr(s string) *string { return &s }

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}
