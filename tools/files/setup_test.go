package files

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"tollgate/prompt"
)

// world is a Files over two roots in a temp dir: docs (rw) and ref (ro),
// beside a folder outside both that nothing may reach.
type world struct {
	f                  *Files
	docs, ref, outside string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	w := &world{docs: filepath.Join(base, "docs"), ref: filepath.Join(base, "ref"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{w.docs, w.ref, w.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(t.Context(), Config{Roots: []Root{
		{Name: "docs", Path: w.docs, Writable: true},
		{Name: "ref", Path: w.ref},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	w.f = f
	return w
}

// file writes content at name under dir, making its folders.
func file(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func symlink(t *testing.T, dest, at string) {
	t.Helper()
	if err := os.Symlink(dest, at); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *world) tool(t *testing.T, name string) *prompt.Tool {
	t.Helper()
	for _, tl := range w.f.Tools() {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func input(t *testing.T, in any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gate runs the gate of tool name on in.
func (w *world) gate(t *testing.T, name string, in any) (prompt.Requirement, error) {
	t.Helper()
	tl := w.tool(t, name)
	if tl.Gate == nil {
		t.Fatalf("%s has no gate", name)
	}
	return tl.Gate(t.Context(), input(t, in))
}

// invoke runs tool name on in as the call ci.
func (w *world) invoke(t *testing.T, name string, in any, ci prompt.CallInfo) (string, error) {
	t.Helper()
	return w.tool(t, name).Invoke(prompt.ContextWithCall(t.Context(), ci), input(t, in))
}

// approved is the call a person approved after seeing req.
func approved(req prompt.Requirement) prompt.CallInfo {
	return prompt.CallInfo{Approved: true, ApprovedBy: "alice", Expect: req.Expect}
}
