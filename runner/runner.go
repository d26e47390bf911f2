package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	k8sevents "k8s.io/client-go/tools/events"
	"knative.dev/pkg/logging"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Runner reads a task's state from the cluster, decides, and applies the
// plan. It holds no state of its own between calls.
type Runner struct {
	Client kubernetes.Interface
	// Metadata lists objects' metadata alone, where a step needs no more
	// (nil: whole objects through Client).
	Metadata metadata.Interface
	Config   steps.Config
	// Log is the logger when the context carries none (knative.dev/pkg/logging).
	Log *zap.SugaredLogger
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Backoff bounds the retries of transient API errors within a call, and
	// spaces the attempts of a step whose anchor changed under it.
	Backoff wait.Backoff
	// PageSize is how many objects a LIST of the sweep asks for at a time
	// (DefaultPageSize if 0).
	PageSize int
	// Recorder records the task's story as Kubernetes Events on its anchor
	// (nil: none).
	Recorder k8sevents.EventRecorder
	// States tells subscribers of each state change a step records on a
	// task's anchor (nil: nobody is told).
	States StatePublisher
	// Sleep waits between attempts of a step (nil: a timer that the
	// context ends).
	Sleep func(context.Context, time.Duration) error
}

// maxAttempts bounds how often a step is decided again after the anchor
// changed under it (a conflict) or an action changed what it decides on.
const maxAttempts = 5

// Result is what a step did.
type Result struct {
	Task      string         `json:"task"`
	Namespace string         `json:"namespace"`
	State     string         `json:"state"`
	Actions   []steps.Action `json:"actions"`
	Message   string         `json:"message,omitempty"`
	// Ended is the final state the step wrote on the anchor, if it ended
	// the task.
	Ended string `json:"ended,omitempty"`
	// Waiting: the task waits, QUEUED, for its owner's share.
	Waiting bool `json:"waiting,omitempty"`
}

// ErrUnknownTask is returned for a task without an anchor.
var ErrUnknownTask = errors.New("unknown task")

func (r *Runner) log(ctx context.Context) *zap.SugaredLogger {
	if l := logging.FromContext(ctx); l != nil {
		return l
	}
	if r.Log != nil {
		return r.Log
	}
	return zap.NewNop().Sugar()
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) backoff() wait.Backoff {
	if r.Backoff.Steps == 0 {
		return kubeapi.DefaultBackoff
	}
	return r.Backoff
}

// call runs one API request, retrying transient errors with the Runner's
// bounded backoff (kubeapi.CallWith: a conflict is not tried again as it
// is, the caller reads again and decides).
func (r *Runner) call(ctx context.Context, fn func(context.Context) error) error {
	return kubeapi.CallWith(ctx, r.backoff(), fn)
}

func taskSelector(task string) string {
	return labels.Set{taskmeta.LabelTask: task}.String()
}

// Options of one step.
type Options struct {
	// Event is the id of the event handled.
	Event string
	// Pods: also read the task's pods, for the checks of pods that cannot
	// start or be scheduled.
	Pods bool
	// Spec is the task decoded from the event (at submission).
	Spec *taskspec.Task
	// GoneJob is a job the event reported deleted.
	GoneJob string
	// Job is the job the event is about, read together with the anchor.
	Job string
	// Seen is that job as the event carried it, if it has ended (its
	// conditions are final): with TRUST_EVENTS it is not read again;
	// without, it is read from the API server.
	Seen *batchv1.Job
	// Submit: the step is the task's submission, which may start it.
	Submit bool
	// Cancel: the step follows the task's cancellation, which may end it
	// before it was submitted.
	Cancel bool
}

// Reconcile reads the task, decides its next step and applies it. When the
// anchor changed under the step (a conflict), the step waits a bounded,
// growing, jittered while and decides again from a fresh read.
func (r *Runner) Reconcile(ctx context.Context, ns, task string, opts Options) (Result, error) {
	res := Result{Task: task, Namespace: ns, Actions: []steps.Action{}}
	wait := r.backoff()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		anchor, hinted, err := r.readAnchor(ctx, ns, task, opts)
		if err != nil {
			return res, err
		}
		if err := r.checkAnchor(ctx, anchor, opts.Submit || opts.Cancel); err != nil {
			res.Message = err.Error()
			return res, err
		}
		if part, ok := stale(anchor, opts); ok {
			// A later change of a job the task is already past (e.g. its
			// Complete condition after SuccessCriteriaMet): nothing to do.
			res.Message = fmt.Sprintf("job %s is done; the task is past it", taskmeta.ObjectName(task, part))
			return res, nil
		}
		obs, err := r.observe(ctx, anchor, opts, hinted)
		if err != nil {
			return res, err
		}
		plan := steps.Decide(obs, r.Config, r.now())
		r.logNotes(ctx, task, plan.Notes)
		res.State = plan.State
		next, err := r.apply(ctx, anchor, obs, plan, &res)
		switch {
		case err != nil:
			return res, err
		case next == finished && obs.Unreadable != "":
			// The task ended as it can never run; the event is bad input.
			return res, invalid.Wrap(errors.New(obs.Unreadable))
		case next == finished:
			return res, nil
		case next == conflicted:
			if err := r.sleep(ctx, wait.Step()); err != nil {
				return res, err
			}
		}
	}
	return res, fmt.Errorf("task %s changed under %d attempts of the step; try again", task, maxAttempts)
}

// sleep waits for d, or until the context ends (Runner.Sleep, if set,
// waits instead).
func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits for d, or until the context ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stale reports whether the event is about a job that the task recorded as
// done, and asks for nothing else.
func stale(anchor *corev1.ConfigMap, opts Options) (string, bool) {
	t, part, ok := taskmeta.SplitJobName(opts.Job)
	if !ok || t != anchor.Name || opts.GoneJob != "" || opts.Pods || opts.Spec != nil {
		return "", false
	}
	if anchor.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled || anchor.Annotations[taskmeta.AnnotationState] != "" {
		return "", false
	}
	prog, err := taskmeta.ParseProgress(anchor.Annotations[taskmeta.AnnotationProgress])
	if err != nil || !prog.IsDone(part) {
		return "", false
	}
	if prog.Last != nil && opts.Event != "" && prog.Last.Event == opts.Event {
		// The task went past the job by this very event's record: the
		// step is a redelivery (or a retry after a lost answer) that must
		// finish what the record started (behaviour §6.3).
		return "", false
	}
	return part, true
}

func (r *Runner) getAnchor(ctx context.Context, ns, task string) (*corev1.ConfigMap, error) {
	var cm *corev1.ConfigMap
	err := r.call(ctx, func(ctx context.Context) (err error) {
		cm, err = r.Client.CoreV1().ConfigMaps(ns).Get(ctx, task, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, ErrUnknownTask
	}
	return cm, err
}

// getJob reads a job; nil if there is none.
func (r *Runner) getJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	var job *batchv1.Job
	err := r.call(ctx, func(ctx context.Context) (err error) {
		job, err = r.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return job, err
}

func (r *Runner) logNotes(ctx context.Context, task string, notes []steps.Note) {
	for _, n := range notes {
		switch n.Level {
		case "error":
			r.log(ctx).Errorw(n.Msg, "task", task)
		case "warn":
			r.log(ctx).Warnw(n.Msg, "task", task)
		default:
			r.log(ctx).Infow(n.Msg, "task", task)
		}
	}
}

// ReasonEnded is taskmeta.ReasonEnded, the reason of the Kubernetes Event
// recorded when a task ends.
const ReasonEnded = taskmeta.ReasonEnded

// maxKubeEventNote is what a Kubernetes Event's note may hold (the API
// server allows 1 kB).
const maxKubeEventNote = 1000

// kubeEvent records a Kubernetes Event on the task's anchor, so that
// `kubectl describe configmap <task>` tells the task's story. Recording is
// asynchronous and best effort: a step never waits for it.
func (r *Runner) kubeEvent(anchor *corev1.ConfigMap, warning bool, reason, format string, a ...any) {
	if r.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	note := fmt.Sprintf(format, a...)
	if len(note) > maxKubeEventNote {
		note = note[:maxKubeEventNote-3] + "..."
	}
	r.Recorder.Eventf(anchor, nil, typ, reason, "Step", "%s", note)
}

// logWarnings logs what a task holds that nothing reads (unknown fields,
// e.g. of a newer TESK API): a warning, not a refusal (behaviour §8.5).
func (r *Runner) logWarnings(ctx context.Context, task string, spec *taskspec.Task) {
	for _, w := range spec.Warnings {
		r.log(ctx).Warnw("The task has a field that is not read; ignoring it", "task", task, "field", w)
	}
}

// jobManifest is a job as YAML for the debug log, with URLs shown without
// their queries and user info, and the FTP credentials hidden.
func jobManifest(job *batchv1.Job) string {
	j := job.DeepCopy()
	for _, list := range [][]corev1.Container{j.Spec.Template.Spec.InitContainers, j.Spec.Template.Spec.Containers} {
		for i := range list {
			c := &list[i]
			for k := range c.Env {
				if hiddenEnv[c.Env[k].Name] && c.Env[k].Value != "" {
					c.Env[k].Value = "<hidden>"
				} else {
					c.Env[k].Value = taskspec.RedactURLs(c.Env[k].Value)
				}
			}
			for k := range c.Args {
				c.Args[k] = taskspec.RedactURLs(c.Args[k])
			}
			for k := range c.Command {
				c.Command[k] = taskspec.RedactURLs(c.Command[k])
			}
		}
	}
	b, err := yaml.Marshal(j)
	if err != nil {
		return fmt.Sprintf("(job %s: %v)", j.Name, err)
	}
	return string(b)
}
