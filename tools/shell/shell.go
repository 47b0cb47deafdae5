package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"tollgate/prompt"
)

// ToolRun is the tool's name, as the model sees it.
const ToolRun = "shell.run"

// Defaults for the zero values of Config.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 16 << 10
)

// DefaultEnv names the variables a command sees when Config.Env is nil.
var DefaultEnv = []string{"PATH", "HOME", "LANG"}

// Config configures a Shell.
type Config struct {
	// Dir is the working directory commands run in; a call's dir is
	// relative to it and stays inside it. Required; it must exist.
	Dir string
	// Timeout bounds one call (default DefaultTimeout); when it passes,
	// the call's whole process group is killed.
	Timeout time.Duration
	// Env names the variables of the bot's environment a command sees
	// (nil: DefaultEnv); no other reaches it, so the bot's token and keys
	// stay out unless named here.
	Env []string
	// MaxOutput bounds the bytes kept of each of stdout and stderr
	// (default DefaultMaxOutput); the rest is read and dropped, and the
	// result says where it was cut.
	MaxOutput int
	Logger    *slog.Logger // default: discard
	// LookupEnv reads the bot's environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
}

// Shell holds the shell tool. Safe for concurrent use.
type Shell struct {
	root      string // Config.Dir, absolute, symlinks resolved
	bash      string
	timeout   time.Duration
	env       []string
	maxOutput int
	log       *slog.Logger
	lookupEnv func(string) (string, bool)
	tools     []*prompt.Tool
}

// New checks cfg and returns a Shell. It fails if the working directory
// is missing, is not a directory, or bash is not installed.
func New(cfg Config) (*Shell, error) {
	if cfg.Dir == "" {
		return nil, errors.New("shell: the working directory is required")
	}
	if cfg.Timeout < 0 || cfg.MaxOutput < 0 {
		return nil, errors.New("shell: the timeout and the output cap must not be negative")
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("shell: working directory %q: %w", cfg.Dir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("shell: working directory %q: %w", cfg.Dir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("shell: working directory %q: %w", cfg.Dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("shell: working directory %q is not a directory", cfg.Dir)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("shell: bash is needed to run commands: %w", err)
	}
	s := &Shell{
		root:      root,
		bash:      bash,
		timeout:   orDefault(cfg.Timeout, DefaultTimeout),
		maxOutput: orDefault(cfg.MaxOutput, DefaultMaxOutput),
		log:       cfg.Logger,
		lookupEnv: cfg.LookupEnv,
		env:       cfg.Env,
	}
	if s.env == nil {
		s.env = DefaultEnv
	}
	for _, n := range s.env {
		if !varName.MatchString(n) {
			return nil, fmt.Errorf("shell: environment allowlist: %q is not a variable name", n)
		}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.lookupEnv == nil {
		s.lookupEnv = os.LookupEnv
	}
	run, err := prompt.NewTool(ToolRun,
		"Run a bash script (bash -c) in the working directory, or in dir below it, and return its exit status, "+
			"stdout and stderr. Stdin is empty; the run is cut off after "+s.timeout.String()+". "+
			"Every command in the script needs an operator's rule or a human's approval.",
		s.gate, s.invoke)
	if err != nil {
		return nil, err
	}
	run.Effect = prompt.EffectExecute
	run.Parts = s.parts
	run.Scope = s.scope
	run.Fields = []prompt.Field{{Name: "name", Kind: prompt.FieldText}}
	s.tools = []*prompt.Tool{run}
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Tools returns the one shell tool, shell.run.
func (s *Shell) Tools() []*prompt.Tool {
	return append([]*prompt.Tool(nil), s.tools...)
}

type runInput struct {
	Command string `json:"command" jsonschema:"the bash script to run, as for bash -c"`
	Dir     string `json:"dir,omitempty" jsonschema:"a directory relative to the working directory to run in; default: the working directory"`
}

func decode(input json.RawMessage) (runInput, error) {
	var in runInput
	if err := json.Unmarshal(input, &in); err != nil {
		return in, fmt.Errorf("decode input: %w", err)
	}
	return in, nil
}

// where names the directory a call runs in, for a person.
func (s *Shell) where(dir string) string {
	if d := filepath.Clean(dir); dir != "" && d != "." {
		return filepath.Join(s.root, d)
	}
	return s.root
}

func (s *Shell) gate(_ context.Context, in runInput) (prompt.Requirement, error) {
	if err := checkRelDir(in.Dir); err != nil {
		return prompt.Requirement{}, err
	}
	where := s.where(in.Dir)
	ex, err := Extract(in.Command)
	if err != nil {
		return prompt.Requirement{
			Required:    true,
			Reason:      fmt.Sprintf("The script could not be parsed (%v), so its commands are unknown; it runs in %s as written.", err, where),
			Preview:     in.Command,
			PreviewName: "script.sh",
		}, nil
	}
	reason := fmt.Sprintf("runs %s in %s", plural(len(ex.Commands), "command"), where)
	if n := dynamicCount(ex); n > 0 {
		reason += fmt.Sprintf("; %s decided only when it runs", plural(n, "is"))
	}
	if len(ex.Writes) > 0 {
		reason += fmt.Sprintf("; writes %s", plural(len(ex.Writes), "file"))
	}
	return prompt.Requirement{Required: true, Reason: reason, Preview: preview(ex), PreviewName: "commands.txt"}, nil
}

func plural(n int, what string) string {
	switch {
	case what == "is" && n == 1:
		return "1 is"
	case what == "is":
		return fmt.Sprintf("%d are", n)
	case n == 1:
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dynamicCount(ex Extraction) int {
	n := 0
	for _, c := range ex.Commands {
		if c.Dynamic {
			n++
		}
	}
	return n
}

// preview lists the commands one per line, a dynamic one marked, and a
// line per file written.
func preview(ex Extraction) string {
	var b strings.Builder
	for _, c := range ex.Commands {
		b.WriteString(c.Text)
		if c.Dynamic {
			b.WriteString("    # decided when it runs")
		}
		b.WriteByte('\n')
	}
	for _, w := range ex.Writes {
		b.WriteString("writes: " + w + "\n")
	}
	return b.String()
}

// parts is a part per command, and one per file written: an allow rule
// over "echo *" must not let "echo x > ~/.bashrc" run unasked.
func (s *Shell) parts(input json.RawMessage) ([]prompt.Part, error) {
	in, err := decode(input)
	if err != nil {
		return nil, err
	}
	ex, err := Extract(in.Command)
	if err != nil {
		return nil, err
	}
	parts := make([]prompt.Part, 0, len(ex.Commands)+len(ex.Writes))
	for _, c := range ex.Commands {
		parts = append(parts, prompt.Part{Label: c.Text, Fields: map[string]string{"command": c.Text, "name": c.Name}, Dynamic: c.Dynamic})
	}
	for _, w := range ex.Writes {
		parts = append(parts, prompt.Part{Label: "writes " + w, Fields: map[string]string{"command": "> " + w, "name": ">"}})
	}
	return parts, nil
}

// maxLabel bounds a grant's label.
const maxLabel = 200

// scope is the exact list of commands and writes, in order, and the dir:
// "git status" and "git  status" share a grant, "git status; rm x" has
// its own. Where the list does not say all the script does (a word known
// only when it runs, a here-document, a parse error) it is the script
// itself, exactly.
func (s *Shell) scope(input json.RawMessage) (prompt.Scope, error) {
	in, err := decode(input)
	if err != nil {
		return prompt.Scope{}, err
	}
	dir := ""
	if d := filepath.Clean(in.Dir); in.Dir != "" && d != "." {
		dir = "dir:" + d + "\n"
	}
	in2 := ""
	if dir != "" {
		in2 = " (in " + filepath.Clean(in.Dir) + ")"
	}
	ex, err := Extract(in.Command)
	if err != nil || !ex.exact {
		return prompt.Scope{Key: dir + "script:" + in.Command, Label: "exactly this script: " + clip(oneLine(in.Command)) + in2}, nil
	}
	lines := make([]string, 0, len(ex.Commands)+len(ex.Writes))
	for _, c := range ex.Commands {
		lines = append(lines, c.Text)
	}
	for _, w := range ex.Writes {
		lines = append(lines, "> "+w)
	}
	return prompt.Scope{Key: dir + "commands:" + strings.Join(lines, "\n"), Label: "exactly: " + clip(strings.Join(lines, "; ")) + in2}, nil
}

func clip(s string) string {
	if r := []rune(s); len(r) > maxLabel {
		return string(r[:maxLabel-1]) + "…"
	}
	return s
}

// checkRelDir refuses a dir that is absolute or leads out by "..";
// resolveDir checks symlinks too, when the call runs.
func checkRelDir(dir string) error {
	if dir == "" {
		return nil
	}
	if filepath.IsAbs(dir) {
		return fmt.Errorf("dir %q is absolute: give a directory relative to the working directory", dir)
	}
	if c := filepath.Clean(dir); c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("dir %q leads out of the working directory", dir)
	}
	return nil
}

// resolveDir returns the directory a call with dir runs in, symlinks
// resolved, or an error if it is not a directory inside the working
// directory.
func (s *Shell) resolveDir(dir string) (string, error) {
	if err := checkRelDir(dir); err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(s.root, dir))
	if err != nil {
		return "", fmt.Errorf("dir %q: %w", dir, err)
	}
	rel, err := filepath.Rel(s.root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("dir %q leads out of the working directory", dir)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("dir %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("dir %q is not a directory", dir)
	}
	return p, nil
}
