package filer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"
)

// fileTransport reads and writes file:// URLs on the transfer volume: a URL
// names a path below HostBasePath on the host, which the filer reaches at
// the same relative path below ContainerBasePath. Nothing outside it is
// read or written, also through symbolic links. A filer that runs as root
// with a FileWriter writes only through its writers, as the filer's own
// user (writer.go).
type fileTransport struct {
	host   string
	root   *os.Root
	writer *writers // nil: written by this process
}

func newFileTransport(opts Options) (*fileTransport, error) {
	if opts.HostBasePath == "" {
		return nil, errors.New("file:// URLs need HOST_BASE_PATH (and CONTAINER_BASE_PATH, where the transfer volume is mounted)")
	}
	if !path.IsAbs(opts.HostBasePath) {
		return nil, fmt.Errorf("HOST_BASE_PATH %q is not absolute", opts.HostBasePath)
	}
	root, err := os.OpenRoot(opts.ContainerBasePath)
	if err != nil {
		return nil, fmt.Errorf("CONTAINER_BASE_PATH: %v", err)
	}
	t := &fileTransport{host: path.Clean(opts.HostBasePath), root: root}
	if opts.FileWriter != nil && os.Geteuid() == 0 {
		t.writer = newWriters(*opts.FileWriter, opts.ContainerBasePath)
	}
	return t, nil
}

func (t *fileTransport) close() {
	if t.writer != nil {
		t.writer.close()
	}
	_ = t.root.Close()
}

// rel maps a file:// URL to its path relative to the base path.
func (t *fileTransport) rel(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid URL: %v", plainErr(err))
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("file URLs name local paths: host %q is not allowed", u.Host)
	}
	p := u.Path
	if !path.IsAbs(p) {
		return "", errors.New("the URL's path is not absolute")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", errors.New("the URL's path has a '..' component")
		}
	}
	p = path.Clean(p)
	rel, ok := strings.CutPrefix(p, t.host)
	if t.host == "/" {
		rel, ok = p, true
	}
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", fmt.Errorf("the path is not below HOST_BASE_PATH %s", t.host)
	}
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

func (t *fileTransport) get(ctx context.Context, raw string, w *os.File) (int64, error) {
	rel, err := t.rel(raw)
	if err != nil {
		return 0, err
	}
	f, err := t.root.Open(rel)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		return 0, errors.New("a directory (is the input's type DIRECTORY?)")
	}
	return copyStream(w, ctxReader{ctx, f})
}

func (t *fileTransport) put(ctx context.Context, raw string, f *os.File, size int64) error {
	rel, err := t.rel(raw)
	if err != nil {
		return err
	}
	if rel == "." {
		return errors.New("the URL names the base directory, not a file")
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	if t.writer != nil {
		return t.writer.put(ctx, rel, f)
	}
	return writeFileIn(t.root, rel, ctxReader{ctx, f})
}

func (t *fileTransport) list(ctx context.Context, raw string, fn func(rel, url string, isDir bool) error) error {
	base, err := t.rel(raw)
	if err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	fi, err := t.root.Stat(base)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory")
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := readNames(t.root, path.Join(base, rel))
		if err != nil {
			return err
		}
		for _, n := range names {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := path.Join(rel, n)
			lfi, err := t.root.Lstat(path.Join(base, r))
			if err != nil {
				return err
			}
			fi := lfi
			if lfi.Mode()&fs.ModeSymlink != 0 {
				// Followed only within the base path.
				if fi, err = t.root.Stat(path.Join(base, r)); err != nil {
					return fmt.Errorf("%s: %v", r, err)
				}
				if fi.IsDir() {
					continue // may loop
				}
			}
			switch {
			case fi.IsDir():
				if err := fn(r, "", true); err != nil {
					return err
				}
				if err := walk(r); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if err := fn(r, childURL(u, r), false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("")
}

// ctxReader stops a copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   interface{ Read([]byte) (int, error) }
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// mkdir creates a directory and its parents below the base path.
func (t *fileTransport) mkdir(ctx context.Context, raw string) error {
	rel, err := t.rel(raw)
	if err != nil {
		return err
	}
	if t.writer != nil {
		return t.writer.mkdir(ctx, rel)
	}
	return makeDirIn(t.root, rel)
}
