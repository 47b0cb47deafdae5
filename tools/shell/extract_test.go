package shell

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// cmds is a shorthand for the Texts a row expects.
func cmds(texts ...string) []string { return texts }

func TestExtractListsEveryCommand(t *testing.T) {
	tests := []struct {
		in      string
		texts   []string
		writes  []string
		dynamic []string // the Texts that are Dynamic
	}{
		// Chains.
		{in: `pwd && rm -rf /`, texts: cmds("pwd", "rm -rf /")},
		{in: `a|b`, texts: cmds("a", "b")},
		{in: `a || b; c & d`, texts: cmds("a", "b", "c", "d")},
		{in: `a |& b`, texts: cmds("a", "b")},
		{in: `! git diff --quiet`, texts: cmds("git diff --quiet")},
		{in: "git status\nls -la\n", texts: cmds("git status", "ls -la")},
		{in: `(cd src && rm x)`, texts: cmds("cd src", "rm x")},
		{in: `{ ls; rm x; }`, texts: cmds("ls", "rm x")},
		{in: `if test -f a; then rm a; else touch a; fi`, texts: cmds("test -f a", "rm a", "touch a")},
		{in: `while read l; do echo "$l"; done`, texts: cmds("read l", `echo "$l"`)},
		{in: `until false; do break; done`, texts: cmds("false", "break")},
		{in: `case $x in a) rm a;; *) ls;; esac`, texts: cmds("rm a", "ls")},
		{in: `f() { rm x; }; f`, texts: cmds("rm x", "f")},
		{in: `time rm x`, texts: cmds("rm x")},
		{in: `coproc rm x`, texts: cmds("rm x")},
		// Substitutions.
		{in: `$(curl x)`, texts: cmds("$(curl x)", "curl x"), dynamic: cmds("$(curl x)")},
		{in: "echo `whoami`", texts: cmds("echo $(whoami)", "whoami")},
		{in: `echo "today: $(date)"`, texts: cmds(`echo "today: $(date)"`, "date")},
		{in: `diff <(ls a) <(ls b)`, texts: cmds("diff <(ls a) <(ls b)", "ls a", "ls b")},
		{in: `tee >(rm x)`, texts: cmds("tee >(rm x)", "rm x")},
		{in: `echo ${x:-$(rm y)}`, texts: cmds("echo ${x:-$(rm y)}", "rm y")},
		{in: `X=$(rm y) ls`, texts: cmds("X=$(rm y)", "ls", "rm y")},
		{in: `echo hi > "$(rm y)"`, texts: cmds("echo hi", "rm y"), writes: cmds(`"$(rm y)"`)},
		{in: `[[ -n $(rm x) ]]`, texts: cmds("[[ -n $(rm x) ]]", "rm x")},
		{in: `echo $(( $(rm x) + 1 ))`, texts: cmds("echo $(($(rm x) + 1))", "rm x"), dynamic: cmds("echo $(($(rm x) + 1))")},
		// Arithmetic, and a subscript a builtin evaluates, run what they
		// substitute: the command is dynamic, so no rule for it covers them.
		{in: `echo $(( 'a[$(rm x)]' ))`, texts: cmds(`echo $(('a[$(rm x)]'))`), dynamic: cmds(`echo $(('a[$(rm x)]'))`)},
		{in: `printf -v 'a[$(rm x)]' %s y`, texts: cmds(`printf -v 'a[$(rm x)]' %s y`), dynamic: cmds(`printf -v 'a[$(rm x)]' %s y`)},
		{in: `unset 'a[$(rm x)]'`, texts: cmds(`unset 'a[$(rm x)]'`), dynamic: cmds(`unset 'a[$(rm x)]'`)},
		{in: `read 'a[` + "`rm x`" + `]'`, texts: cmds(`read 'a[` + "`rm x`" + `]'`), dynamic: cmds(`read 'a[` + "`rm x`" + `]'`)},
		{in: `echo a[1] $(date)`, texts: cmds(`echo a[1] $(date)`, "date")},
		{in: `let "a = $(rm x)"`, texts: cmds(`let "a = $(rm x)"`, "rm x"), dynamic: cmds(`let "a = $(rm x)"`)},
		// Arithmetic runs the substitutions of a subscript in a string.
		{in: `git status; [[ 'a[$(rm x)]' -eq 0 ]]`, texts: cmds("git status", `[[ 'a[$(rm x)]' -eq 0 ]]`), dynamic: cmds(`[[ 'a[$(rm x)]' -eq 0 ]]`)},
		{in: `git status; [[ -v 'a[$(rm x)]' ]]`, texts: cmds("git status", `[[ -v 'a[$(rm x)]' ]]`), dynamic: cmds(`[[ -v 'a[$(rm x)]' ]]`)},
		{in: `git status; (( 'a[$(rm x)]' ))`, texts: cmds("git status", `(('a[$(rm x)]'))`), dynamic: cmds(`(('a[$(rm x)]'))`)},
		{in: `git status; let 'a[$(rm x)]'`, texts: cmds("git status", `let 'a[$(rm x)]'`), dynamic: cmds(`let 'a[$(rm x)]'`)},
		{in: `for ((i='a[$(rm x)]'; i<1; i++)); do :; done`, texts: cmds(`for ((i = 'a[$(rm x)]'; i < 1; i++))`, ":"), dynamic: cmds(`for ((i = 'a[$(rm x)]'; i < 1; i++))`)},
		{in: `[[ -f go.mod ]] && (( n > 1 ))`, texts: cmds("[[ -f go.mod ]]", "((n > 1))")},
		{in: `echo $(echo $(rm -rf /))`, texts: cmds("echo $(echo $(rm -rf /))", "echo $(rm -rf /)", "rm -rf /")},
		// Quoting, comments, continuations.
		{in: `echo "a && b" 'c; d'`, texts: cmds("echo 'a && b' 'c; d'")},
		{in: `echo 'rm -rf /' "| sh"`, texts: cmds("echo 'rm -rf /' '| sh'")},
		{in: `git  status`, texts: cmds("git status")},
		{in: `"git" 'status'`, texts: cmds("git status")},
		{in: `echo a\ b`, texts: cmds("echo 'a b'")},
		{in: "git \\\n  diff \\\n  src/a.go", texts: cmds("git diff src/a.go")},
		{in: "ls # && rm -rf /", texts: cmds("ls")},
		{in: "# only a comment", texts: nil},
		{in: `[ -f x ] && rm x`, texts: cmds("[ -f x ]", "rm x")},
		{in: `ls *.go`, texts: cmds("ls *.go")},
		{in: `rm '*'`, texts: cmds("rm '*'")},
		{in: `dd if=/dev/zero of=x`, texts: cmds("dd if=/dev/zero of=x")},
		// Here-documents and here-strings.
		{in: "cat <<EOF\nrm -rf /\nEOF", texts: cmds("cat")},
		{in: "cat <<EOF\n$(rm y)\nEOF", texts: cmds("cat", "rm y")},
		{in: "cat <<'EOF' > f\n$(rm y)\nEOF", texts: cmds("cat"), writes: cmds("f")},
		{in: `bash <<< 'rm x'`, texts: cmds("bash"), dynamic: cmds("bash")},
		// Redirections.
		{in: `echo hi > f`, texts: cmds("echo hi"), writes: cmds("f")},
		{in: `echo hi >> log 2>&1`, texts: cmds("echo hi"), writes: cmds("log")},
		{in: `make &> build.log`, texts: cmds("make"), writes: cmds("build.log")},
		{in: `cmd >/dev/null 2>/dev/null`, texts: cmds("cmd")},
		{in: `cmd >| f <> g >&h 3>&-`, texts: cmds("cmd"), writes: cmds("f", "g", "h")},
		{in: `exec 3> out`, texts: cmds("exec"), writes: cmds("out")},
		{in: `sort < in > 'my file'`, texts: cmds("sort"), writes: cmds("'my file'")},
		// Nested scripts.
		{in: `bash -c "rm x"`, texts: cmds("rm x")},
		{in: `sh -c 'ls; rm x'`, texts: cmds("ls", "rm x")},
		{in: `/bin/bash -lc 'git status'`, texts: cmds("git status")},
		{in: `bash -c 'bash -c "rm x"'`, texts: cmds("rm x")},
		{in: `bash -c "$CMD"`, texts: cmds(`bash -c "$CMD"`), dynamic: cmds(`bash -c "$CMD"`)},
		{in: `bash script.sh`, texts: cmds("bash script.sh"), dynamic: cmds("bash script.sh")},
		{in: `curl x | sh`, texts: cmds("curl x", "sh"), dynamic: cmds("sh")},
		{in: `eval 'rm x; ls'`, texts: cmds("rm x", "ls")},
		{in: `eval rm x`, texts: cmds("rm x")},
		{in: `eval "$x"`, texts: cmds(`eval "$x"`), dynamic: cmds(`eval "$x"`)},
		{in: `trap 'rm tmp' EXIT`, texts: cmds("rm tmp")},
		{in: `trap - EXIT`, texts: cmds("trap - EXIT")},
		{in: `source ./env.sh`, texts: cmds("source ./env.sh"), dynamic: cmds("source ./env.sh")},
		{in: `. ./env.sh`, texts: cmds("source ./env.sh"), dynamic: cmds("source ./env.sh")},
		// Wrappers.
		{in: `env X=1 rm x`, texts: cmds("X=1", "rm x")},
		{in: `env -i -u HOME PATH=/bin ls`, texts: cmds("PATH=/bin", "ls")},
		{in: `env`, texts: cmds("env")},
		{in: `env -S 'rm x'`, texts: cmds("env -S 'rm x'"), dynamic: cmds("env -S 'rm x'")},
		{in: `xargs rm`, texts: cmds("rm")},
		{in: `find . -name '*.tmp' | xargs -0 -n 1 rm -f`, texts: cmds("find . -name '*.tmp'", "rm -f")},
		{in: `xargs`, texts: cmds("echo")},
		{in: `xargs -I{} {} --version`, texts: cmds("{} --version"), dynamic: cmds("{} --version")},
		{in: `nice -n 5 ionice -c3 make`, texts: cmds("make")},
		{in: `nice -10 make`, texts: cmds("make")},
		{in: `timeout 5 git status`, texts: cmds("git status")},
		{in: `timeout -s KILL -k 1 5s rm x`, texts: cmds("rm x")},
		{in: `nohup rm x &`, texts: cmds("rm x")},
		{in: `command rm x`, texts: cmds("rm x")},
		{in: `command -v rm`, texts: cmds("command -v rm")},
		{in: `builtin cd /tmp`, texts: cmds("cd /tmp")},
		{in: `exec rm x`, texts: cmds("rm x")},
		{in: `sudo rm x`, texts: cmds("sudo rm x", "rm x")},
		{in: `sudo -u bob -E rm x`, texts: cmds("sudo -u bob -E rm x", "rm x")},
		{in: `sudo -i`, texts: cmds("sudo -i")},
		{in: `sudo --frobnicate x rm`, texts: cmds("sudo --frobnicate x rm"), dynamic: cmds("sudo --frobnicate x rm")},
		{in: `stdbuf -oL env nice rm x`, texts: cmds("rm x")},
		{in: `find . -exec rm {} \;`, texts: cmds("find . -exec rm {} ';'", "rm {}")},
		{in: `find . -execdir sh -c 'rm x' \;`, texts: cmds("find . -execdir sh -c 'rm x' ';'", "rm x")},
		{in: `find . -exec {} +`, texts: cmds("find . -exec {} +", "{}"), dynamic: cmds("{}")},
		// Names known only when they run.
		{in: `${x}rm`, texts: cmds("${x}rm"), dynamic: cmds("${x}rm")},
		{in: `$CMD -rf /`, texts: cmds("$CMD -rf /"), dynamic: cmds("$CMD -rf /")},
		{in: `$(which rm) x`, texts: cmds("$(which rm) x", "which rm"), dynamic: cmds("$(which rm) x")},
		{in: `./*`, texts: cmds("./*"), dynamic: cmds("./*")},
		{in: `{rm,x}`, texts: cmds("{rm,x}"), dynamic: cmds("{rm,x}")},
		{in: `~/bin/tool`, texts: cmds("~/bin/tool"), dynamic: cmds("~/bin/tool")},
		{in: `$'rm' x`, texts: cmds("$'rm' x"), dynamic: cmds("$'rm' x")},
		{in: `env $X rm`, texts: cmds("env $X rm"), dynamic: cmds("env $X rm")},
		// Variables.
		{in: `PATH=/tmp/evil; git status`, texts: cmds("PATH=/tmp/evil", "git status")},
		{in: `export A=$(id) B=2`, texts: cmds("export A=$(id) B=2", "id")},
		{in: `local x`, texts: cmds("local x")},
		{in: `for f in *.go; do gofmt -l "$f"; done`, texts: cmds("for f in *.go", `gofmt -l "$f"`)},
		{in: `X= ls`, texts: cmds("X=", "ls")},
	}
	if len(tests) < 60 {
		t.Fatalf("the table has %d rows; the issue asks for at least 60", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ex, err := Extract(tt.in)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			var texts, dynamic []string
			for _, c := range ex.Commands {
				texts = append(texts, c.Text)
				if c.Dynamic {
					dynamic = append(dynamic, c.Text)
				}
				if c.Text == "" || c.Name == "" {
					t.Errorf("command %+v has an empty Text or Name", c)
				}
			}
			if !slices.Equal(texts, tt.texts) {
				t.Errorf("Texts = %q, want %q", texts, tt.texts)
			}
			if !slices.Equal(ex.Writes, tt.writes) {
				t.Errorf("Writes = %q, want %q", ex.Writes, tt.writes)
			}
			if !slices.Equal(dynamic, tt.dynamic) {
				t.Errorf("Dynamic = %q, want %q", dynamic, tt.dynamic)
			}
		})
	}
}

func TestExtractNamesAndArgs(t *testing.T) {
	ex, err := Extract(`sudo -u bob env X=1 timeout 5 rm -rf 'a b' "$d"`)
	if err != nil {
		t.Fatal(err)
	}
	last := ex.Commands[len(ex.Commands)-1]
	if last.Name != "rm" || !slices.Equal(last.Args, []string{"-rf", "a b", `"$d"`}) || last.Text != `rm -rf 'a b' "$d"` {
		t.Errorf("peeled command = %+v", last)
	}
	if ex.Commands[0].Name != "sudo" || ex.Commands[1].Name != "X=" {
		t.Errorf("commands = %+v", ex.Commands)
	}
}

func TestExtractRefusesWhatDoesNotParse(t *testing.T) {
	for _, in := range []string{`echo "unclosed`, `ls &&`, `(ls`, `bash -c 'echo "x'`, `eval 'if'`, `trap '(' EXIT`} {
		_, err := Extract(in)
		if err == nil {
			t.Errorf("Extract(%q) = nil error, want a parse error", in)
			continue
		}
		if !strings.Contains(err.Error(), ":") || !strings.ContainsAny(err.Error(), "0123456789") {
			t.Errorf("Extract(%q) error %q names no position", in, err)
		}
	}
}

func TestExtractBoundsNesting(t *testing.T) {
	s := "rm x"
	for range maxDepth + 1 {
		s = "bash -c " + quote(s)
	}
	if _, err := Extract(s); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Extract of %d nested bash -c = %v, want ErrTooDeep", maxDepth+1, err)
	}
	s = "rm x"
	for range maxDepth {
		s = "bash -c " + quote(s)
	}
	ex, err := Extract(s)
	if err != nil || len(ex.Commands) != 1 || ex.Commands[0].Text != "rm x" {
		t.Errorf("Extract of %d nested bash -c = %+v, %v; want rm x", maxDepth, ex, err)
	}
}
