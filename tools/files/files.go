package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"tollgate/prompt"
)

// The tool names, as the model sees them.
const (
	ToolRead   = "files.read"
	ToolList   = "files.list"
	ToolSearch = "files.search"
	ToolWrite  = "files.write"
	ToolEdit   = "files.edit"
)

// DefaultMaxRead bounds the bytes one files.read returns when
// Config.MaxRead is zero.
const DefaultMaxRead = 64 << 10

// maxFile bounds a file that files.write and files.edit replace, the
// content they write, and a file files.search reads: past it a diff is no
// longer something a person reads.
const maxFile = 1 << 20

// Errors the tools return (wrapped, with the path) for the model to read.
var (
	// ErrReadOnly: a write or edit named a root the operator mounted ro.
	ErrReadOnly = errors.New("read-only root")
	// ErrChanged: the file is no longer what the approved diff was made
	// from; nothing was written.
	ErrChanged = errors.New("the file changed after the request was shown; nothing was written")
	// ErrOutside: the path, or a symbolic link on it, leads out of its root.
	ErrOutside = errors.New("path leads outside its root")
	// ErrBinary: the file is not text.
	ErrBinary = errors.New("binary file")
)

// Root is a folder the operator lets the agent use, under a short name.
type Root struct {
	Name string // the first segment of every path in it: "docs"
	Path string // the folder on this machine
	// Writable lets files.write and files.edit change files in it (rw);
	// they still ask a person, showing the diff.
	Writable bool
}

var rootName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// ParseRoots reads the operator's FILES_ROOTS: "name:path:ro|rw,..."
// (the path may itself hold colons: the name ends at the first colon and
// the mode starts after the last). Blank entries are skipped. An entry
// with a part missing, a mode other than ro or rw, a name outside
// [a-z0-9_-]+ or used twice, or a path that is not an existing folder is
// an error naming it.
func ParseRoots(spec string) ([]Root, error) {
	var roots []Root
	for entry := range strings.SplitSeq(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, rest, ok1 := strings.Cut(entry, ":")
		i := strings.LastIndex(rest, ":")
		if !ok1 || i < 0 {
			return nil, fmt.Errorf("files root %q: want name:path:ro or name:path:rw", entry)
		}
		p, mode := rest[:i], rest[i+1:]
		r := Root{Name: name, Path: p}
		switch mode {
		case "ro":
		case "rw":
			r.Writable = true
		default:
			return nil, fmt.Errorf("files root %q: mode %q is not ro or rw", entry, mode)
		}
		if err := checkRoot(r, roots); err != nil {
			return nil, fmt.Errorf("files root %q: %w", entry, err)
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// checkRoot validates r against the roots before it.
func checkRoot(r Root, before []Root) error {
	if !rootName.MatchString(r.Name) {
		return fmt.Errorf("name %q must match %s", r.Name, rootName)
	}
	if slices.ContainsFunc(before, func(o Root) bool { return o.Name == r.Name }) {
		return fmt.Errorf("name %q is used twice", r.Name)
	}
	if r.Path == "" {
		return errors.New("no path")
	}
	fi, err := os.Stat(r.Path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", r.Path)
	}
	return nil
}

// Config configures Files.
type Config struct {
	// Roots are the folders the tools reach (FILES_ROOTS). At least one.
	Roots []Root
	// MaxRead bounds the bytes one files.read returns (default
	// DefaultMaxRead); longer content is cut with a note.
	MaxRead int
	Logger  *slog.Logger // default: discard
}

// Files holds the file tools over the operator's roots. Safe for
// concurrent use; Close releases the roots.
type Files struct {
	roots   map[string]*root
	names   []string // in the operator's order
	maxRead int
	log     *slog.Logger
	tools   []*prompt.Tool
	// writing makes a write's check of the approved content and its
	// rename one step for the writes of this process.
	writing sync.Mutex
}

type root struct {
	Root
	fs *os.Root
}

// New opens every root of cfg (each stays open, as a directory handle,
// until Close) and builds the tools. A root that is malformed, named
// twice or cannot be opened is an error naming it. ctx is unused.
func New(_ context.Context, cfg Config) (*Files, error) {
	if len(cfg.Roots) == 0 {
		return nil, errors.New("files: no roots")
	}
	if cfg.MaxRead < 0 {
		return nil, errors.New("files: MaxRead must not be negative")
	}
	f := &Files{roots: map[string]*root{}, maxRead: cfg.MaxRead, log: cfg.Logger}
	if f.maxRead == 0 {
		f.maxRead = DefaultMaxRead
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var seen []Root
	for _, r := range cfg.Roots {
		err := checkRoot(r, seen)
		var dir *os.Root
		if err == nil {
			dir, err = os.OpenRoot(r.Path)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("files: root %s: %w", r.Name, err)
		}
		seen = append(seen, r)
		f.roots[r.Name] = &root{Root: r, fs: dir}
		f.names = append(f.names, r.Name)
	}
	tools, err := f.buildTools()
	if err != nil {
		f.Close()
		return nil, err
	}
	f.tools = tools
	return f, nil
}

// Close closes the roots; a tool called after it fails.
func (f *Files) Close() error {
	var errs []error
	for _, r := range f.roots {
		errs = append(errs, r.fs.Close())
	}
	return errors.Join(errs...)
}

// Tools returns files.read, files.list, files.search, files.write and
// files.edit.
func (f *Files) Tools() []*prompt.Tool {
	return append([]*prompt.Tool(nil), f.tools...)
}

// target is a path of a call: a root and a path relative to it.
type target struct {
	root *root
	rel  string // "." for the root itself
	show string // "docs/a/b.md", as the model and a person read it
}

// resolve splits p ("docs/notes/a.md") into its root and the path in it.
// p must be written plainly: relative, no "." or ".." segments, no empty
// ones, so that what a person or an operator's rule reads is what is
// opened (symbolic links aside; os.Root confines those). A trailing slash
// is forgiven.
func (f *Files) resolve(p string) (target, error) {
	if strings.HasPrefix(p, "/") {
		return target{}, fmt.Errorf("%q: %w: paths start with a root's name (%s), never with /", p, ErrOutside, strings.Join(f.names, ", "))
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return target{}, fmt.Errorf("empty path: start it with a root's name (%s)", strings.Join(f.names, ", "))
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "..":
			return target{}, fmt.Errorf("%q: %w: \"..\" is not allowed", p, ErrOutside)
		case ".", "":
			return target{}, fmt.Errorf("%q: write the path without \".\" or empty segments, like %q", p, path.Clean(p))
		}
	}
	name, rel, _ := strings.Cut(p, "/")
	r, ok := f.roots[name]
	if !ok {
		return target{}, fmt.Errorf("%q: no root named %q; the roots are %s", p, name, f.describeRoots())
	}
	if rel == "" {
		rel = "."
	}
	return target{root: r, rel: rel, show: p}, nil
}

func (f *Files) describeRoots() string {
	var b strings.Builder
	for i, n := range f.names {
		if i > 0 {
			b.WriteString(", ")
		}
		mode := "read-only"
		if f.roots[n].Writable {
			mode = "read-write"
		}
		fmt.Fprintf(&b, "%s (%s)", n, mode)
	}
	return b.String()
}

// failure rewrites an error of the file system for the model: the path as
// it wrote it, and no folder of this machine.
func failure(op string, t target, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case err.Error() == "path escapes from parent": // os.Root's, unexported
		err = ErrOutside
	case errors.Is(err, fs.ErrNotExist):
		err = errors.New("no such file or folder")
	}
	return fmt.Errorf("%s %s: %w", op, t.show, err)
}
