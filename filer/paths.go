package filer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// rootRel maps a path in the executors (/data/x) to the same path relative to
// the task directory (data/x). The path must be absolute and must not leave
// the task directory: ".." components are refused, not resolved.
func rootRel(execPath string) (string, error) {
	if !path.IsAbs(execPath) {
		return "", fmt.Errorf("path %q is not absolute", execPath)
	}
	if strings.ContainsRune(execPath, 0) {
		return "", fmt.Errorf("path %q contains NUL", execPath)
	}
	for _, c := range strings.Split(execPath, "/") {
		if c == ".." {
			return "", fmt.Errorf("path %q has a '..' component", execPath)
		}
	}
	rel := strings.TrimPrefix(path.Clean(execPath), "/")
	if rel == "" {
		return ".", nil
	}
	return rel, nil
}

// HostPath is where the filer finds an executor path below taskDir. It
// refuses what would leave taskDir.
func HostPath(taskDir, execPath string) (string, error) {
	rel, err := rootRel(execPath)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return path.Clean(taskDir), nil
	}
	return path.Join(taskDir, rel), nil
}

// safeRel checks a relative path that comes from a remote listing (an S3 key
// below a prefix, an FTP directory tree) before it names a file below an
// input's directory: no empty, "." or ".." components, no NUL, not absolute.
// A trailing slash (an S3 directory marker) is allowed and reported.
func safeRel(rel string) (clean string, isDir bool, err error) {
	if strings.HasSuffix(rel, "/") {
		isDir = true
		rel = strings.TrimSuffix(rel, "/")
	}
	if rel == "" {
		return "", isDir, errors.New("empty name")
	}
	if strings.HasPrefix(rel, "/") {
		return "", isDir, fmt.Errorf("%q is absolute", rel)
	}
	if strings.ContainsRune(rel, 0) {
		return "", isDir, fmt.Errorf("%q contains NUL", rel)
	}
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "":
			return "", isDir, fmt.Errorf("%q has an empty component", rel)
		case ".", "..":
			return "", isDir, fmt.Errorf("%q has a %q component", rel, c)
		}
	}
	return rel, isDir, nil
}

// safeName checks one name of a remote directory listing.
func safeName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("unsafe name %q in a directory listing", name)
	}
	return nil
}

// maxLinks bounds the symbolic links followed while resolving one path, as
// the kernel does (ELOOP).
const maxLinks = 40

// resolve follows the symbolic links of rel (relative to root) as the
// executors see them: an absolute link target is a path in the executors,
// that is, relative to the task directory; a relative one is relative to the
// link's directory. The result has no symbolic links and lies below root; a
// link that points above the task directory is an error.
func resolve(root *os.Root, rel string) (string, error) {
	links := 0
	var done []string // resolved components
	todo := splitRel(rel)
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("%q leads above the task directory", rel)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		fi, err := root.Lstat(cur)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%q: too many levels of symbolic links", rel)
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = done[:0]
		}
		todo = append(splitRel(target), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

func splitRel(p string) []string {
	return strings.Split(strings.Trim(p, "/"), "/")
}

// statIn stats an executor path on the task volume, following symbolic links
// as the executors would (see resolve). It returns the resolved relative path.
func statIn(root *os.Root, execPath string) (string, fs.FileInfo, error) {
	rel, err := rootRel(execPath)
	if err != nil {
		return "", nil, err
	}
	res, err := resolve(root, rel)
	if err != nil {
		return "", nil, err
	}
	fi, err := root.Lstat(res)
	if err != nil {
		return "", nil, err
	}
	return res, fi, nil
}

// glob lists the regular files on the task volume whose executor paths match
// pattern (POSIX patterns per component, taskspec.MatchName, as
// taskspec.Output.URLFor reads them).
// Directories that match the whole pattern are reported apart, as they are
// not uploaded. The result is sorted.
func glob(root *os.Root, pattern string) (files, dirs []string, err error) {
	parts := splitRel(path.Clean(pattern))
	// Each candidate is an executor path whose components so far matched;
	// the directory it names is read for the next component.
	cands := []string{"/"}
	for i, part := range parts {
		last := i == len(parts)-1
		var next []string
		for _, dir := range cands {
			var names []string
			if !taskspec.HasWildcard(part) {
				names = []string{unescapeGlob(part)}
			} else {
				_, fi, err := statIn(root, dir)
				if err != nil || !fi.IsDir() {
					continue
				}
				rd, err := readDirIn(root, dir)
				if err != nil {
					return nil, nil, err
				}
				for _, n := range rd {
					if ok, _ := taskspec.MatchName(part, n); ok {
						names = append(names, n)
					}
				}
			}
			for _, n := range names {
				p := path.Join(dir, n)
				_, fi, err := statIn(root, p)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", p, err)
				}
				switch {
				case last && fi.Mode().IsRegular():
					files = append(files, p)
				case last && fi.IsDir():
					dirs = append(dirs, p)
				case !last && fi.IsDir():
					next = append(next, p)
				}
			}
		}
		cands = next
	}
	sort.Strings(files)
	sort.Strings(dirs)
	return files, dirs, nil
}

// unescapeGlob reads a pattern component without wildcards as path.Match
// does: a backslash quotes the character after it.
func unescapeGlob(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readDirIn lists the names in a directory of the task volume.
func readDirIn(root *os.Root, execPath string) ([]string, error) {
	res, _, err := statIn(root, execPath)
	if err != nil {
		return nil, err
	}
	return readNames(root, res)
}

// readNames lists the names in a directory below root, sorted.
func readNames(root *os.Root, rel string) ([]string, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// walkFiles calls fn for every regular file below the executor directory
// dir, in lexical order, following symbolic links to files as the executors
// would; symbolic links to directories are not descended into (they could
// loop), and are reported through skipped, as is anything else that is not a
// regular file. emptyDir is called for every directory (dir itself
// included) below which there is no regular file and no other directory
// emptyDir is called for: the leaves of the tree that would otherwise be
// lost.
//
// fn also gets the file's path relative to root with every symbolic link
// resolved, so that it need not be resolved again.
func walkFiles(root *os.Root, dir string, fn func(execPath, resolved string, size int64) error, emptyDir func(execPath string) error, skipped func(execPath, why string)) error {
	_, err := walkDir(root, dir, fn, emptyDir, skipped)
	return err
}

// walkDir is walkFiles; it reports whether it called fn or emptyDir.
func walkDir(root *os.Root, dir string, fn func(execPath, resolved string, size int64) error, emptyDir func(execPath string) error, skipped func(execPath, why string)) (bool, error) {
	resDir, fi, err := statIn(root, dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is not a directory", dir)
	}
	names, err := readNames(root, resDir)
	if err != nil {
		return false, err
	}
	some := false
	for _, n := range names {
		p, res := path.Join(dir, n), path.Join(resDir, n)
		fi, err := root.Lstat(res)
		if err != nil {
			return some, fmt.Errorf("%s: %w", p, err)
		}
		link := fi.Mode()&fs.ModeSymlink != 0
		if link {
			res, fi, err = statIn(root, p)
			if errors.Is(err, fs.ErrNotExist) {
				skipped(p, "a dangling symbolic link")
				continue
			}
			if err != nil {
				return some, fmt.Errorf("%s: %w", p, err)
			}
		}
		switch {
		case fi.Mode().IsRegular():
			some = true
			if err := fn(p, res, fi.Size()); err != nil {
				return some, err
			}
		case fi.IsDir() && link:
			skipped(p, "a symbolic link to a directory")
		case fi.IsDir():
			some = true
			if _, err := walkDir(root, p, fn, emptyDir, skipped); err != nil {
				return some, err
			}
		default:
			skipped(p, "not a regular file")
		}
	}
	if !some {
		return true, emptyDir(dir)
	}
	return true, nil
}
