package steps

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"knative.dev/pkg/logging"

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
	// Backoff bounds the retries of transient API errors within a call.
	Backoff wait.Backoff
}

// DefaultBackoff retries a transient API error 5 times, from 50 ms, doubling,
// for at most about 1.5 s in all.
var DefaultBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: time.Second}

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
}

// ErrUnknownTask is returned for a task without an anchor.
var ErrUnknownTask = errors.New("unknown task")

// BadInputError is an input that can never succeed; it changed nothing.
type BadInputError struct{ Err error }

func (e *BadInputError) Error() string { return e.Err.Error() }
func (e *BadInputError) Unwrap() error { return e.Err }

// IsTransient reports whether an API error may pass if tried again.
func IsTransient(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Code >= 500
	}
	return false
}

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
		return DefaultBackoff
	}
	return r.Backoff
}

// call runs one API request, retrying transient errors with bounded backoff.
func (r *Runner) call(ctx context.Context, fn func(context.Context) error) error {
	return retry.OnError(r.backoff(), func(err error) bool { return IsTransient(err) && ctx.Err() == nil }, func() error {
		return fn(ctx)
	})
}

func taskSelector(task string) string {
	return labels.Set{LabelTask: task}.String()
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
	// Submit: the step is the task's submission, which may start it.
	Submit bool
}

// Reconcile reads the task, decides its next step and applies it.
func (r *Runner) Reconcile(ctx context.Context, ns, task string, opts Options) (Result, error) {
	res := Result{Task: task, Namespace: ns, Actions: []Action{}}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		anchor, hinted, err := r.readAnchor(ctx, ns, task, opts.Job)
		if err != nil {
			return res, err
		}
		if part, ok := stale(anchor, opts); ok {
			// A later change of a job the task is already past (e.g. its
			// Complete condition after SuccessCriteriaMet): nothing to do.
			res.Message = fmt.Sprintf("job %s is done; the task is past it", ObjectName(task, part))
			return res, nil
		}
		obs, err := r.observe(ctx, anchor, opts, hinted)
		if err != nil {
			return res, err
		}
		plan := Decide(obs, r.Config, r.now())
		r.logNotes(ctx, task, plan.Notes)
		res.State = plan.State
		again, err := r.apply(ctx, anchor, obs, plan, &res)
		if err != nil {
			return res, err
		}
		if !again {
			return res, nil
		}
	}
	return res, fmt.Errorf("task %s changed under %d attempts of the step; try again", task, maxAttempts)
}

// stale reports whether the event is about a job that the task recorded as
// done, and asks for nothing else.
func stale(anchor *corev1.ConfigMap, opts Options) (string, bool) {
	t, part, ok := SplitJobName(opts.Job)
	if !ok || t != anchor.Name || opts.GoneJob != "" || opts.Pods || opts.Spec != nil {
		return "", false
	}
	if anchor.Labels[LabelStatus] == StatusCancelled || anchor.Annotations[AnnotationState] != "" {
		return "", false
	}
	prog, err := ParseProgress(anchor.Annotations[AnnotationProgress])
	return part, err == nil && prog.IsDone(part)
}

// readAnchor reads the task's anchor and, at the same time, the job the event
// named (most often the one the step looks at).
func (r *Runner) readAnchor(ctx context.Context, ns, task, job string) (*corev1.ConfigMap, map[string]*batchv1.Job, error) {
	hinted := map[string]*batchv1.Job{}
	var wg sync.WaitGroup
	var jerr error
	if t, _, ok := SplitJobName(job); ok && t == task {
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
		hinted = map[string]*batchv1.Job{} // read it again in observe
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
	prog, _ := ParseProgress(anchor.Annotations[AnnotationProgress])
	if t, part, ok := SplitJobName(opts.GoneJob); ok && t == anchor.Name {
		obs.Gone = part
	}
	if anchor.Annotations[AnnotationState] != "" {
		return obs, nil
	}
	if prog.Parts == nil && obs.Spec == nil && opts.Submit {
		// Only a submission starts a task; other events of a task not
		// submitted yet find it QUEUED.
		spec, err := anchorSpec(anchor)
		if err != nil {
			return obs, &BadInputError{Err: err}
		}
		obs.Spec = spec
	}
	for _, part := range prog.Running() {
		name := ObjectName(anchor.Name, part)
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
		if t, part, ok := SplitJobName(items[i].Name); ok && t == task {
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

// anchorSpec decodes the task stored on its anchor.
func anchorSpec(anchor *corev1.ConfigMap) (*taskspec.Task, error) {
	data, ok := anchor.BinaryData[taskspec.ConfigMapKey]
	if !ok {
		if s, ok := anchor.Data[taskspec.ConfigMapKey]; ok {
			data = []byte(s)
		} else {
			return nil, fmt.Errorf("ConfigMap %s has no %s", anchor.Name, taskspec.ConfigMapKey)
		}
	}
	return taskspec.DecodeGzip(data)
}

// apply carries out a plan: the progress first, the actions, the final state
// last. It reports whether the step must be decided again.
func (r *Runner) apply(ctx context.Context, anchor *corev1.ConfigMap, obs Observed, plan Plan, res *Result) (bool, error) {
	a := Anchor{Name: anchor.Name, Namespace: anchor.Namespace, UID: anchor.UID}
	rv := anchor.ResourceVersion
	if plan.Progress != nil {
		var err error
		rv, err = r.patchAnchor(ctx, anchor, rv, map[string]any{
			"labels":      map[string]string{LabelTask: anchor.Name},
			"annotations": map[string]string{AnnotationProgress: plan.Progress.String()},
		})
		if apierrors.IsConflict(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	spec := obs.Spec
	needSpec := func() (*taskspec.Task, error) {
		if spec != nil {
			return spec, nil
		}
		var err error
		spec, err = anchorSpec(anchor)
		return spec, err
	}
	for _, act := range plan.Actions {
		res.Actions = append(res.Actions, act)
		again, err := r.do(ctx, a, anchor, act, needSpec)
		if err != nil || again {
			return again, err
		}
	}
	if plan.Final != nil {
		_, err := r.patchAnchor(ctx, anchor, rv, map[string]any{"annotations": map[string]string{
			AnnotationState:  plan.Final.State,
			AnnotationEnded:  r.now().UTC().Format(time.RFC3339),
			AnnotationReason: plan.Final.Reason,
		}})
		if apierrors.IsConflict(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		r.log(ctx).Infow("Task ended", "task", anchor.Name, "state", plan.Final.State, "reason", plan.Final.Reason)
	}
	return false, nil
}

// do carries out one action.
func (r *Runner) do(ctx context.Context, a Anchor, anchor *corev1.ConfigMap, act Action, needSpec func() (*taskspec.Task, error)) (bool, error) {
	ns := a.Namespace
	jobs := r.Client.BatchV1().Jobs(ns)
	name := ObjectName(a.Name, act.Part)
	switch act.Kind {
	case CreatePVC:
		spec, err := needSpec()
		if err != nil {
			return false, &BadInputError{Err: err}
		}
		err = r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, BuildPVC(a, spec, r.Config), metav1.CreateOptions{})
			return err
		})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return r.refused(ctx, anchor, act, err)
	case CreateJob:
		spec, err := needSpec()
		if err != nil {
			return false, &BadInputError{Err: err}
		}
		var job *batchv1.Job
		if i, ok := ExecutorIndex(act.Part); ok {
			if i >= len(spec.Executors) {
				return false, &BadInputError{Err: fmt.Errorf("task %s: its progress names executor %d, but it has %d", a.Name, i, len(spec.Executors))}
			}
			job = BuildExecutorJob(a, spec, i, r.Config)
		} else {
			job = BuildFilerJob(a, act.Part, r.Config)
		}
		err = r.call(ctx, func(ctx context.Context) error {
			_, err := jobs.Create(ctx, job, metav1.CreateOptions{})
			return err
		})
		if apierrors.IsAlreadyExists(err) {
			return r.checkOurs(ctx, anchor, act)
		}
		if err == nil {
			r.log(ctx).Infow("Created job", "task", a.Name, "job", name)
		}
		return r.refused(ctx, anchor, act, err)
	case FailJob:
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{
				AnnotationFailed: act.Reason, AnnotationFailedAt: r.now().UTC().Format(time.RFC3339),
			}},
			"spec": map[string]any{"activeDeadlineSeconds": 1},
		})
		err := r.call(ctx, func(ctx context.Context) error {
			_, err := jobs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		switch {
		case err == nil:
			r.log(ctx).Infow("Failed job (activeDeadlineSeconds: 1)", "task", a.Name, "job", name, "reason", act.Reason)
			return false, nil
		case apierrors.IsNotFound(err):
			return true, nil
		case IsTransient(err):
			return false, err
		}
		// Rejected (e.g. the role lacks patch on jobs): delete it instead,
		// as earlier releases did, and stop.
		reason := fmt.Sprintf("%s; failing job '%s' was rejected (%v), so it was deleted", act.Reason, name, err)
		r.log(ctx).Warnw("Failing a job was rejected; deleting it", "task", a.Name, "job", name, "error", err)
		return r.endPart(ctx, anchor, act.Part, reason, true)
	case DeleteJob:
		return false, r.deleteJob(ctx, ns, name)
	case DeletePVC:
		err := r.call(ctx, func(ctx context.Context) error {
			return r.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, PVCName(a.Name), metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			r.log(ctx).Warnw("Deleting the PVC failed; going on", "task", a.Name, "pvc", PVCName(a.Name), "error", err)
		}
		return false, nil
	case ReleasePVC:
		err := r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, PVCName(a.Name), types.MergePatchType,
				[]byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			r.log(ctx).Warnw("Releasing the kept PVC from its task failed; deleting the task will delete it", "task", a.Name, "error", err)
		} else {
			r.log(ctx).Infow("Keeping the PVC (KEEP_FAILED_PVC)", "task", a.Name, "pvc", PVCName(a.Name))
		}
		return false, nil
	case RecordOutputFileLogs:
		r.recordOutputFileLogs(ctx, a, name, needSpec)
		return false, nil
	case DeleteTask:
		bg := metav1.DeletePropagationBackground
		err := r.call(ctx, func(ctx context.Context) error {
			return r.Client.CoreV1().ConfigMaps(ns).Delete(ctx, a.Name, metav1.DeleteOptions{
				PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &a.UID},
			})
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, err
		}
		r.log(ctx).Infow("Deleted the task and all it owns", "task", a.Name, "reason", act.Reason)
		return false, nil
	}
	return false, fmt.Errorf("unknown action %q", act.Kind)
}

// refused handles the answer to a create: the API server's refusal of the
// object (invalid, e.g. a FILER_RESOURCES it does not accept) can never
// succeed, so the task stops with it; other errors are returned.
func (r *Runner) refused(ctx context.Context, anchor *corev1.ConfigMap, act Action, err error) (bool, error) {
	if err == nil {
		return false, nil
	}
	if !isRefusal(err) {
		return false, err
	}
	reason := fmt.Sprintf("Creating %s was refused: %v", describe(anchor.Name, act.Part), err)
	r.log(ctx).Errorw("Creating an object was refused; the task stops", "task", anchor.Name, "part", act.Part, "error", err)
	return r.endPart(ctx, anchor, act.Part, reason, false)
}

// isRefusal reports whether the API server refused an object for what it is
// (invalid, bad request): trying again cannot help. Errors of access (401,
// 403), a missing namespace, conflicts and throttling are not refusals: an
// operator can fix those, and the event comes again.
func isRefusal(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || IsTransient(err) {
		return false
	}
	switch se.Status().Code {
	case 401, 403, 404, 409, 429:
		return false
	}
	return se.Status().Code >= 400 && se.Status().Code < 500
}

// checkOurs: a job that already exists is done if the task owns it; a job of
// the same name that it does not own stops the task.
func (r *Runner) checkOurs(ctx context.Context, anchor *corev1.ConfigMap, act Action) (bool, error) {
	name := ObjectName(anchor.Name, act.Part)
	var job *batchv1.Job
	err := r.call(ctx, func(ctx context.Context) (err error) {
		job, err = r.Client.BatchV1().Jobs(anchor.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, o := range job.OwnerReferences {
		if o.UID == anchor.UID {
			return false, nil
		}
	}
	return r.endPart(ctx, anchor, act.Part, fmt.Sprintf("Job '%s' exists but does not belong to the task", name), false)
}

// endPart records that the service ended a part, and why, then (for a job it
// deletes) deletes it; the step is then decided again, and stops the task.
func (r *Runner) endPart(ctx context.Context, anchor *corev1.ConfigMap, part, reason string, deleteJob bool) (bool, error) {
	// Re-read: this step may have written the progress already.
	fresh, err := r.getAnchor(ctx, anchor.Namespace, anchor.Name)
	if err != nil {
		return false, err
	}
	prog, _ := ParseProgress(fresh.Annotations[AnnotationProgress])
	next := prog.withEnded(part, reason)
	if _, err := r.patchAnchor(ctx, fresh, fresh.ResourceVersion, map[string]any{
		"annotations": map[string]string{AnnotationProgress: next.String()},
	}); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	if deleteJob {
		if err := r.deleteJob(ctx, anchor.Namespace, ObjectName(anchor.Name, part)); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (r *Runner) deleteJob(ctx context.Context, ns, name string) error {
	fg := metav1.DeletePropagationForeground
	err := r.call(ctx, func(ctx context.Context) error {
		return r.Client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.log(ctx).Infow("Deleted job", "job", name, "namespace", ns)
	return nil
}

// patchAnchor merges metadata into the anchor, on the condition that it is
// still at resourceVersion rv; it returns the new resourceVersion.
func (r *Runner) patchAnchor(ctx context.Context, anchor *corev1.ConfigMap, rv string, meta map[string]any) (string, error) {
	meta["resourceVersion"] = rv
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	var out *corev1.ConfigMap
	err := r.call(ctx, func(ctx context.Context) (err error) {
		out, err = r.Client.CoreV1().ConfigMaps(anchor.Namespace).Patch(ctx, anchor.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	return out.ResourceVersion, nil
}

// recordOutputFileLogs stores the uploaded files on the outputs filer's job.
// Any error is a warning: the task completes without the annotation.
func (r *Runner) recordOutputFileLogs(ctx context.Context, a Anchor, job string, needSpec func() (*taskspec.Task, error)) {
	warn := func(msg string, err error) {
		r.log(ctx).Warnw(msg+"; the task completes without the output file logs", "task", a.Name, "job", job, "error", err)
	}
	spec, err := needSpec()
	if err != nil {
		warn("Reading the task failed", err)
		return
	}
	var pods *corev1.PodList
	err = r.call(ctx, func(ctx context.Context) (err error) {
		pods, err = r.Client.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{batchv1.JobNameLabel: job}.String(),
		})
		return err
	})
	if err != nil {
		warn("Listing the outputs filer's pods failed", err)
		return
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded && (pod == nil || p.CreationTimestamp.After(pod.CreationTimestamp.Time)) {
			pod = p
		}
	}
	if pod == nil {
		warn("The outputs filer has no succeeded pod", errors.New("no pod"))
		return
	}
	tail := int64(OutputLogTailLines)
	var log []byte
	err = r.call(ctx, func(ctx context.Context) (err error) {
		log, err = r.Client.CoreV1().Pods(a.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		return err
	})
	if err != nil {
		warn("Reading the outputs filer's log failed", err)
		return
	}
	value, notes, err := OutputFileLogs(spec, string(log))
	r.logNotes(ctx, a.Name, notes)
	if err != nil {
		warn("The outputs filer's log has no valid file list", err)
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationOutputFileLogs: value}}})
	err = r.call(ctx, func(ctx context.Context) error {
		_, err := r.Client.BatchV1().Jobs(a.Namespace).Patch(ctx, job, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		warn("Annotating the outputs filer's job failed", err)
	}
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
