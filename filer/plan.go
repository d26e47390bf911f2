package filer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// job is one file (or directory) to move.
type job struct {
	seq      int
	index    int
	url      string // raw, possibly with credentials; "" for content and mkdir
	execPath string
	content  *string
	mkdir    bool
	t        transport
	// resolved is an output's path relative to the task directory with
	// its symbolic links resolved, when planning has resolved it already.
	resolved string
}

// plan sends the jobs of every input or output, in order, and returns how
// many it sent. It stops at the first error, which it records.
func (r *runner) plan(ctx context.Context, jobs chan<- job) int {
	seq := 0
	send := func(j job) bool {
		j.seq = seq
		seq++
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if r.mode == ModeInputs {
		for i, in := range r.task.Inputs {
			if err := r.planInput(ctx, i, in, send); err != nil {
				if ctx.Err() == nil {
					r.fail(seq, false, r.errFor(job{index: i, url: in.URL, execPath: in.Path}, err))
				}
				return seq
			}
		}
		return seq
	}
	for i, out := range r.task.Outputs {
		if err := r.planOutput(i, out, send); err != nil {
			if ctx.Err() == nil {
				r.fail(seq, false, r.errFor(job{index: i, url: out.URL, execPath: out.Path}, err))
			}
			return seq
		}
	}
	return seq
}

// errStopped ends planning when the run stops before a job could be sent.
var errStopped = errors.New("stopped")

// planInput sends the jobs of input i: its content, its file, or its
// directory and every entry listed below it.
func (r *runner) planInput(ctx context.Context, i int, in taskspec.Input, send func(job) bool) error {
	target := path.Clean(in.Path)
	if _, err := rootRel(target); err != nil {
		return err
	}
	if in.Content != "" {
		c := in.Content
		if !send(job{index: i, execPath: target, content: &c}) {
			return errStopped
		}
		return nil
	}
	t, err := r.transportFor(in.URL)
	if err != nil {
		return err
	}
	if in.Type != taskspec.TypeDirectory {
		if !send(job{index: i, url: in.URL, execPath: target, t: t}) {
			return errStopped
		}
		return nil
	}
	l, ok := t.(lister)
	if !ok {
		return fmt.Errorf("DIRECTORY inputs over %s are not supported: it has no directory listing (use ftp, s3 or file, or list the files as FILE inputs)", schemeOf(in.URL))
	}
	if !send(job{index: i, execPath: target, mkdir: true}) {
		return errStopped
	}
	count := 0
	err = l.list(ctx, in.URL, func(rel, u string, isDir bool) error {
		clean, dir, err := safeRel(rel)
		if err != nil {
			return fmt.Errorf("refusing a remote entry that would be written outside the input's directory: %v", err)
		}
		count++
		j := job{index: i, url: u, execPath: path.Join(target, clean), t: t}
		if isDir || dir {
			j.mkdir, j.url = true, ""
		}
		if !send(j) {
			return errStopped
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.log.Debug("listed directory", "input", i, "url", Redact(in.URL), "entries", count)
	return nil
}

// planOutput sends the jobs of output i: the files a wildcard matches, the
// files and empty directories below a DIRECTORY, or the one FILE.
func (r *runner) planOutput(i int, out taskspec.Output, send func(job) bool) error {
	p := path.Clean(out.Path)
	t, err := r.transportFor(out.URL)
	if err != nil {
		return err
	}
	add := func(execPath, resolved string) error {
		u, ok := out.URLFor(execPath)
		if !ok {
			return fmt.Errorf("%s does not belong to the output", execPath)
		}
		if !send(job{index: i, url: u, execPath: execPath, t: t, resolved: resolved}) {
			return errStopped
		}
		return nil
	}
	switch {
	case out.Pattern():
		files, dirs, err := glob(r.root, p)
		if err != nil {
			return err
		}
		for _, d := range dirs {
			r.log.Debug("pattern matches a directory; not uploaded", "output", i, "path", d)
		}
		if len(files) == 0 {
			r.log.Debug("pattern matches no file", "output", i, "pattern", p)
		}
		for _, f := range files {
			if err := add(f, ""); err != nil {
				return err
			}
		}
		return nil
	case out.Type == taskspec.TypeDirectory:
		_, fi, err := statIn(r.root, p)
		if err != nil {
			return r.missing(i, p, err)
		}
		if !fi.IsDir() {
			return errors.New("not a directory, but the output's type is DIRECTORY")
		}
		mkdir := func(d string) error {
			u, ok := out.URLFor(d)
			if !ok {
				return fmt.Errorf("%s does not belong to the output", d)
			}
			if _, ok := t.(dirMaker); !ok {
				r.log.Debug("empty directory not created: the URL's scheme has no directories", "output", i, "path", d, "url", Redact(u))
				return nil
			}
			if !send(job{index: i, url: u, execPath: d, mkdir: true, t: t}) {
				return errStopped
			}
			return nil
		}
		return walkFiles(r.root, p, func(f, res string, _ int64) error { return add(f, res) }, mkdir,
			func(f, why string) { r.log.Debug("not uploaded", "output", i, "path", f, "reason", why) })
	default:
		_, fi, err := statIn(r.root, p)
		if err != nil {
			return r.missing(i, p, err)
		}
		if fi.IsDir() {
			return errors.New("a directory, but the output's type is FILE")
		}
		if !fi.Mode().IsRegular() {
			return errors.New("not a regular file")
		}
		return add(p, "")
	}
}

// missing says that a file the executors were to write is not there, or,
// when missing outputs are skipped, logs it and leaves the output out; it
// passes on any other error as it is.
func (r *runner) missing(i int, p string, err error) error {
	if r.opts.SkipMissingOutputs && errors.Is(err, fs.ErrNotExist) {
		r.log.Info("output not written by the executors; left out", "output", i, "path", p)
		return nil
	}
	return missing(err)
}

// missing says that a file the executors were to write is not there, and
// passes on any other error as it is.
func missing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no such file or directory on the task volume (the executors did not create it)")
	}
	return err
}
