package files

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of list and search.
const (
	maxEntries       = 500  // entries files.list shows
	defaultMatches   = 100  // lines files.search returns unless told
	maxMatches       = 1000 // lines files.search returns at most
	maxSearchFiles   = 5000 // files one search reads
	maxMatchLineText = 240  // bytes of a matching line shown
)

type readInput struct {
	Path   string `json:"path" jsonschema:"root name then the path in it, like docs/notes/a.md"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to return, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return at most (default: as many as fit)"`
}

type listInput struct {
	Path string `json:"path" jsonschema:"a root name, or a folder in it like docs/notes"`
}

type searchInput struct {
	Path    string `json:"path" jsonschema:"a root name, or a folder or file in it, to search under"`
	Pattern string `json:"pattern" jsonschema:"the text to find in each line"`
	Regexp  bool   `json:"regexp,omitempty" jsonschema:"read pattern as a Go regular expression rather than plain text"`
	Max     int    `json:"max,omitempty" jsonschema:"how many matching lines to return at most (default 100, at most 1000)"`
}

// binary reports whether b, the start of a file, is not text: it holds a
// NUL byte, or is not UTF-8 (a rune cut at the end of b is forgiven).
func binary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			return utf8.FullRune(b)
		}
		b = b[n:]
	}
	return false
}

func (f *Files) readInvoke(ctx context.Context, in readInput) (string, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	t, err := f.resolve(in.Path)
	if err != nil {
		return "", err
	}
	file, err := t.root.fs.Open(t.rel)
	if err != nil {
		return "", failure("read", t, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return "", failure("read", t, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("read %s: is a folder; list it with %s", t.show, ToolList)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("read %s: not a regular file", t.show)
	}
	br := bufio.NewReaderSize(file, 64<<10)
	if head, _ := br.Peek(8000); binary(head) {
		return "", fmt.Errorf("read %s: %w: only text files can be read", t.show, ErrBinary)
	}
	first := max(in.Offset, 1)
	var out strings.Builder
	line, lines := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		s, err := br.ReadString('\n')
		if s != "" {
			line++
		}
		if s != "" && line >= first {
			if in.Limit > 0 && lines == in.Limit {
				fmt.Fprintf(&out, "\n[lines %d-%d of %s; more follow: read on with offset=%d]", first, line-1, t.show, line)
				return out.String(), nil
			}
			if out.Len()+len(s) > f.maxRead {
				if lines == 0 {
					// One line longer than the cap: give what fits.
					cut := validPrefix(s[:f.maxRead])
					out.WriteString(cut)
					fmt.Fprintf(&out, "\n[line %d of %s is cut at %d bytes]", line, t.show, len(cut))
					return out.String(), nil
				}
				fmt.Fprintf(&out, "\n[cut at %d bytes: lines %d-%d of %s; more follow: read on with offset=%d]", out.Len(), first, line-1, t.show, line)
				return out.String(), nil
			}
			if binary([]byte(s)) {
				return "", fmt.Errorf("read %s: %w: line %d is not text", t.show, ErrBinary, line)
			}
			out.WriteString(s)
			lines++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", failure("read", t, err)
		}
	}
	if lines == 0 && line > 0 {
		return fmt.Sprintf("[%s has %d lines; offset %d is past its end]", t.show, line, first), nil
	}
	if line == 0 {
		return fmt.Sprintf("[%s is empty]", t.show), nil
	}
	return out.String(), nil
}

// validPrefix drops a rune cut at the end of s.
func validPrefix(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s
}

func (f *Files) listInvoke(ctx context.Context, in listInput) (string, error) {
	t, err := f.resolve(in.Path)
	if err != nil {
		return "", err
	}
	dir, err := t.root.fs.Open(t.rel)
	if err != nil {
		return "", failure("list", t, err)
	}
	defer dir.Close()
	// ReadDir describes each entry as it is, without following links:
	// a symbolic link is listed as one, whatever it points at.
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return "", failure("list", t, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %d entries\n", t.show, len(entries))
	for i, e := range entries {
		if i == maxEntries {
			fmt.Fprintf(&out, "[%d more not shown]\n", len(entries)-i)
			break
		}
		switch {
		case e.IsDir():
			fmt.Fprintf(&out, "dir   %s/\n", e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			dest, _ := t.root.fs.Readlink(path.Join(t.rel, e.Name()))
			fmt.Fprintf(&out, "link  %s -> %s\n", e.Name(), dest)
		case e.Type().IsRegular():
			size := int64(-1)
			if fi, err := e.Info(); err == nil {
				size = fi.Size()
			}
			fmt.Fprintf(&out, "file  %s (%d bytes)\n", e.Name(), size)
		default:
			fmt.Fprintf(&out, "other %s\n", e.Name())
		}
	}
	return out.String(), ctx.Err()
}

// searchState is one search's matcher and what it has found.
type searchState struct {
	match   func(string) bool
	max     int
	lines   []string
	files   int
	skipped int // files too large or not text
	full    bool
}

func (f *Files) searchInvoke(ctx context.Context, in searchInput) (string, error) {
	if in.Pattern == "" {
		return "", errors.New("empty pattern")
	}
	if in.Max < 0 {
		return "", errors.New("max must not be negative")
	}
	t, err := f.resolve(in.Path)
	if err != nil {
		return "", err
	}
	st := &searchState{max: min(cmp.Or(in.Max, defaultMatches), maxMatches)}
	if in.Regexp {
		re, err := regexp.Compile(in.Pattern)
		if err != nil {
			return "", fmt.Errorf("pattern: %w", err)
		}
		st.match = re.MatchString
	} else {
		st.match = func(s string) bool { return strings.Contains(s, in.Pattern) }
	}
	// The path named is followed (within the root); below it, symbolic
	// links are not.
	fi, err := t.root.fs.Stat(t.rel)
	if err != nil {
		return "", failure("search", t, err)
	}
	if fi.IsDir() {
		err = f.walk(ctx, t, st)
	} else {
		err = f.searchFile(ctx, t, st)
	}
	if err != nil && !errors.Is(err, errStop) {
		return "", err
	}
	var out strings.Builder
	for _, l := range st.lines {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	switch {
	case st.full:
		fmt.Fprintf(&out, "[stopped at %d matching lines; narrow the path or pattern]\n", st.max)
	case len(st.lines) == 0:
		fmt.Fprintf(&out, "[no match in %d files under %s]\n", st.files, t.show)
	}
	if st.skipped > 0 {
		fmt.Fprintf(&out, "[%d files skipped: not text, or over %d bytes]\n", st.skipped, maxFile)
	}
	return out.String(), nil
}

// errStop ends a walk early: enough found.
var errStop = errors.New("stop")

func (f *Files) walk(ctx context.Context, t target, st *searchState) error {
	dir, err := t.root.fs.Open(t.rel)
	if err != nil {
		return failure("search", t, err)
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return failure("search", t, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		child := target{root: t.root, rel: path.Join(t.rel, e.Name()), show: t.show + "/" + e.Name()}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			// Not followed: a link may lead out of the root (os.Root
			// would refuse) or back up into a loop.
		case e.IsDir():
			if e.Name() == ".git" {
				continue
			}
			if err := f.walk(ctx, child, st); err != nil {
				return err
			}
		case e.Type().IsRegular():
			if st.files == maxSearchFiles {
				st.full = true
				return errStop
			}
			if err := f.searchFile(ctx, child, st); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *Files) searchFile(ctx context.Context, t target, st *searchState) error {
	st.files++
	file, err := t.root.fs.Open(t.rel)
	if err != nil {
		return failure("search", t, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxFile+1))
	if err != nil {
		return failure("search", t, err)
	}
	if len(data) > maxFile || binary(data) {
		st.skipped++
		return nil
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if !st.match(line) {
			continue
		}
		if len(st.lines) == st.max {
			st.full = true
			return errStop
		}
		if len(line) > maxMatchLineText {
			line = validPrefix(line[:maxMatchLineText]) + "…"
		}
		st.lines = append(st.lines, fmt.Sprintf("%s:%d: %s", t.show, n, line))
	}
	return ctx.Err()
}
