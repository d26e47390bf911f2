package filer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// runner is one run of the filer: the task, its options, the task
// directory, the transports made so far, and what the jobs left (failures,
// uploaded files).
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
	if err := checkRun(mode, task); err != nil {
		return nil, err
	}
	r, err := newRunner(mode, task, opts.withDefaults())
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.opts.TaskDir)
	if err != nil {
		return nil, fmt.Errorf("task directory: %v", err)
	}
	r.root = root
	defer root.Close()
	defer r.closeTransports()

	start := time.Now()
	n, err := r.transfer(ctx)
	if err != nil {
		return nil, err
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

// checkRun refuses a mode other than inputs and outputs, and a task that is
// not valid, or whose outputs the filer refuses to upload.
func checkRun(mode string, task *taskspec.Task) error {
	if mode != ModeInputs && mode != ModeOutputs {
		return fmt.Errorf("mode %q is neither %q nor %q", mode, ModeInputs, ModeOutputs)
	}
	if task == nil {
		return errors.New("no task")
	}
	if err := task.Validate(); err != nil {
		return err
	}
	if mode == ModeOutputs {
		return task.Refusal()
	}
	return nil
}

// newRunner is a run of the filer whose errors leave out the secrets it
// knows of: the URLs' credentials, the FTP password, the AWS secret key and
// the passwords of the netrc file, read when a URL needs it.
func newRunner(mode string, task *taskspec.Task, opts Options) (*runner, error) {
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
	return r, nil
}

// closeTransports closes the transports the run made that hold a
// connection.
func (r *runner) closeTransports() {
	for _, t := range r.transports {
		if c, ok := t.(closer); ok {
			c.close()
		}
	}
}

// transfer plans the jobs and runs them, opts.Parallelism at once; the
// first failure (or a plan's) cancels the rest, and the earliest failure is
// the error (firstFailure). n is how many jobs were planned.
func (r *runner) transfer(ctx context.Context) (n int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job, r.opts.Parallelism)
	var wg sync.WaitGroup
	for range r.opts.Parallelism {
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
	n = r.plan(ctx, jobs)
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
		return n, err
	}
	if ctx.Err() != nil {
		return n, fmt.Errorf("%s: %v", r.mode, context.Cause(ctx))
	}
	return n, nil
}

// needsNetrc reports whether a URL the run moves is http(s) or ftp, the
// schemes that read the netrc file.
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

// oneLine joins the lines of s, and collapses its runs of white space, into
// single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
