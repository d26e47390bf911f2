package filer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// What the inputs filer creates on the task's volume is shared with the
// executors, which run as whatever user their image names (root without
// capabilities, or a numbered user), never the filer's: every directory it
// creates gets SharedDirMode and every input SharedFileMode, set past the
// umask, so that an executor can create, write and delete files in an
// input's directory and overwrite or remove an input, as a workflow engine
// does in its work directory (behaviour §3.13). The volume belongs to one
// task: only that task's filers and executors mount it.
const (
	SharedDirMode  fs.FileMode = 0o777
	SharedFileMode fs.FileMode = 0o666
)

// mkdirShared creates rel below root with its missing parents, each with
// SharedDirMode. Directories that exist are left as they are (the
// volume's root, or one another job of the same run has just created).
func mkdirShared(root *os.Root, rel string) error {
	rel = path.Clean(rel)
	if rel == "." {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(rel, "/") {
		cur = path.Join(cur, part)
		err := root.Mkdir(cur, SharedDirMode)
		switch {
		case err == nil:
			if err := root.Chmod(cur, SharedDirMode); err != nil {
				return fmt.Errorf("make %s writable by the executors: %v", cur, err)
			}
		case errors.Is(err, fs.ErrExist):
			fi, serr := root.Stat(cur)
			if serr != nil {
				return serr
			}
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: cur, Err: errors.New("a file is in the way of a directory")}
			}
		default:
			return err
		}
	}
	return nil
}
