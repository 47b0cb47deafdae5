package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/prompt"
)

// escapeWorld is a world whose docs root holds links in and out.
func escapeWorld(t *testing.T) *world {
	w := newWorld(t)
	file(t, w.outside, "secret", "needle outside\n")
	file(t, w.docs, "sub/real.txt", "needle inside\n")
	file(t, w.ref, "x", "ref\n")
	symlink(t, "../outside/secret", filepath.Join(w.docs, "out.txt"))
	symlink(t, filepath.Join(w.outside, "secret"), filepath.Join(w.docs, "abs.txt"))
	symlink(t, "../outside", filepath.Join(w.docs, "outdir"))
	symlink(t, "sub/real.txt", filepath.Join(w.docs, "in.txt"))
	symlink(t, "sub", filepath.Join(w.docs, "indir"))
	symlink(t, "../sub/../../outside/secret", filepath.Join(w.docs, "sub/deep.txt"))
	return w
}

func TestReadStaysInItsRoot(t *testing.T) {
	w := escapeWorld(t)
	tests := []struct {
		path string
		want string // the content; "" when refused
		err  error  // when refused: errors.Is, else checked by text
		text string
	}{
		{path: "docs/sub/real.txt", want: "needle inside\n"},
		{path: "docs/in.txt", want: "needle inside\n"},
		{path: "docs/indir/real.txt", want: "needle inside\n"},
		{path: "docs/../ref/x", err: ErrOutside},
		{path: "docs/../outside/secret", err: ErrOutside},
		{path: "docs/sub/../../outside/secret", err: ErrOutside},
		{path: "/etc/passwd", err: ErrOutside},
		{path: filepath.Join(w.outside, "secret"), err: ErrOutside},
		{path: "docs/out.txt", err: ErrOutside},
		{path: "docs/abs.txt", err: ErrOutside},
		{path: "docs/outdir/secret", err: ErrOutside},
		{path: "docs/sub/deep.txt", err: ErrOutside},
		{path: "outside/secret", text: `no root named "outside"`},
		{path: "docs/./sub/real.txt", text: `without "." or empty segments`},
		{path: "docs//sub/real.txt", text: `without "." or empty segments`},
		{path: "", text: "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := w.invoke(t, ToolRead, readInput{Path: tt.path}, prompt.CallInfo{})
			switch {
			case tt.want != "":
				if err != nil || got != tt.want {
					t.Fatalf("read = %q, %v; want %q", got, err, tt.want)
				}
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("read = %q, %v; want %v", got, err, tt.err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tt.text) {
					t.Fatalf("read = %q, %v; want an error containing %q", got, err, tt.text)
				}
			}
			if err != nil && !strings.HasPrefix(tt.path, "/") && strings.Contains(err.Error(), w.outside) {
				t.Errorf("error %q shows a folder of this machine", err)
			}
		})
	}
}

func TestListAndSearchDoNotFollowLinksOut(t *testing.T) {
	w := escapeWorld(t)
	got, err := w.invoke(t, ToolList, listInput{Path: "docs"}, prompt.CallInfo{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"link  outdir -> ../outside", "dir   sub/", "link  in.txt -> sub/real.txt"} {
		if !strings.Contains(got, want) {
			t.Errorf("list docs = %q, want a line %q", got, want)
		}
	}
	if _, err := w.invoke(t, ToolList, listInput{Path: "docs/outdir"}, prompt.CallInfo{}); !errors.Is(err, ErrOutside) {
		t.Errorf("list docs/outdir: %v, want ErrOutside", err)
	}
	got, err = w.invoke(t, ToolSearch, searchInput{Path: "docs", Pattern: "needle"}, prompt.CallInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "docs/sub/real.txt:1: needle inside\n" {
		t.Errorf("search docs = %q, want the one match inside", got)
	}
	if _, err := w.invoke(t, ToolSearch, searchInput{Path: "docs/outdir", Pattern: "needle"}, prompt.CallInfo{}); !errors.Is(err, ErrOutside) {
		t.Errorf("search docs/outdir: %v, want ErrOutside", err)
	}
}

func TestWriteStaysInItsRoot(t *testing.T) {
	tests := []struct {
		name, path string
	}{
		{"dot-dot", "docs/../outside/secret"},
		{"absolute", "/tmp/x"},
		{"link to a file outside", "docs/out.txt"},
		{"absolute link", "docs/abs.txt"},
		{"link to a folder outside", "docs/outdir/new.txt"},
		{"link to a file outside, in a linked folder", "docs/indir/deep.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := escapeWorld(t)
			in := writeInput{Path: tt.path, Content: "pwned\n"}
			if _, err := w.gate(t, ToolWrite, in); !errors.Is(err, ErrOutside) {
				t.Errorf("gate: %v, want ErrOutside", err)
			}
			// As if a rule allowed it: nobody saw a diff.
			if _, err := w.invoke(t, ToolWrite, in, prompt.CallInfo{}); !errors.Is(err, ErrOutside) {
				t.Errorf("invoke: %v, want ErrOutside", err)
			}
			assertOutsideUntouched(t, w)
		})
	}
}

func assertOutsideUntouched(t *testing.T, w *world) {
	t.Helper()
	entries, err := os.ReadDir(w.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || content(t, filepath.Join(w.outside, "secret")) != "needle outside\n" {
		t.Errorf("outside changed: %v", entries)
	}
}

func TestWriteThroughALinkInsideWritesItsTarget(t *testing.T) {
	w := escapeWorld(t)
	in := writeInput{Path: "docs/in.txt", Content: "new\n"}
	req, err := w.gate(t, ToolWrite, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(req.Reason, "the file written is docs/sub/real.txt") {
		t.Errorf("reason %q does not say where the link leads", req.Reason)
	}
	if _, err := w.invoke(t, ToolWrite, in, approved(req)); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(w.docs, "sub/real.txt")); got != "new\n" {
		t.Errorf("target = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(w.docs, "in.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi, err)
	}
}

func TestLinkSwappedAfterTheGate(t *testing.T) {
	tests := []struct {
		name string
		path string
		// swap replaces, after the gate, something on path with a link out.
		swap func(t *testing.T, w *world)
	}{
		{"file becomes a link out", "docs/a.md", func(t *testing.T, w *world) {
			os.Remove(filepath.Join(w.docs, "a.md"))
			symlink(t, "../outside/secret", filepath.Join(w.docs, "a.md"))
		}},
		{"new file's name becomes a link out", "docs/new.md", func(t *testing.T, w *world) {
			symlink(t, "../outside/secret", filepath.Join(w.docs, "new.md"))
		}},
		{"folder becomes a link out", "docs/sub/b.md", func(t *testing.T, w *world) {
			if err := os.Rename(filepath.Join(w.docs, "sub"), filepath.Join(w.docs, "sub.old")); err != nil {
				t.Fatal(err)
			}
			symlink(t, "../outside", filepath.Join(w.docs, "sub"))
		}},
	}
	for _, tt := range tests {
		for _, who := range []string{"approved", "allowed by a rule"} {
			t.Run(tt.name+"/"+who, func(t *testing.T) {
				w := newWorld(t)
				file(t, w.outside, "secret", "needle outside\n")
				file(t, w.docs, "a.md", "a\n")
				file(t, w.docs, "sub/b.md", "b\n")
				in := writeInput{Path: tt.path, Content: "pwned\n"}
				req, err := w.gate(t, ToolWrite, in)
				if err != nil {
					t.Fatal(err)
				}
				tt.swap(t, w)
				ci := prompt.CallInfo{}
				if who == "approved" {
					ci = approved(req)
				}
				if _, err := w.invoke(t, ToolWrite, in, ci); !errors.Is(err, ErrOutside) {
					t.Errorf("invoke: %v, want ErrOutside", err)
				}
				assertOutsideUntouched(t, w)
			})
		}
	}
}

// A link swapped in after the write looked at the path, just before the
// rename, is replaced itself: rename does not follow it.
func TestReplaceFileReplacesALinkNotItsTarget(t *testing.T) {
	w := newWorld(t)
	file(t, w.outside, "secret", "needle outside\n")
	symlink(t, "../outside/secret", filepath.Join(w.docs, "a.md"))
	if err := replaceFile(w.f.roots["docs"].fs, "a.md", []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	assertOutsideUntouched(t, w)
	if fi, err := os.Lstat(filepath.Join(w.docs, "a.md")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("a.md: %v, %v; want a regular file", fi, err)
	}
	if got := content(t, filepath.Join(w.docs, "a.md")); got != "new\n" {
		t.Errorf("a.md = %q", got)
	}
}
