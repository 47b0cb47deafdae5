package shell

import (
	"context"
	"strings"
	"testing"

	"tollgate/prompt"
)

func TestToolDeclaresItself(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	if tool.Effect != prompt.EffectExecute || tool.Parts == nil || tool.Scope == nil || tool.Gate == nil {
		t.Errorf("tool = %+v", tool)
	}
	if len(tool.Fields) != 1 || tool.Fields[0] != (prompt.Field{Name: "name", Kind: prompt.FieldText}) {
		t.Errorf("Fields = %v", tool.Fields)
	}
	if _, ok := tool.Schema.Properties["command"]; !ok {
		t.Errorf("schema has no command property: %v", tool.Schema.Properties)
	}
}

func TestGatePreviewListsCommandsAndWrites(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	req, err := tool.Gate(context.Background(), input(t, "git status && $CMD > out.txt; echo hi >> log", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := "git status\n$CMD    # decided when it runs\necho hi\nwrites: out.txt\nwrites: log\n"
	if !req.Required || req.Preview != want || req.PreviewName != "commands.txt" {
		t.Errorf("requirement = %+v, want preview %q", req, want)
	}
	if !strings.HasPrefix(req.Reason, "runs 3 commands in ") || !strings.Contains(req.Reason, "1 is decided only when it runs") ||
		!strings.Contains(req.Reason, "writes 2 files") {
		t.Errorf("Reason = %q", req.Reason)
	}
}

func TestGateAsksForWhatDoesNotParse(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	in := input(t, `echo "unclosed`, "")
	req, err := tool.Gate(context.Background(), in)
	if err != nil {
		t.Fatalf("Gate = %v; a parse error must ask, not refuse", err)
	}
	if !req.Required || !strings.Contains(req.Reason, "could not be parsed") || req.Preview != `echo "unclosed` {
		t.Errorf("requirement = %+v", req)
	}
	if _, err := tool.Parts(in); err == nil {
		t.Error("Parts of an unparsable script: no error")
	}
	sc, err := tool.Scope(in)
	if err != nil || sc.Key != `script:echo "unclosed` {
		t.Errorf("Scope = %+v, %v; want the exact script", sc, err)
	}
}

func TestGateRefusesDirsOutside(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	for _, dir := range []string{"..", "/etc", "a/../../b"} {
		if _, err := tool.Gate(context.Background(), input(t, "ls", dir)); err == nil {
			t.Errorf("dir %q: the gate would ask", dir)
		}
	}
}

func TestPartsAreCommandsAndWrites(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	parts, err := tool.Parts(input(t, "git diff src/a.go | ${x}rm > f", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := []prompt.Part{
		{Label: "git diff src/a.go", Fields: map[string]string{"command": "git diff src/a.go", "name": "git"}},
		{Label: "${x}rm", Fields: map[string]string{"command": "${x}rm", "name": "${x}rm"}, Dynamic: true},
		{Label: "writes f", Fields: map[string]string{"command": "> f", "name": ">"}},
	}
	if len(parts) != len(want) {
		t.Fatalf("parts = %+v", parts)
	}
	for i := range want {
		p, w := parts[i], want[i]
		if p.Label != w.Label || p.Dynamic != w.Dynamic || p.Fields["command"] != w.Fields["command"] || p.Fields["name"] != w.Fields["name"] {
			t.Errorf("part %d = %+v, want %+v", i, p, w)
		}
	}
}

func TestScopeIsTheExactList(t *testing.T) {
	_, tool := newShell(t, Config{}, nil)
	key := func(command, dir string) string {
		t.Helper()
		sc, err := tool.Scope(input(t, command, dir))
		if err != nil || sc.Key == "" || sc.Label == "" {
			t.Fatalf("Scope(%q) = %+v, %v", command, sc, err)
		}
		return sc.Key
	}
	same := [][2]string{
		{"git status", "git  status"},
		{"git status", "'git' \"status\""},
		{"git status; ls -la", "git status && ls -la"},
		{"echo hi > f", "echo hi >f"},
	}
	for _, p := range same {
		if key(p[0], "") != key(p[1], "") {
			t.Errorf("%q and %q have different scopes", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"git status", "git status; rm x"},
		{"git status; ls", "ls; git status"},
		{"git status", "sudo git status"},
		{"git status", "PATH=/tmp git status"},
		{"echo hi > a", "echo hi > b"},
		{"rm -rf $X", "X=/; rm -rf $X"},
		{"cat <<EOF\na\nEOF", "cat <<EOF\nb\nEOF"},
		{"git status", "git status; [[ 'a[$(rm x)]' -eq 0 ]]"},
	}
	for _, p := range differ {
		if key(p[0], "") == key(p[1], "") {
			t.Errorf("%q and %q share a scope", p[0], p[1])
		}
	}
	if key("rm -rf build", "") == key("rm -rf build", "sub") {
		t.Error("the same command in another dir shares a scope")
	}
	if got := key("git status; ls -la", ""); got != "commands:git status\nls -la" {
		t.Errorf("key = %q", got)
	}
	sc, _ := tool.Scope(input(t, "git status; ls -la", ""))
	if sc.Label != "exactly: git status; ls -la" {
		t.Errorf("Label = %q", sc.Label)
	}
	sc, _ = tool.Scope(input(t, "echo "+strings.Repeat("x", 500), ""))
	if n := len([]rune(sc.Label)); n > maxLabel+len("exactly: ") {
		t.Errorf("Label of a long command has %d runes", n)
	}
}
