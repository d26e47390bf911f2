package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// What a step reads before it decides: the task's anchor (and the job the
// event names), whether the anchor is one this service acts on, the jobs
// and pods the decision looks at, and the task stored on the anchor.

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

// observe reads what the decision needs: the jobs started and not done, by
// name (so that a step costs the same in a namespace of ten thousand tasks),
// and the task's pods when asked for.
func (r *Runner) observe(ctx context.Context, anchor *corev1.ConfigMap, opts Options, hinted map[string]*batchv1.Job) (steps.Observed, error) {
	obs := steps.Observed{Event: opts.Event, Anchor: anchor.ObjectMeta, Spec: opts.Spec, Jobs: map[string]*batchv1.Job{}}
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

// jobsByPart indexes the task's jobs among items by part; jobs of other
// tasks are left out.
func jobsByPart(task string, items []batchv1.Job) map[string]*batchv1.Job {
	jobs := make(map[string]*batchv1.Job, len(items))
	for i := range items {
		if t, part, ok := taskmeta.SplitJobName(items[i].Name); ok && t == task {
			jobs[part] = &items[i]
		}
	}
	return jobs
}

// podPointers points at each pod of a list.
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
	if err := steps.Admit(spec, ns, r.Config); err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	return nil
}
