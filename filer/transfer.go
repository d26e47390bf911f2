package filer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// transport moves single files for one kind of URL.
type transport interface {
	// get downloads the file at url into w, returning the bytes written.
	get(ctx context.Context, url string, w *os.File) (int64, error)
	// put uploads size bytes of f to url.
	put(ctx context.Context, url string, f *os.File, size int64) error
}

// lister is a transport that can list a directory URL, for DIRECTORY inputs:
// fn gets each entry's path relative to the URL, the entry's own URL, and
// whether it is a directory.
type lister interface {
	list(ctx context.Context, url string, fn func(rel, url string, isDir bool) error) error
}

// dirMaker is a transport that can create an empty directory at a URL, for
// the empty directories of DIRECTORY outputs.
type dirMaker interface {
	mkdir(ctx context.Context, url string) error
}

// closer is a transport that holds connections.
type closer interface{ close() }

// schemeOf is the lower-cased scheme of a URL, "" if it has none.
func schemeOf(raw string) string {
	i := strings.Index(raw, ":")
	if i <= 0 {
		return ""
	}
	s := strings.ToLower(raw[:i])
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return ""
		}
	}
	return s
}

// transportFor returns the transport of a URL's scheme, creating it once.
func (r *runner) transportFor(raw string) (transport, error) {
	s := schemeOf(raw)
	key := s
	if s == "https" {
		key = "http"
	}
	if t, ok := r.transports[key]; ok {
		return t, nil
	}
	var t transport
	switch key {
	case "http":
		t = newHTTPTransport(r.opts.HTTPTimeout, r.netrc, r.opts.Reach)
	case "ftp":
		t = newFTPTransport(r.opts, r.netrc, r.log)
	case "s3":
		st, err := newS3Transport(r.opts, r.scrub)
		if err != nil {
			return nil, err
		}
		t = st
	case "file":
		ft, err := newFileTransport(r.opts)
		if err != nil {
			return nil, err
		}
		t = ft
	case "":
		return nil, errors.New("the URL has no scheme")
	default:
		return nil, fmt.Errorf("unsupported URL scheme %q (supported: http, https, ftp, s3, file)", s)
	}
	r.transports[key] = t
	return t, nil
}

// do runs one job.
func (r *runner) do(ctx context.Context, j job) error {
	start := time.Now()
	rel, err := rootRel(j.execPath)
	if err != nil {
		return err
	}
	if r.mode == ModeOutputs && j.mkdir {
		if err := j.t.(dirMaker).mkdir(ctx, j.url); err != nil {
			return err
		}
		r.log.Debug("created directory", "output", j.index, "path", j.execPath, "url", Redact(j.url), "seconds", time.Since(start).Seconds())
		return nil
	}
	if r.mode == ModeOutputs {
		return r.upload(ctx, j, start)
	}
	if j.mkdir {
		return mkdirShared(r.root, rel)
	}
	if dir := path.Dir(rel); dir != "." {
		// Each directory once: the many files of a DIRECTORY input share
		// a few.
		if _, made := r.dirs.Load(dir); !made {
			if err := mkdirShared(r.root, dir); err != nil {
				return err
			}
			r.dirs.Store(dir, struct{}{})
		}
	}
	f, err := r.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, SharedFileMode)
	if err != nil {
		return err
	}
	if err := f.Chmod(SharedFileMode); err != nil {
		_ = f.Close()
		_ = r.root.Remove(rel)
		return fmt.Errorf("make the input writable by the executors: %v", err)
	}
	var n int64
	if j.content != nil {
		var w int
		w, err = io.WriteString(f, *j.content)
		n = int64(w)
	} else {
		n, err = j.t.get(ctx, j.url, f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = r.root.Remove(rel)
		return err
	}
	r.log.Debug("downloaded", "input", j.index, "url", Redact(j.url), "path", j.execPath, "bytes", n, "seconds", time.Since(start).Seconds())
	return nil
}

// upload puts an output's file to its URL and records it as uploaded.
func (r *runner) upload(ctx context.Context, j job, start time.Time) error {
	res := j.resolved
	if res == "" {
		var err error
		if res, _, err = statIn(r.root, j.execPath); err != nil {
			return missing(err)
		}
	}
	f, err := r.root.Open(res)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if err := j.t.put(ctx, j.url, f, fi.Size()); err != nil {
		return err
	}
	r.mu.Lock()
	r.uploaded[j.seq] = taskspec.UploadedFile{Output: j.index, Path: j.execPath, SizeBytes: strconv.FormatInt(fi.Size(), 10)}
	r.mu.Unlock()
	r.log.Debug("uploaded", "output", j.index, "path", j.execPath, "url", Redact(j.url), "bytes", fi.Size(), "seconds", time.Since(start).Seconds())
	return nil
}
