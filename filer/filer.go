// Package filer moves a TES task's inputs onto its volume and its outputs off
// it: inline content, http(s), ftp, s3 and file URLs, files and directories,
// and outputs with wildcards. It is what the inputs and outputs filer jobs
// run (cmd/filer), and can run in-process (Run).
//
// Safety: nothing is written outside the task directory (no "..", no
// symbolic link that leads out of it, no remote name that would), and URLs
// show in logs and errors without user info or query (Redact).
package filer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Modes of Run.
const (
	ModeInputs  = "inputs"
	ModeOutputs = "outputs"
)

// Error is the first failure of a run: which input or output, the file's URL
// (redacted) and path in the executors, and why.
type Error struct {
	Mode  string // ModeInputs or ModeOutputs
	Index int    // into Task.Inputs or Task.Outputs
	URL   string // redacted; empty for inline content
	Path  string // in the executors
	Err   error
	msg   string // Err's text, scrubbed of secrets, on one line
}

func (e *Error) Error() string {
	var where string
	switch {
	case e.URL == "" && e.Path == "":
		where = ""
	case e.URL == "":
		where = " " + e.Path
	case e.Path == "":
		where = " " + e.URL
	case e.Mode == ModeInputs:
		where = " " + e.URL + " -> " + e.Path
	default:
		where = " " + e.Path + " -> " + e.URL
	}
	return fmt.Sprintf("%s[%d]%s: %s", e.Mode, e.Index, where, e.msg)
}

func (e *Error) Unwrap() error { return e.Err }

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

type runner struct {
	mode  string
	task  *taskspec.Task
	opts  Options
	log   *slog.Logger
	root  *os.Root
	scrub *scrubber
	netrc *netrc

	transports map[string]transport
	// dirs holds the directories the inputs' files were put in so far.
	dirs sync.Map

	mu       sync.Mutex
	failures []failure
	uploaded map[int]taskspec.UploadedFile // by job seq
}

// failure is an error of one job, or of planning one input or output.
type failure struct {
	seq int
	// after is true for an error that came once the run was already
	// stopping (another job's failure cancels the rest): a consequence,
	// not a cause.
	after bool
	err   error
}

// firstFailure picks the error a failed run reports: the failure of the
// earliest file (in the order of the inputs or outputs and of the files of
// each) among those that were not merely cancelled, whatever order the
// parallel transfers ended in.
func firstFailure(fs []failure) error {
	var best *failure
	for i := range fs {
		f := &fs[i]
		if best == nil || (best.after && !f.after) || (best.after == f.after && f.seq < best.seq) {
			best = f
		}
	}
	if best == nil {
		return nil
	}
	return best.err
}

// Run moves the task's inputs onto the task volume (mode "inputs") or its
// outputs off it ("outputs"), several files at once, and stops at the first
// failure with an *Error. For outputs it returns the uploaded files, in the
// order of the outputs (and of the files of each), for
// taskspec.FormatOutputFileLogs.
func Run(ctx context.Context, mode string, task *taskspec.Task, opts Options) ([]taskspec.UploadedFile, error) {
	if mode != ModeInputs && mode != ModeOutputs {
		return nil, fmt.Errorf("mode %q is neither %q nor %q", mode, ModeInputs, ModeOutputs)
	}
	if task == nil {
		return nil, errors.New("no task")
	}
	if err := task.Validate(); err != nil {
		return nil, err
	}
	if mode == ModeOutputs {
		if err := task.Refusal(); err != nil {
			return nil, err
		}
	}
	opts = opts.withDefaults()
	r := &runner{
		mode:       mode,
		task:       task,
		opts:       opts,
		log:        opts.Logger,
		scrub:      &scrubber{},
		transports: map[string]transport{},
		uploaded:   map[int]taskspec.UploadedFile{},
	}
	for _, in := range task.Inputs {
		r.scrub.addURL(in.URL)
	}
	for _, out := range task.Outputs {
		r.scrub.addURL(out.URL)
	}
	r.scrub.add(opts.FTPPassword)
	r.scrub.add(opts.AWS.SecretAccessKey)
	if opts.NetrcPath != "" && r.needsNetrc() {
		n, err := loadNetrc(opts.NetrcPath)
		if err != nil {
			return nil, fmt.Errorf("netrc: %v", err)
		}
		r.netrc = n
		for _, p := range n.passwords() {
			r.scrub.add(p)
		}
	}
	root, err := os.OpenRoot(opts.TaskDir)
	if err != nil {
		return nil, fmt.Errorf("task directory: %v", err)
	}
	r.root = root
	defer root.Close()
	defer func() {
		for _, t := range r.transports {
			if c, ok := t.(closer); ok {
				c.close()
			}
		}
	}()

	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job, opts.Parallelism)
	var wg sync.WaitGroup
	for range opts.Parallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				if err := r.do(ctx, j); err != nil {
					r.fail(j.seq, ctx.Err() != nil, r.errFor(j, err))
					cancel()
				}
			}
		}()
	}
	n := r.plan(ctx, jobs)
	r.mu.Lock()
	planFailed := len(r.failures) > 0
	r.mu.Unlock()
	if planFailed {
		// An input or output that cannot be planned stops the transfers
		// already under way too.
		cancel()
	}
	close(jobs)
	wg.Wait()
	if err := firstFailure(r.failures); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %v", mode, context.Cause(ctx))
	}
	r.log.Debug("done", "mode", mode, "files", n, "seconds", time.Since(start).Seconds())
	if mode == ModeInputs {
		return nil, nil
	}
	files := make([]taskspec.UploadedFile, 0, len(r.uploaded))
	for seq := range n {
		if f, ok := r.uploaded[seq]; ok {
			files = append(files, f)
		}
	}
	return files, nil
}

func (r *runner) needsNetrc() bool {
	uses := func(u string) bool {
		s := schemeOf(u)
		return s == "http" || s == "https" || s == "ftp"
	}
	for _, in := range r.task.Inputs {
		if in.Content == "" && uses(in.URL) {
			return true
		}
	}
	if r.mode == ModeOutputs {
		for _, out := range r.task.Outputs {
			if uses(out.URL) {
				return true
			}
		}
	}
	return false
}

// fail records an error of the job (or planning step) seq; after tells
// whether the run was already stopping.
func (r *runner) fail(seq int, after bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, failure{seq: seq, after: after, err: err})
}

// errFor wraps an error of a job (or of planning an input or output).
func (r *runner) errFor(j job, err error) error {
	var fe *Error
	if errors.As(err, &fe) {
		return err
	}
	e := &Error{Mode: r.mode, Index: j.index, Path: j.execPath, Err: err}
	if j.url != "" {
		e.URL = Redact(j.url)
	}
	e.msg = oneLine(r.scrub.scrub(err.Error()))
	return e
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

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
		t = newHTTPTransport(r.opts.HTTPTimeout, r.netrc)
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

var errStopped = errors.New("stopped")

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
	case taskspec.HasWildcard(p):
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
			return missing(err)
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
			return missing(err)
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

func missing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no such file or directory on the task volume (the executors did not create it)")
	}
	return err
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
