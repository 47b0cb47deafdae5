// Package files gives the agent tools over folders the operator names
// (FILES_ROOTS, "name:path:ro|rw,..."): files.read, files.list and
// files.search on any root, which only read and so never ask; files.write
// and files.edit on rw roots alone, each asking a person who sees the
// change as a unified diff.
//
// A path is written "root/rel/path" ("docs/notes/a.md"); "docs" alone is
// the root's folder. It must be plain: no leading "/", no "." or ".."
// segments, no empty ones; so the path a person or an operator's rule
// reads names the file opened, but for links (see below).
//
// # Confinement
//
// Every access goes through an os.Root opened on the root's folder at
// New, which resolves each component of a path against that folder's
// descriptor when the file is opened (openat-style), never by comparing
// strings. A symbolic link that stays inside the root is followed; one
// that is absolute or leads out, at any depth, is refused with ErrOutside
// when it is met, so a link swapped in after a check is refused too.
// Listing describes links without following them, and search does not
// follow links below the path it was given. Hard links, bind mounts and
// special files inside a root are not guarded against (os.Root does not):
// the operator chooses roots that hold none.
//
// # Writes
//
// The gate of files.write and files.edit reads the file as it is,
// computes the new content (an edit's old text must occur exactly once),
// and asks with a unified diff of the change (Requirement.Preview) and
// the SHA-256 of the content it was made from ("absent" for a new file)
// as Requirement.Expect. When a person approved it, Invoke reads the file
// again and writes only if the hash still matches; otherwise it writes
// nothing and returns ErrChanged for the model. What a person approves is
// therefore exactly the change made. Where nobody was asked (a rule, a
// grant or the approval mode allowed the call), the write is made on the
// file as it then is. A write through a link inside the root replaces
// the file the link points at, and the request says so.
//
// A write fills a new file beside the target (".tollgate-tmp-…",
// O_EXCL), gives it the old file's permission bits (0644 for a new file),
// syncs it, renames it over the target and syncs the folder: a reader
// sees the old content or the new, never a mix. The file's owner is not
// kept, and a hard link to the old file keeps the old content. Missing
// folders are not created. Files over 1 MiB and files that are not text
// (NUL bytes, or not UTF-8) are not changed.
//
// # Concurrency
//
// Files and its tools are safe for concurrent use. The writes of one
// Files are serialized, so an approved write's check and its rename are
// one step against the others; a process outside Tollgate that writes
// the file between that check and the rename is not seen. Files starts
// no goroutine; Close releases the roots' descriptors.
package files
