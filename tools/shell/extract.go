package shell

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Command is one simple command a shell script runs.
type Command struct {
	// Name is the command run, after the wrappers that only run another
	// command (env, nice, timeout, nohup, command, exec, sudo, xargs, …)
	// are peeled: "rm". For a variable set on its own it is the variable
	// and "=" ("PATH="); for a loop variable it is "for".
	Name string
	// Args are its arguments as the shell would pass them where statically
	// known; a word with an expansion or a glob is given as written.
	Args []string
	// Text is the command on one line for rules and display: Name and
	// Args joined by single spaces, a static word shell-quoted only if it
	// needs it ("git diff src/a.go", "echo 'a b'"), any other as written.
	Text string
	// Dynamic is set when what runs is not known before it runs: the name
	// (or a word that decides what runs) comes from a variable, a
	// substitution, a glob or another runtime value, or the command runs
	// a script no rule can see (bash script.sh, source f, eval "$x").
	Dynamic bool
}

// Extraction is what a script runs.
type Extraction struct {
	// Commands are in source order, including those inside substitutions
	// and nested bash -c, eval and trap strings.
	Commands []Command
	// Writes are the targets of redirections that write files (>, >>,
	// &>, >|, <>, >&file), as shown in Text; not fd duplications (2>&1)
	// and not /dev/null, /dev/stdout, /dev/stderr.
	Writes []string

	// exact is set when every word of every command is known before the
	// script runs and no here-document feeds one: then the list of
	// commands and writes says all the script does.
	exact bool
}

// maxDepth bounds how deep bash -c, eval and trap strings nest.
const maxDepth = 8

// ErrTooDeep is returned by Extract for strings nested beyond maxDepth.
var ErrTooDeep = fmt.Errorf("bash -c, eval or trap strings nested more than %d deep", maxDepth)

// Extract parses command as bash and lists what it runs. A parse error,
// of the script or of a nested bash -c, eval or trap string, is an error
// naming the line and column; ErrTooDeep is returned for strings nested
// too deep.
func Extract(command string) (Extraction, error) {
	x := extractor{out: Extraction{exact: true}}
	if err := x.script(command, 0); err != nil {
		return Extraction{}, err
	}
	return x.out, nil
}

type extractor struct {
	out Extraction
}

func (x *extractor) script(src string, depth int) error {
	if depth > maxDepth {
		return ErrTooDeep
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	var werr error
	syntax.Walk(f, func(n syntax.Node) bool {
		if werr != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.Stmt:
			x.redirects(n.Redirs)
		case *syntax.CallExpr:
			for _, a := range n.Assigns {
				x.assign(a)
			}
			if len(n.Args) > 0 {
				werr = x.run(words(n.Args), depth)
			}
		case *syntax.DeclClause:
			x.decl(n)
		case *syntax.WordIter:
			x.loop(n)
		case *syntax.TestClause:
			x.arithm("[[", printed(n))
		case *syntax.ArithmCmd:
			x.arithm("((", printed(n))
		case *syntax.LetClause:
			x.arithm("let", printed(n))
		case *syntax.CStyleLoop:
			var ex []string
			for _, e := range []syntax.ArithmExpr{n.Init, n.Cond, n.Post} {
				t := ""
				if e != nil {
					t = strings.TrimSuffix(strings.TrimPrefix(printed(&syntax.ArithmCmd{X: e}), "(("), "))")
				}
				ex = append(ex, t)
			}
			x.arithm("for", "for (("+strings.Join(ex, "; ")+"))")
		}
		return true
	})
	return werr
}

// word is a shell word as the extractor sees it.
type word struct {
	value  string // the value the shell gives it, if static
	static bool   // only literals and quotes: no expansion, glob, brace or tilde
	text   string // canonical one-line form
}

func words(ws []*syntax.Word) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		out[i] = wordOf(w)
	}
	return out
}

func wordOf(w *syntax.Word) word {
	if v, ok := staticValue(w); ok {
		return word{value: v, static: true, text: quote(v)}
	}
	return word{text: printed(w)}
}

// quote shell-quotes s only if it needs it: "[" and "{}" stay bare, as
// the shell reads them bare as themselves.
func quote(s string) string {
	if bare(s) {
		return s
	}
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return fmt.Sprintf("%q", s) // a NUL byte: cannot be in a parsed word
	}
	return q
}

// bare reports whether s, written unquoted, is one word the shell reads
// as s itself.
func bare(s string) bool {
	if s == "" || s[0] == '#' || s[0] == '~' || strings.ContainsAny(s, " \t\r\n'\"\\$`;&|<>()*?") {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r > 0x7e {
			return false // leave it to Quote's $'…'
		}
	}
	v, ok := unquotedLit(s)
	return ok && v == s
}

// printed is n as the shell would print it, on one line.
func printed(n syntax.Node) string {
	var b strings.Builder
	// A Printer keeps state between calls, so each call has its own.
	if err := syntax.NewPrinter(syntax.SingleLine(true)).Print(&b, n); err != nil {
		return "?"
	}
	return oneLine(b.String())
}

// oneLine keeps what SingleLine could not (a here-document inside a
// substitution) on one line.
func oneLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", " ↵ ")
}

// staticValue returns the value of w if it is known before the script
// runs: literals, single quotes, and double quotes holding no expansion;
// no glob, brace expansion or tilde.
func staticValue(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				return "", false
			}
			v, ok := unquotedLit(p.Value)
			if !ok {
				return "", false
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(dquotedLit(lit.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unquotedLit removes the backslashes of an unquoted literal; false if it
// holds a glob or a brace expansion, whose value depends on the files
// present or that yields several words.
func unquotedLit(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
			continue
		case '*', '?':
			return "", false
		case '[':
			if strings.Contains(s[i+1:], "]") {
				return "", false
			}
		case '{':
			if rest := s[i+1:]; strings.Contains(rest, "}") && (strings.Contains(rest, ",") || strings.Contains(rest, "..")) {
				return "", false
			}
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// dquotedLit removes the backslashes that double quotes give a meaning.
func dquotedLit(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// emit adds a command made of ws; name overrides the first word's value.
func (x *extractor) emit(ws []word, dynamic bool) {
	for _, w := range ws[min(1, len(ws)):] {
		dynamic = dynamic || hidesArithmetic(w)
	}
	c := Command{Dynamic: dynamic}
	texts := make([]string, len(ws))
	for i, w := range ws {
		texts[i] = w.text
		if !w.static {
			x.out.exact = false
		}
		v := w.value
		if !w.static {
			v = w.text
		}
		if i == 0 {
			c.Name = v
			if w.static && strings.Contains(v, "=") {
				// Bare, it would read as an assignment.
				texts[0], _ = syntax.Quote(v, syntax.LangBash)
			}
			continue
		}
		c.Args = append(c.Args, v)
	}
	if dynamic {
		x.out.exact = false
	}
	c.Text = strings.Join(texts, " ")
	x.out.Commands = append(x.out.Commands, c)
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// assign lists a variable set before a command or on its own: a variable
// can change what later commands do (PATH, LD_PRELOAD, GIT_SSH_COMMAND).
func (x *extractor) assign(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	text := ""
	if a.Index == nil && a.Array == nil && !a.Naked {
		op := "="
		if a.Append {
			op = "+="
		}
		val := ""
		if a.Value != nil {
			w := wordOf(a.Value)
			if !w.static {
				x.out.exact = false
			}
			val = w.text
			if w.static && w.value == "" {
				val = ""
			}
		}
		text = name + op + val
	} else {
		text = printed(a)
		x.out.exact = false
	}
	x.out.Commands = append(x.out.Commands, Command{Name: name + "=", Args: nil, Text: text})
}

// decl lists export, declare, local, readonly and typeset as commands.
func (x *extractor) decl(d *syntax.DeclClause) {
	c := Command{Name: d.Variant.Value}
	texts := []string{d.Variant.Value}
	for _, a := range d.Args {
		var t string
		switch {
		case a.Name == nil && a.Value != nil: // an option or a naked runtime word
			w := wordOf(a.Value)
			if !w.static {
				x.out.exact = false
			}
			t = w.text
		case a.Naked && a.Index == nil:
			t = a.Name.Value
		default:
			t = printed(a)
			if v, ok := staticAssign(a); ok {
				t = v
			} else {
				x.out.exact = false
			}
		}
		c.Args = append(c.Args, t)
		texts = append(texts, t)
	}
	c.Text = strings.Join(texts, " ")
	x.out.Commands = append(x.out.Commands, c)
}

func staticAssign(a *syntax.Assign) (string, bool) {
	if a.Name == nil || a.Index != nil || a.Array != nil {
		return "", false
	}
	op := "="
	if a.Append {
		op = "+="
	}
	if a.Value == nil {
		return a.Name.Value + op, true
	}
	v, ok := staticValue(a.Value)
	if !ok {
		return "", false
	}
	if v == "" {
		return a.Name.Value + op, true
	}
	return a.Name.Value + op + quote(v), true
}

// loop lists a for or select loop's variable as a command "for NAME in
// WORDS": like an assignment, it can change what later commands do.
func (x *extractor) loop(it *syntax.WordIter) {
	ws := words(it.Items)
	texts := []string{"for", it.Name.Value, "in"}
	args := []string{it.Name.Value, "in"}
	for _, w := range ws {
		if !w.static {
			x.out.exact = false
		}
		texts = append(texts, w.text)
		args = append(args, w.text)
	}
	x.out.Commands = append(x.out.Commands, Command{Name: "for", Args: args, Text: strings.Join(texts, " ")})
}

// arithm lists [[ ]], (( )), let and for (( )) as commands: bash
// evaluates their operands as arithmetic, and arithmetic runs the
// substitutions of an array subscript held in a string ([[ 'a[$(rm x)]'
// -eq 0 ]] runs rm x), which no parse of the script sees. One that holds
// a quoted or escaped word is Dynamic.
func (x *extractor) arithm(name, text string) {
	dynamic := strings.ContainsAny(text, `'"\`)
	if dynamic {
		x.out.exact = false
	}
	x.out.Commands = append(x.out.Commands, Command{Name: name, Text: text, Dynamic: dynamic})
}

// hidesArithmetic reports an argument that may run a command no parse
// sees: an arithmetic expansion, or a subscript holding a substitution
// (printf -v, read, unset and declare evaluate a name's subscript, and
// arithmetic runs what a subscript in it substitutes). The command then
// counts as Dynamic: an allow rule for "printf *" must not cover
// printf -v 'a[$(rm x)]' x. It asks more often than strictly needed
// (echo $((1+2))), which is the safe side.
func hidesArithmetic(w word) bool {
	t := w.text
	if w.static {
		t = w.value
	}
	if strings.Contains(t, "$((") || strings.Contains(t, "$[") {
		return true
	}
	return strings.Contains(t, "[") && (strings.Contains(t, "$(") || strings.Contains(t, "`"))
}

// writeOps are the redirections that write a file.
var writeOps = map[syntax.RedirOperator]bool{
	syntax.RdrOut: true, syntax.AppOut: true, syntax.RdrInOut: true, syntax.RdrClob: true,
	syntax.AppClob: true, syntax.RdrAll: true, syntax.RdrAllClob: true, syntax.AppAll: true,
	syntax.AppAllClob: true, syntax.DplOut: true,
}

var fdWord = regexp.MustCompile(`^([0-9]+-?|-)$`)

func (x *extractor) redirects(rs []*syntax.Redirect) {
	for _, r := range rs {
		if r.Hdoc != nil || r.Op == syntax.WordHdoc {
			x.out.exact = false // what a command reads is not in the list
		}
		if !writeOps[r.Op] || r.Word == nil {
			continue
		}
		w := wordOf(r.Word)
		if !w.static {
			x.out.exact = false
		}
		if w.static {
			if r.Op == syntax.DplOut && fdWord.MatchString(w.value) {
				continue // 2>&1, >&-: a descriptor, not a file
			}
			switch w.value {
			case "/dev/null", "/dev/stdout", "/dev/stderr":
				continue
			}
		}
		x.out.Writes = append(x.out.Writes, w.text)
	}
}

// errUnknownOption stops peeling a wrapper at an option it does not know:
// the option might take a value, so the command it runs is unknown.
var errUnknownOption = errors.New("unknown option")

// options describes a wrapper's options: those that take a value, and
// those that take none. Short ones are single letters.
type options struct {
	value, flag string   // short letters
	longValue   []string // long names taking a value ("--user")
	longFlag    []string // long names taking none
	// optional are short letters whose value, if any, is attached (-i[R]).
	optional string
}

// skip returns the index of the first word after the options of ws
// (from i), the options seen by letter (short) or name (long) with their
// values, or errUnknownOption. A dynamic word is unknown.
func (o options) skip(ws []word, i int) (int, map[string]string, error) {
	seen := map[string]string{}
	for i < len(ws) {
		w := ws[i]
		if !w.static {
			return i, seen, errUnknownOption
		}
		v := w.value
		switch {
		case v == "--":
			return i + 1, seen, nil
		case strings.HasPrefix(v, "--"):
			name, val, hasVal := strings.Cut(v, "=")
			switch {
			case contains(o.longFlag, name):
				seen[name] = val
			case contains(o.longValue, name):
				if !hasVal {
					i++
					if i >= len(ws) || !ws[i].static {
						return i, seen, errUnknownOption
					}
					val = ws[i].value
				}
				seen[name] = val
			default:
				return i, seen, errUnknownOption
			}
		case len(v) > 1 && v[0] == '-':
			letters := v[1:]
			for j := 0; j < len(letters); j++ {
				l := letters[j : j+1]
				switch {
				case strings.Contains(o.flag, l):
					seen[l] = ""
				case strings.Contains(o.optional, l):
					seen[l] = letters[j+1:]
					j = len(letters)
				case strings.Contains(o.value, l):
					val := letters[j+1:]
					if val == "" {
						i++
						if i >= len(ws) || !ws[i].static {
							return i, seen, errUnknownOption
						}
						val = ws[i].value
					}
					seen[l] = val
					j = len(letters)
				default:
					return i, seen, errUnknownOption
				}
			}
		default:
			return i, seen, nil
		}
		i++
	}
	return i, seen, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

var (
	envOpts     = options{flag: "i0v", value: "uC", longFlag: []string{"--ignore-environment", "--null", "--debug"}, longValue: []string{"--unset", "--chdir"}}
	niceOpts    = options{value: "n", longValue: []string{"--adjustment"}}
	timeoutOpts = options{flag: "vp", value: "sk", longFlag: []string{"--preserve-status", "--foreground", "--verbose"}, longValue: []string{"--signal", "--kill-after"}}
	nohupOpts   = options{}
	commandOpts = options{flag: "pvV"}
	execOpts    = options{flag: "cl", value: "a"}
	sudoOpts    = options{
		flag:  "AbEeHiKklnPSsVv",
		value: "CcDghpRrTtUu",
		longFlag: []string{"--askpass", "--background", "--preserve-env", "--edit", "--set-home", "--login",
			"--remove-timestamp", "--reset-timestamp", "--list", "--non-interactive", "--preserve-groups",
			"--stdin", "--shell", "--version", "--validate"},
		longValue: []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role",
			"--type", "--command-timeout", "--other-user", "--user"},
	}
	doasOpts  = options{flag: "Lns", value: "aCu"}
	xargsOpts = options{
		flag: "0rtpxo", value: "adEILnPs", optional: "eil",
		longFlag: []string{"--null", "--no-run-if-empty", "--verbose", "--interactive", "--exit", "--open-tty",
			"--show-limits"},
		longValue: []string{"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
			"--process-slot-var", "--replace", "--eof"},
	}
	stdbufOpts = options{value: "ioe", longValue: []string{"--input", "--output", "--error"}}
	ioniceOpts = options{flag: "t", value: "cnpPu", longFlag: []string{"--ignore"},
		longValue: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}}
	setsidOpts = options{flag: "cfw", longFlag: []string{"--ctty", "--fork", "--wait"}}
	timeOpts   = options{flag: "pvaq", value: "of", longFlag: []string{"--portability", "--verbose", "--append", "--quiet"},
		longValue: []string{"--output", "--format"}}
	shellOpts = options{flag: "abefhiklmnprstuvxBCEHPT", value: "oO",
		longFlag:  []string{"--norc", "--noprofile", "--login", "--posix", "--restricted", "--verbose", "--noediting", "--debugger", "--dump-strings", "--dump-po-strings"},
		longValue: []string{"--rcfile", "--init-file"}}
)

var niceNumber = regexp.MustCompile(`^-[0-9]+$`)

var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "mksh": true}

// run lists the command ws, peeling the wrappers that only run another
// command and parsing the strings that shells, eval and trap run.
func (x *extractor) run(ws []word, depth int) error {
	for len(ws) > 0 {
		name := ws[0]
		if !name.static {
			x.emit(ws, true)
			return nil
		}
		base := path.Base(name.value)
		var o *options
		switch base {
		case "env":
			o = &envOpts
		case "nice":
			o = &niceOpts
		case "timeout":
			o = &timeoutOpts
		case "nohup":
			o = &nohupOpts
		case "command":
			o = &commandOpts
		case "builtin":
			o = &options{}
		case "exec":
			o = &execOpts
		case "sudo":
			o = &sudoOpts
		case "doas":
			o = &doasOpts
		case "xargs":
			o = &xargsOpts
		case "stdbuf":
			o = &stdbufOpts
		case "ionice":
			o = &ioniceOpts
		case "setsid":
			o = &setsidOpts
		case "time":
			o = &timeOpts
		case "eval":
			return x.eval(ws, depth)
		case "trap":
			return x.trap(ws, depth)
		case "source", ".":
			w := ws[0]
			w.value, w.text = "source", "source"
			x.emit(append([]word{w}, ws[1:]...), true)
			return nil
		case "find":
			return x.find(ws, depth)
		}
		if shells[base] {
			return x.shell(ws, depth)
		}
		if o == nil {
			x.emit(ws, false)
			return nil
		}
		if base == "nice" && len(ws) > 1 && ws[1].static && niceNumber.MatchString(ws[1].value) {
			ws = append([]word{ws[0]}, ws[2:]...) // nice -10 cmd
		}
		i, seen, err := o.skip(ws, 1)
		if err != nil {
			x.emit(ws, true)
			return nil
		}
		if base == "sudo" || base == "doas" {
			// Who it runs as is part of what the call does: the wrapper
			// is listed too, so an allow rule must cover it.
			x.emit(ws, false)
		}
		switch base {
		case "env":
			for i < len(ws) && ws[i].static {
				n, _, ok := strings.Cut(ws[i].value, "=")
				if !ok || !varName.MatchString(n) {
					break
				}
				x.out.Commands = append(x.out.Commands, Command{Name: n + "=", Text: ws[i].text})
				if t, ok := staticPair(ws[i].value); ok {
					x.out.Commands[len(x.out.Commands)-1].Text = t
				}
				i++
			}
			if i < len(ws) && !ws[i].static && strings.Contains(ws[i].text, "=") {
				x.emit(ws, true)
				return nil
			}
		case "timeout":
			i++ // the duration
		case "command":
			if _, ok := seen["v"]; ok {
				x.emit(ws, false)
				return nil
			}
			if _, ok := seen["V"]; ok {
				x.emit(ws, false)
				return nil
			}
		case "ionice":
			for _, k := range []string{"p", "P", "u", "--pid", "--pgid", "--uid"} {
				if _, ok := seen[k]; ok {
					x.emit(ws, false)
					return nil
				}
			}
		case "sudo":
			for _, k := range []string{"e", "l", "v", "k", "K", "V", "--edit", "--list", "--validate", "--version", "--reset-timestamp", "--remove-timestamp"} {
				if _, ok := seen[k]; ok {
					return nil // listed above; it runs no command of its own
				}
			}
		case "xargs":
			if i >= len(ws) {
				x.emit([]word{{value: "echo", static: true, text: "echo"}}, false)
				return nil
			}
			repl, ok := seen["I"]
			if !ok {
				repl, ok = seen["--replace"]
			}
			if i2, ok2 := seen["i"]; ok2 {
				repl, ok = i2, true
			}
			if ok && repl == "" {
				repl = "{}"
			}
			if ok && strings.Contains(ws[i].text, repl) {
				x.emit(ws[i:], true) // the name comes from the input
				return nil
			}
		}
		if i >= len(ws) {
			if base != "sudo" && base != "doas" {
				x.emit(ws, false) // runs no command: it is the command
			}
			return nil
		}
		ws = ws[i:]
	}
	return nil
}

func staticPair(v string) (string, bool) {
	n, val, _ := strings.Cut(v, "=")
	if val == "" {
		return n + "=", true
	}
	return n + "=" + quote(val), true
}

// shell parses the string of bash -c; a shell reading a script file or
// its input runs code no rule can see, so it is listed as dynamic.
func (x *extractor) shell(ws []word, depth int) error {
	i := 1
	hasC := false
	for i < len(ws) && ws[i].static {
		v := ws[i].value
		if v == "--" || v == "-" {
			i++
			break
		}
		if len(v) < 2 || (v[0] != '-' && v[0] != '+') {
			break
		}
		if strings.HasPrefix(v, "--") {
			if contains(shellOpts.longValue, v) {
				i++
			} else if !contains(shellOpts.longFlag, v) {
				x.emit(ws, true)
				return nil
			}
			i++
			continue
		}
		for _, l := range v[1:] {
			switch {
			case l == 'c':
				hasC = true
			case strings.ContainsRune(shellOpts.value, l):
				i++ // -o NAME
			case strings.ContainsRune(shellOpts.flag, l):
			default:
				x.emit(ws, true)
				return nil
			}
		}
		i++
	}
	if !hasC || i >= len(ws) || !ws[i].static {
		x.emit(ws, true)
		return nil
	}
	if err := x.script(ws[i].value, depth+1); err != nil {
		return fmt.Errorf("%s -c string: %w", ws[0].text, err)
	}
	return nil
}

// eval parses its arguments joined by spaces, as eval does.
func (x *extractor) eval(ws []word, depth int) error {
	parts := make([]string, 0, len(ws)-1)
	for _, w := range ws[1:] {
		if !w.static {
			x.emit(ws, true)
			return nil
		}
		parts = append(parts, w.value)
	}
	if err := x.script(strings.Join(parts, " "), depth+1); err != nil {
		return fmt.Errorf("eval string: %w", err)
	}
	return nil
}

// trap parses the code that trap sets to run on a signal.
func (x *extractor) trap(ws []word, depth int) error {
	i := 1
	if i < len(ws) && ws[i].static && ws[i].value == "--" {
		i++
	}
	if len(ws)-i < 2 || (ws[i].static && (ws[i].value == "-" || strings.HasPrefix(ws[i].value, "-"))) {
		x.emit(ws, false) // trap -p, trap - INT: runs nothing
		return nil
	}
	if !ws[i].static {
		x.emit(ws, true)
		return nil
	}
	if err := x.script(ws[i].value, depth+1); err != nil {
		return fmt.Errorf("trap string: %w", err)
	}
	return nil
}

// find is listed as itself, and the commands of its -exec, -execdir,
// -ok and -okdir actions as commands too.
func (x *extractor) find(ws []word, depth int) error {
	x.emit(ws, false)
	for i := 1; i < len(ws); i++ {
		if !ws[i].static {
			continue
		}
		switch ws[i].value {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(ws) && !(ws[j].static && (ws[j].value == ";" || ws[j].value == "+")) {
			j++
		}
		switch {
		case j > i+1 && strings.Contains(ws[i+1].text, "{}"):
			x.emit(ws[i+1:j], true) // the name is the file found
		case j > i+1:
			if err := x.run(ws[i+1:j], depth); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}
