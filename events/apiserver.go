package events

import (
	"encoding/json"
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ApiServerSource event types: resource mode carries the object, ref mode a
// reference to it.
const (
	resourcePrefix = apiServerPrefix + "resource."
	refPrefix      = apiServerPrefix + "ref."

	TypeResourceAdd    = resourcePrefix + "add"
	TypeResourceUpdate = resourcePrefix + "update"
	TypeResourceDelete = resourcePrefix + "delete"
	TypeRefAdd         = refPrefix + "add"
	TypeRefUpdate      = refPrefix + "update"
	TypeRefDelete      = refPrefix + "delete"
)

// ref names the object of an event: ref mode carries apiVersion, kind, name
// and namespace; resource mode the object, with its name in metadata.
type ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// kindsByResource maps the resource of an event's subject
// (/apis/batch/v1/namespaces/ns/jobs/name) to its kind.
var kindsByResource = map[string]string{"jobs": "Job", "pods": "Pod", "configmaps": "ConfigMap"}

// classifyAPIServer translates a Job, Pod or ConfigMap change into the step it
// means. A change that asks for nothing (a job that still runs, a pod that is
// starting) is ignored without reading the cluster, so that a waiting task
// costs no API request.
func classifyAPIServer(ev *cloudevents.Event, namespace string) (Step, error) {
	t := ev.Type()
	var verb string
	var resource bool
	switch t {
	case TypeResourceAdd, TypeResourceUpdate, TypeResourceDelete:
		verb, resource = strings.TrimPrefix(t, resourcePrefix), true
	case TypeRefAdd, TypeRefUpdate, TypeRefDelete:
		verb = strings.TrimPrefix(t, refPrefix)
	default:
		return Step{}, bad("unknown ApiServerSource event type %q", t)
	}
	var r ref
	if err := json.Unmarshal(ev.Data(), &r); err != nil {
		return Step{}, bad("%s: data is not a Kubernetes object: %v", t, err)
	}
	if resource {
		r.Name, r.Namespace = r.Metadata.Name, r.Metadata.Namespace
	}
	if r.Kind == "" {
		if parts := strings.Split(ev.Subject(), "/"); len(parts) >= 2 {
			r.Kind = kindsByResource[parts[len(parts)-2]]
		}
	}
	if r.Kind == "" || r.Name == "" {
		return Step{}, bad("%s: data has no kind or name", t)
	}
	if r.Namespace != "" && r.Namespace != namespace {
		return ignore("object in namespace %q, not %q", r.Namespace, namespace), nil
	}
	switch r.Kind {
	case "Job":
		return classifyJob(ev, r, verb, resource, namespace)
	case "Pod":
		return classifyPod(ev, r, verb, resource, namespace)
	case "ConfigMap":
		return classifyAnchor(ev, r, verb, resource, namespace)
	}
	return ignore("kind %s is not watched", r.Kind), nil
}

func classifyJob(ev *cloudevents.Event, r ref, verb string, resource bool, namespace string) (Step, error) {
	task, _, ok := taskmeta.SplitJobName(r.Name)
	step := Step{Kind: KindReconcile, Namespace: namespace, Job: r.Name, Deleted: verb == "delete"}
	if resource {
		var job batchv1.Job
		if err := json.Unmarshal(ev.Data(), &job); err != nil {
			return Step{}, bad("%s: data is not a Job: %v", ev.Type(), err)
		}
		if l := job.Labels[taskmeta.LabelTask]; l != "" {
			task, ok = l, true
		}
		if verb != "delete" && taskmeta.StatusOf(&job) == taskmeta.JobRunning && job.DeletionTimestamp == nil {
			return ignore("job %s is still running", r.Name), nil
		}
		if verb != "delete" && taskmeta.StatusOf(&job) != taskmeta.JobRunning {
			step.Seen = &job
		}
	}
	if !ok {
		return ignore("job %s is not a task's job", r.Name), nil
	}
	step.Task = task
	return step, nil
}

func classifyPod(ev *cloudevents.Event, r ref, verb string, resource bool, namespace string) (Step, error) {
	job, ok := taskmeta.JobOfPodName(r.Name)
	var task string
	if ok {
		task, _, ok = taskmeta.SplitJobName(job)
	}
	step := Step{Kind: KindPods, Namespace: namespace, Pod: r.Name}
	if resource {
		var pod corev1.Pod
		if err := json.Unmarshal(ev.Data(), &pod); err != nil {
			return Step{}, bad("%s: data is not a Pod: %v", ev.Type(), err)
		}
		if l := pod.Labels[taskmeta.LabelTask]; l != "" {
			task, ok = l, true
		}
		if j := pod.Labels[batchv1.JobNameLabel]; j != "" {
			job = j
		}
		if verb == "delete" {
			return ignore("pod %s was deleted", r.Name), nil
		}
		reason, message, stuck := taskmeta.StuckReason(&pod)
		if !stuck {
			// A pod the cluster takes away is counted (steps.MaxPreemptions).
			reason, message, stuck = taskmeta.Disrupted(&pod)
		}
		if !stuck {
			return ignore("pod %s is neither stuck nor taken away", r.Name), nil
		}
		step.Reason, step.Message = reason, message
	}
	if !ok || job == "" {
		return ignore("pod %s is not a task's pod", r.Name), nil
	}
	step.Task, step.Job = task, job
	return step, nil
}

func classifyAnchor(ev *cloudevents.Event, r ref, verb string, resource bool, namespace string) (Step, error) {
	if verb == "delete" {
		return ignore("ConfigMap %s was deleted", r.Name), nil
	}
	if !resource {
		if errs := validation.IsDNS1123Label(r.Name); len(errs) > 0 || len(r.Name) > MaxTaskNameLen {
			return ignore("ConfigMap %s is not a task's anchor", r.Name), nil
		}
		return Step{Kind: KindReconcile, Task: r.Name, Namespace: namespace}, nil
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(ev.Data(), &cm); err != nil {
		return Step{}, bad("%s: data is not a ConfigMap: %v", ev.Type(), err)
	}
	if cm.Labels[taskmeta.LabelTask] != cm.Name {
		return ignore("ConfigMap %s is not a task's anchor", r.Name), nil
	}
	if cm.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled && cm.Annotations[taskmeta.AnnotationState] == "" {
		return Step{Kind: KindCancel, Task: cm.Name, Namespace: namespace}, nil
	}
	return ignore("ConfigMap %s asks for nothing", r.Name), nil
}

func ignore(format string, a ...any) Step {
	return Step{Kind: KindIgnore, Why: fmt.Sprintf(format, a...)}
}
