package files

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"tollgate/prompt"
)

// newFileMode is the mode of a file a write creates.
const newFileMode fs.FileMode = 0o644

// maxLinks bounds the symbolic links one path may pass through.
const maxLinks = 40

// tempPrefix starts the name of the file a write fills before renaming it
// over its target.
const tempPrefix = ".tollgate-tmp-"

type writeInput struct {
	Path    string `json:"path" jsonschema:"root name then the path in it, like docs/notes/a.md; its folder must exist"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

type editInput struct {
	Path string `json:"path" jsonschema:"root name then the path in it, like docs/notes/a.md"`
	Old  string `json:"old" jsonschema:"the exact text to replace: it must occur exactly once in the file, so include enough context"`
	New  string `json:"new" jsonschema:"the text to put in its place"`
}

// current is a file as a write finds it.
type current struct {
	name    string // in the root, links followed: the entry a write replaces
	exists  bool
	content string
	mode    fs.FileMode
}

// token is what an approval of a diff of c expects to find again.
func (c current) token() string {
	if !c.exists {
		return "absent"
	}
	sum := sha256.Sum256([]byte(c.content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writable resolves p for a write: in a rw root, and not the root itself.
func (f *Files) writable(op, p string) (target, error) {
	t, err := f.resolve(p)
	if err != nil {
		return t, err
	}
	if !t.root.Writable {
		return t, fmt.Errorf("%s %s: %w: root %s is read-only", op, t.show, ErrReadOnly, t.root.Name)
	}
	if t.rel == "." {
		return t, fmt.Errorf("%s %s: names the root folder itself, not a file in it", op, t.show)
	}
	return t, nil
}

// load finds the file at t as a write would replace it: through the links
// on its path (each must stay in the root), text, at most maxFile bytes.
// A file that does not exist is empty, if its folder exists.
func (f *Files) load(op string, t target) (current, error) {
	name, err := followLinks(t.root.fs, t.rel)
	if err != nil {
		return current{}, failure(op, t, err)
	}
	c := current{name: name}
	file, err := t.root.fs.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		fi, err := t.root.fs.Stat(path.Dir(name))
		if err != nil {
			return c, failure("find the folder of", t, err)
		}
		if !fi.IsDir() {
			return c, fmt.Errorf("%s %s: its folder is not a folder", op, t.show)
		}
		return c, nil
	}
	if err != nil {
		return c, failure(op, t, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return c, failure(op, t, err)
	}
	if !fi.Mode().IsRegular() {
		return c, fmt.Errorf("%s %s: not a regular file", op, t.show)
	}
	data, err := io.ReadAll(io.LimitReader(file, maxFile+1))
	if err != nil {
		return c, failure(op, t, err)
	}
	if len(data) > maxFile {
		return c, fmt.Errorf("%s %s: the file is over %d bytes, too large to change here", op, t.show, maxFile)
	}
	if binary(data) {
		return c, fmt.Errorf("%s %s: %w: only text files can be changed", op, t.show, ErrBinary)
	}
	c.exists, c.content, c.mode = true, string(data), fi.Mode().Perm()
	return c, nil
}

// followLinks returns rel with every symbolic link on it replaced by where
// it leads, the way os.Root resolves it, so that a write replaces the file
// a link points at rather than the link. A link that is absolute or climbs
// out of the root is ErrOutside. The name returned only chooses what to
// replace; every access still goes through the os.Root, which refuses an
// escape made after this look (a link swapped in meanwhile).
func followLinks(r *os.Root, rel string) (string, error) {
	parts := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		switch p {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", ErrOutside
			}
			done = done[:len(done)-1]
			continue
		}
		name := strings.Join(append(done[:len(done):len(done)], p), "/")
		fi, err := r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			done = append(done, p)
			continue
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, p)
			continue
		}
		if links++; links > maxLinks {
			return "", errors.New("too many symbolic links")
		}
		dest, err := r.Readlink(name)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(dest, "/") {
			return "", ErrOutside
		}
		parts = append(strings.Split(dest, "/"), parts...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// approval is the request to change cur, the file at t, into next.
func approval(op string, t target, cur current, next string) (prompt.Requirement, error) {
	if cur.exists && cur.content == next {
		return prompt.Requirement{}, fmt.Errorf("%s %s: no change: the file already has this content", op, t.show)
	}
	diff, added, removed, err := unified(t.show, cur.content, next)
	if err != nil {
		return prompt.Requirement{}, fmt.Errorf("%s %s: diff: %w", op, t.show, err)
	}
	reason := fmt.Sprintf("writes %s (+%d −%d lines)", t.show, added, removed)
	if !cur.exists {
		reason = fmt.Sprintf("creates %s (new file, %d lines)", t.show, added)
	}
	if cur.name != t.rel {
		reason += fmt.Sprintf(", through a link: the file written is %s/%s", t.root.Name, cur.name)
	}
	return prompt.Requirement{
		Required:    true,
		Reason:      reason,
		Preview:     diff,
		PreviewName: "change.diff",
		Expect:      cur.token(),
	}, nil
}

// unified returns the unified diff from old to next of the file shown as
// name, and the lines it adds and removes.
func unified(name, old, next string) (diff string, added, removed int, err error) {
	u, err := udiff.ToUnifiedDiff("a/"+name, "b/"+name, old, udiff.Lines(old, next), udiff.DefaultContextLines)
	if err != nil {
		return "", 0, 0, err
	}
	for _, h := range u.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case udiff.Insert:
				added++
			case udiff.Delete:
				removed++
			}
		}
	}
	return u.String(), added, removed, nil
}

// replaceOnce replaces the one occurrence of old in s with new; old found
// any other number of times (overlapping ones counted) is an error.
func replaceOnce(s, old, new string) (string, error) {
	if old == "" {
		return "", errors.New("old text is empty")
	}
	n, at := 0, -1
	for i := 0; i <= len(s)-len(old); {
		j := strings.Index(s[i:], old)
		if j < 0 {
			break
		}
		if n++; n == 1 {
			at = i + j
		}
		i += j + 1
	}
	switch {
	case n == 0:
		return "", errors.New("old text found 0 times; it must match the file exactly, spaces and line ends included")
	case n > 1:
		return "", fmt.Errorf("old text found %d times; give more context so it occurs once", n)
	}
	return s[:at] + new + s[at+len(old):], nil
}

func (f *Files) writeGate(_ context.Context, in writeInput) (prompt.Requirement, error) {
	t, err := f.writable("write", in.Path)
	if err != nil {
		return prompt.Requirement{}, err
	}
	if len(in.Content) > maxFile {
		return prompt.Requirement{}, fmt.Errorf("write %s: content is over %d bytes", t.show, maxFile)
	}
	cur, err := f.load("write", t)
	if err != nil {
		return prompt.Requirement{}, err
	}
	return approval("write", t, cur, in.Content)
}

func (f *Files) editGate(_ context.Context, in editInput) (prompt.Requirement, error) {
	t, cur, next, err := f.edited(in)
	if err != nil {
		return prompt.Requirement{}, err
	}
	return approval("edit", t, cur, next)
}

// edited loads the file of an edit and applies it.
func (f *Files) edited(in editInput) (target, current, string, error) {
	t, err := f.writable("edit", in.Path)
	if err != nil {
		return t, current{}, "", err
	}
	cur, err := f.load("edit", t)
	if err != nil {
		return t, cur, "", err
	}
	if !cur.exists {
		return t, cur, "", fmt.Errorf("edit %s: no such file; create it with %s", t.show, ToolWrite)
	}
	next, err := replaceOnce(cur.content, in.Old, in.New)
	if err != nil {
		return t, cur, "", fmt.Errorf("edit %s: %w", t.show, err)
	}
	if len(next) > maxFile {
		return t, cur, "", fmt.Errorf("edit %s: the result is over %d bytes", t.show, maxFile)
	}
	return t, cur, next, nil
}

func (f *Files) writeInvoke(ctx context.Context, in writeInput) (string, error) {
	t, err := f.writable("write", in.Path)
	if err != nil {
		return "", err
	}
	if len(in.Content) > maxFile {
		return "", fmt.Errorf("write %s: content is over %d bytes", t.show, maxFile)
	}
	f.writing.Lock()
	defer f.writing.Unlock()
	cur, err := f.load("write", t)
	if err != nil {
		return "", err
	}
	return f.commit(ctx, "write", t, cur, in.Content)
}

func (f *Files) editInvoke(ctx context.Context, in editInput) (string, error) {
	f.writing.Lock()
	defer f.writing.Unlock()
	// Applied to the file as it is now: if a person approved a diff, the
	// check in commit makes sure that is the file the diff was made from.
	t, cur, next, err := f.edited(in)
	if err != nil {
		return "", err
	}
	return f.commit(ctx, "edit", t, cur, next)
}

// commit writes next over cur, the file at t, if cur is what an approval
// expects. Called with f.writing held.
func (f *Files) commit(ctx context.Context, op string, t target, cur current, next string) (string, error) {
	ci, _ := prompt.CallFromContext(ctx)
	if ci.Expect != "" && ci.Expect != cur.token() {
		f.log.Info("files: approved change refused, the file changed", "path", t.show, "approved_by", ci.ApprovedBy)
		return "", fmt.Errorf("%s %s: %w", op, t.show, ErrChanged)
	}
	if cur.exists && cur.content == next {
		return fmt.Sprintf("%s already has this content; nothing was written.", t.show), nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	mode := newFileMode
	if cur.exists {
		mode = cur.mode
	}
	if err := replaceFile(t.root.fs, cur.name, []byte(next), mode); err != nil {
		return "", failure(op, t, err)
	}
	f.log.Info("files: wrote", "tool", op, "path", t.show, "file", cur.name, "bytes", len(next), "approved_by", ci.ApprovedBy)
	_, added, removed, _ := unified(t.show, cur.content, next)
	if !cur.exists {
		return fmt.Sprintf("Created %s (%d bytes, %d lines).", t.show, len(next), added), nil
	}
	return fmt.Sprintf("Wrote %s (%d bytes; +%d −%d lines).", t.show, len(next), added, removed), nil
}

// replaceFile puts data at name in r whole or not at all: it fills a new
// file in the same folder, gives it mode, syncs it, renames it over name
// and syncs the folder. A reader sees the old content or the new, never a
// part; a crash leaves at worst a temp file behind.
func replaceFile(r *os.Root, name string, data []byte, mode fs.FileMode) (err error) {
	dir := path.Dir(name)
	tmp := path.Join(dir, tempPrefix+rand.Text()[:16])
	file, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			file.Close()
			r.Remove(tmp)
		}
	}()
	if _, err = file.Write(data); err != nil {
		return err
	}
	// On the descriptor, not the name: a name could be swapped.
	if err = file.Chmod(mode); err != nil {
		return err
	}
	if err = file.Sync(); err != nil {
		return err
	}
	if err = file.Close(); err != nil {
		return err
	}
	// rename replaces the entry at name, a link swapped in included,
	// without following it.
	if err = r.Rename(tmp, name); err != nil {
		return err
	}
	d, err := r.Open(dir)
	if err != nil {
		return nil // written; only the folder's sync is lost
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
