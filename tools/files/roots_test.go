package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRoots(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	colon := filepath.Join(dir, "a:b")
	if err := os.Mkdir(colon, 0o755); err != nil {
		t.Fatal(err)
	}
	notDir := file(t, dir, "plain.txt", "x")
	tests := []struct {
		name, spec string
		want       []Root
		err        string // in the error; "" for none
	}{
		{name: "empty", spec: "", want: nil},
		{name: "one ro", spec: "docs:" + dir + ":ro", want: []Root{{Name: "docs", Path: dir}}},
		{name: "two with spaces and a blank", spec: " docs:" + dir + ":rw , ,src_1-x:" + other + ":ro",
			want: []Root{{Name: "docs", Path: dir, Writable: true}, {Name: "src_1-x", Path: other}}},
		{name: "colon in path", spec: "c:" + colon + ":rw", want: []Root{{Name: "c", Path: colon, Writable: true}}},
		{name: "no mode", spec: "docs:" + dir, err: "want name:path:ro or name:path:rw"},
		{name: "name only", spec: "docs", err: "want name:path:ro or name:path:rw"},
		{name: "bad mode", spec: "docs:" + dir + ":wr", err: `mode "wr" is not ro or rw`},
		{name: "no path", spec: "docs::ro", err: "no path"},
		{name: "upper-case name", spec: "Docs:" + dir + ":ro", err: `name "Docs" must match`},
		{name: "empty name", spec: ":" + dir + ":ro", err: `name "" must match`},
		{name: "name with a slash", spec: "a/b:" + dir + ":ro", err: "must match"},
		{name: "duplicate", spec: "docs:" + dir + ":ro,docs:" + other + ":rw", err: `name "docs" is used twice`},
		{name: "missing folder", spec: "docs:" + filepath.Join(dir, "nope") + ":ro", err: "no such file"},
		{name: "a file", spec: "docs:" + notDir + ":ro", err: "is not a folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRoots(tt.spec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseRoots(%q) error = %v, want one containing %q", tt.spec, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRoots(%q): %v", tt.spec, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("root %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseRootsErrorNamesTheEntry(t *testing.T) {
	dir := t.TempDir()
	_, err := ParseRoots("good:" + dir + ":ro,bad:" + dir + ":xx")
	if err == nil || !strings.Contains(err.Error(), `"bad:`+dir+`:xx"`) {
		t.Fatalf("error = %v, want it to quote the bad entry", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"no roots", Config{}, "no roots"},
		{"negative MaxRead", Config{Roots: []Root{{Name: "a", Path: dir}}, MaxRead: -1}, "MaxRead"},
		{"duplicate", Config{Roots: []Root{{Name: "a", Path: dir}, {Name: "a", Path: dir}}}, "root a: name \"a\" is used twice"},
		{"missing", Config{Roots: []Root{{Name: "a", Path: filepath.Join(dir, "gone")}}}, "root a:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(t.Context(), tt.cfg)
			if err == nil {
				f.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestToolsDeclareEffectsFieldsAndScope(t *testing.T) {
	w := newWorld(t)
	for _, tl := range w.f.Tools() {
		wantWrite := tl.Name == ToolWrite || tl.Name == ToolEdit
		if wantWrite != (tl.Effect == "write") || (tl.Gate != nil) != wantWrite {
			t.Errorf("%s: effect %q, gate %v", tl.Name, tl.Effect, tl.Gate != nil)
		}
		if !strings.Contains(tl.Description, "docs (read-write), ref (read-only)") {
			t.Errorf("%s: description %q does not name the roots", tl.Name, tl.Description)
		}
		fields, err := tl.Derive(input(t, map[string]string{"path": "docs/a/b.md/"}))
		if err != nil || fields["path"] != "docs/a/b.md" || fields["root"] != "docs" {
			t.Errorf("%s: Derive = %v, %v", tl.Name, fields, err)
		}
	}
	sc, err := w.tool(t, ToolWrite).Scope(input(t, map[string]string{"path": "docs/a.md", "content": "x"}))
	if err != nil || sc.Key != "path:docs/a.md" || sc.Label != "writes to docs/a.md" {
		t.Errorf("write scope = %+v, %v", sc, err)
	}
}
