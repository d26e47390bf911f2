package steps

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"knative.dev/pkg/logging"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Runner reads a task's state from the cluster, decides, and applies the
// plan. It holds no state of its own between calls.
type Runner struct {
	Client kubernetes.Interface
	Config Config
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
	// Events records the task's story as Kubernetes Events on its anchor
	// (nil: none).
	Events events.EventRecorder
	// Sleep waits between attempts of a step (nil: a timer that the
	// context ends).
	Sleep func(context.Context, time.Duration) error
}

// maxAttempts bounds how often a step is decided again after the anchor
// changed under it (a conflict) or an action changed what it decides on.
const maxAttempts = 5

// Result is what a step did.
type Result struct {
	Task      string   `json:"task"`
	Namespace string   `json:"namespace"`
	State     string   `json:"state"`
	Actions   []Action `json:"actions"`
	Message   string   `json:"message,omitempty"`
	// Ended is the final state the step wrote on the anchor, if it ended
	// the task.
	Ended string `json:"ended,omitempty"`
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
	res := Result{Task: task, Namespace: ns, Actions: []Action{}}
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
		plan := Decide(obs, r.Config, r.now())
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

// sleep waits for d, or until the context ends.
func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
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

// readAnchor reads the task's anchor and, at the same time, the job the event
// named (most often the one the step looks at), unless the event carried
// that job once it had ended and events are taken at their word
// (TRUST_EVENTS): its end is final. Otherwise an event's body is a hint
// only, which anyone who reaches the handler could have written.
func (r *Runner) readAnchor(ctx context.Context, ns, task string, opts Options) (*corev1.ConfigMap, map[string]*batchv1.Job, error) {
	hinted := map[string]*batchv1.Job{}
	job := opts.Job
	t, _, ok := taskmeta.SplitJobName(job)
	if r.Config.TrustEvents && ok && t == task && opts.Seen != nil && opts.Seen.Name == job && taskmeta.StatusOf(opts.Seen) != taskmeta.JobRunning {
		hinted[job] = opts.Seen
		ok = false
	}
	var wg sync.WaitGroup
	var jerr error
	if ok && t == task {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var j *batchv1.Job
			j, jerr = r.getJob(ctx, ns, job)
			hinted[job] = j
		}()
	}
	anchor, err := r.getAnchor(ctx, ns, task)
	wg.Wait()
	if err != nil {
		return nil, nil, err
	}
	if jerr != nil {
		delete(hinted, job) // read it again in observe
	}
	return anchor, hinted, nil
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

// JobTypeTaskmaster is the job-type of the Job that runs TESK's taskmaster
// for a task, named as the task (the TESK API creates it).
const JobTypeTaskmaster = "taskmaster"

// checkAnchor refuses to act on a ConfigMap that is not a task of this
// service, or that this version cannot read (take: the step is a
// submission or a cancellation, which may take a ConfigMap the TESK API
// wrote for the service):
//   - another step acts only on the service's anchors:
//     labelled taskmaster-name with their own name (taskmeta.IsAnchor), or
//     already written on by a step (progress or final state). The ConfigMap
//     the TESK API writes for a task that TESK's taskmaster runs has
//     neither, and that task's executor jobs, which carry taskmaster-name,
//     make events that find it: ErrUnknownTask, nothing written;
//   - a submission or a cancellation does not take a ConfigMap that is not
//     yet the service's when TESK's taskmaster runs its task (a Job named
//     as the task with job-type: taskmaster): the event is refused
//     (invalid);
//   - an anchor of a record format newer than taskmeta.Format is left as
//     it is: the event is refused (invalid), so that it is not delivered
//     again.
func (r *Runner) checkAnchor(ctx context.Context, anchor *corev1.ConfigMap, take bool) error {
	if err := taskmeta.CheckFormat(anchor.ObjectMeta); err != nil {
		return invalid.Wrap(err)
	}
	if taskmeta.IsAnchor(anchor.ObjectMeta) || written(anchor.ObjectMeta) {
		return nil
	}
	if !take {
		return fmt.Errorf("%w: ConfigMap %s is not a task of this service (not labelled %s=%s, no step recorded on it)",
			ErrUnknownTask, anchor.Name, taskmeta.LabelTask, anchor.Name)
	}
	_, inBinary := anchor.BinaryData[taskspec.ConfigMapKey]
	_, inData := anchor.Data[taskspec.ConfigMapKey]
	if !inBinary && !inData {
		// Not a task at all: whoever names another ConfigMap of the
		// namespace in an event does not get it written on.
		return invalid.Errorf("ConfigMap %s/%s holds no task (no %s, not labelled %s=%s): this service leaves it alone",
			anchor.Namespace, anchor.Name, taskspec.ConfigMapKey, taskmeta.LabelTask, anchor.Name)
	}
	tm, err := r.getJob(ctx, anchor.Namespace, anchor.Name)
	if err != nil {
		return err
	}
	if tm != nil && tm.Labels[taskmeta.LabelJobType] == JobTypeTaskmaster {
		return invalid.Errorf("task %s/%s is run by TESK's taskmaster (Job %s, %s: %s): this service does not take it over",
			anchor.Namespace, anchor.Name, tm.Name, taskmeta.LabelJobType, JobTypeTaskmaster)
	}
	return nil
}

// written reports whether a step of the service wrote on the ConfigMap.
func written(meta metav1.ObjectMeta) bool {
	_, progress := meta.Annotations[taskmeta.AnnotationProgress]
	_, state := meta.Annotations[taskmeta.AnnotationState]
	return progress || state
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

// observe reads what the decision needs: the jobs started and not done, by
// name (so that a step costs the same in a namespace of ten thousand tasks),
// and the task's pods when asked for.
func (r *Runner) observe(ctx context.Context, anchor *corev1.ConfigMap, opts Options, hinted map[string]*batchv1.Job) (Observed, error) {
	obs := Observed{Event: opts.Event, Anchor: anchor.ObjectMeta, Spec: opts.Spec, Jobs: map[string]*batchv1.Job{}}
	prog, _ := taskmeta.ParseProgress(anchor.Annotations[taskmeta.AnnotationProgress])
	if t, part, ok := taskmeta.SplitJobName(opts.GoneJob); ok && t == anchor.Name {
		obs.Gone = part
	}
	if anchor.Annotations[taskmeta.AnnotationState] != "" {
		return obs, nil
	}
	if prog.Parts == nil && obs.Spec == nil && opts.Submit {
		// Only a submission starts a task; other events of a task not
		// submitted yet find it QUEUED.
		spec, err := r.anchorSpec(anchor)
		if err != nil {
			obs.Unreadable = err.Error()
		} else {
			r.logWarnings(ctx, anchor.Name, spec)
			obs.Spec = spec
		}
	}
	for _, part := range prog.Running() {
		name := taskmeta.ObjectName(anchor.Name, part)
		job, ok := hinted[name]
		if !ok {
			var err error
			if job, err = r.getJob(ctx, anchor.Namespace, name); err != nil {
				return obs, err
			}
		}
		if job != nil {
			obs.Jobs[part] = job
		}
	}
	if opts.Pods {
		var pods *corev1.PodList
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			pods, err = r.Client.CoreV1().Pods(anchor.Namespace).List(ctx, metav1.ListOptions{LabelSelector: taskSelector(anchor.Name)})
			return err
		}); err != nil {
			return obs, err
		}
		obs.Pods = podPointers(pods.Items)
	}
	return obs, nil
}

func jobsByPart(task string, items []batchv1.Job) map[string]*batchv1.Job {
	jobs := make(map[string]*batchv1.Job, len(items))
	for i := range items {
		if t, part, ok := taskmeta.SplitJobName(items[i].Name); ok && t == task {
			jobs[part] = &items[i]
		}
	}
	return jobs
}

func podPointers(items []corev1.Pod) []*corev1.Pod {
	pods := make([]*corev1.Pod, len(items))
	for i := range items {
		pods[i] = &items[i]
	}
	return pods
}

// anchorSpec decodes the task stored on its anchor and checks its executors
// against the allow-list (behaviour §8.8).
func (r *Runner) anchorSpec(anchor *corev1.ConfigMap) (*taskspec.Task, error) {
	data, ok := anchor.BinaryData[taskspec.ConfigMapKey]
	if !ok {
		if s, ok := anchor.Data[taskspec.ConfigMapKey]; ok {
			data = []byte(s)
		} else {
			return nil, fmt.Errorf("ConfigMap %s has no %s", anchor.Name, taskspec.ConfigMapKey)
		}
	}
	spec, err := taskspec.DecodeGzip(data)
	if err != nil {
		return nil, err
	}
	return spec, r.admit(spec, anchor.Namespace)
}

// errRefused marks the error of a task that decodes but is refused.
var errRefused = errors.New("task refused")

// admit checks a task's executors against the allow-list, and its backend
// parameters against the operator's configuration.
func (r *Runner) admit(spec *taskspec.Task, ns string) error {
	if err := Admit(spec, ns, r.Config); err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	return nil
}

func (r *Runner) logNotes(ctx context.Context, task string, notes []Note) {
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

// Reasons of the Events on a task's anchor.
const (
	EventStarted   = "Started"
	EventJobCreate = "JobCreated"
	EventJobFailed = "JobFailed"
	EventJobDelete = "JobDeleted"
	EventCancelled = "Cancelled"
	EventEnded     = "Ended"
)

// maxEventNote is what an Event's note may hold (the API server allows 1 kB).
const maxEventNote = 1000

// event records a Kubernetes Event on the task's anchor, so that `kubectl
// describe configmap <task>` tells the task's story. Recording is
// asynchronous and best effort: a step never waits for it.
func (r *Runner) event(anchor *corev1.ConfigMap, warning bool, reason, format string, a ...any) {
	if r.Events == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	note := fmt.Sprintf(format, a...)
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	r.Events.Eventf(anchor, nil, typ, reason, "Step", "%s", note)
}

// logWarnings logs what a task holds that nothing reads (unknown fields,
// e.g. of a newer TESK API): a warning, not a refusal (behaviour §8.5).
func (r *Runner) logWarnings(ctx context.Context, task string, spec *taskspec.Task) {
	for _, w := range spec.Warnings {
		r.log(ctx).Warnw("The task has a field that is not read; ignoring it", "task", task, "field", w)
	}
}
