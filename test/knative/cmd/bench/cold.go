package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

// handlerSelector picks the pods and Deployments of the handler's Knative
// Service, of every revision.
const handlerSelector = "serving.knative.dev/service=tesk-handler"

// rareSchedule is the sweep's schedule during the cold rounds: once a year,
// so that no ping wakes the handler between two of them.
const rareSchedule = "0 0 1 1 *"

// coldSample is one cold round: the client's create time, the watch seeing
// the first Job, and the times the cluster recorded for the handler pod
// that took the task.
type coldSample struct {
	create, seen                             time.Time
	pod, scheduled, started, ready, firstJob time.Time
	// warm says why the sample is not cold (a handler pod existed, or was
	// asked for, at the create); empty when it was.
	warm string
}

// segments are the parts of a cold start, each from a time the cluster
// recorded to the next; the first starts at the client's create.
var segments = []struct {
	name     string
	from, to func(s coldSample) time.Time
}{
	{"TES create (client) -> handler pod created", func(s coldSample) time.Time { return s.create }, func(s coldSample) time.Time { return s.pod }},
	{"pod created -> PodScheduled", func(s coldSample) time.Time { return s.pod }, func(s coldSample) time.Time { return s.scheduled }},
	{"PodScheduled -> user-container started", func(s coldSample) time.Time { return s.scheduled }, func(s coldSample) time.Time { return s.started }},
	{"user-container started -> pod Ready", func(s coldSample) time.Time { return s.started }, func(s coldSample) time.Time { return s.ready }},
	{"pod Ready -> first Job created", func(s coldSample) time.Time { return s.ready }, func(s coldSample) time.Time { return s.firstJob }},
	{"TES create (client) -> first Job created", func(s coldSample) time.Time { return s.create }, func(s coldSample) time.Time { return s.firstJob }},
}

// handlerPods lists every pod of the handler's Service, in any phase,
// including those being deleted.
func handlerPods(ctx context.Context, env *knative.Env) ([]corev1.Pod, error) {
	list, err := env.C.Client.CoreV1().Pods(knative.Platform).List(ctx, metav1.ListOptions{LabelSelector: handlerSelector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// handlerPresent says what of the handler exists or is being started: a
// pod in any phase, or a revision's Deployment asking for replicas whose
// pod is not created yet; empty when nothing.
func handlerPresent(ctx context.Context, env *knative.Env) (string, error) {
	pods, err := handlerPods(ctx, env)
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		state := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			state += ", terminating"
		}
		return fmt.Sprintf("pod %s (%s) at the create", p.Name, state), nil
	}
	deps, err := env.C.Client.AppsV1().Deployments(knative.Platform).List(ctx, metav1.ListOptions{LabelSelector: handlerSelector})
	if err != nil {
		return "", err
	}
	for _, d := range deps.Items {
		if d.Spec.Replicas != nil && *d.Spec.Replicas > 0 {
			return fmt.Sprintf("Deployment %s asking for %d replicas at the create", d.Name, *d.Spec.Replicas), nil
		}
	}
	return "", nil
}

// waitNoHandler waits until the handler has no pod at all, not even one
// terminating, and no Deployment asking for one.
func waitNoHandler(ctx context.Context, env *knative.Env, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		what, err := handlerPresent(ctx, env)
		if err == nil && what == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tesk-handler still present after %s: %s%v", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// holdSweep sets the sweep's PingSource to a schedule of once a year (its
// v1 spec has no field to suspend it) and returns the schedule it had and
// a func that sets that back.
func holdSweep(ctx context.Context, env *knative.Env) (string, func() error, error) {
	pings := env.C.Dynamic.Resource(knative.PingSourceGVR).Namespace(knative.Platform)
	o, err := pings.Get(ctx, "tesk-sweep", metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	was, _, _ := unstructured.NestedString(o.Object, "spec", "schedule")
	set := func(ctx context.Context, schedule string) error {
		_, err := pings.Patch(ctx, "tesk-sweep", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"schedule":%q}}`, schedule)), metav1.PatchOptions{})
		return err
	}
	if err := set(ctx, rareSchedule); err != nil {
		return "", nil, err
	}
	return was, func() error { return set(context.Background(), was) }, nil
}

// coldSplit reads, once the task's first Job exists, the times the
// cluster recorded for the handler pod that took it, and marks the sample
// warm if a handler pod was created before the create. Kubernetes records
// them to the second, so a pod created in the create's own second counts
// as started by it (the list right before the create sees any older one).
func coldSplit(ctx context.Context, env *knative.Env, id string, s *coldSample) error {
	job, err := env.C.Client.BatchV1().Jobs(knative.Tasks).Get(ctx, id+"-ex-00", metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.firstJob = job.CreationTimestamp.Time
	pods, err := handlerPods(ctx, env)
	if err != nil {
		return err
	}
	createSecond := s.create.Truncate(time.Second)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var pod *corev1.Pod
	for i, p := range pods {
		if p.CreationTimestamp.Time.Before(createSecond) {
			if s.warm == "" {
				s.warm = fmt.Sprintf("pod %s created %s, before the create", p.Name, p.CreationTimestamp.UTC().Format(time.TimeOnly))
			}
			continue
		}
		if pod == nil {
			pod = &pods[i]
		}
	}
	if s.warm != "" {
		return nil
	}
	if pod == nil {
		return fmt.Errorf("task %s: its first Job exists, but no pod of tesk-handler", id)
	}
	s.pod = pod.CreationTimestamp.Time
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
			s.scheduled = c.LastTransitionTime.Time
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			s.ready = c.LastTransitionTime.Time
		}
	}
	s.started = userStarted(pod)
	if s.scheduled.IsZero() || s.started.IsZero() || s.ready.IsZero() {
		return fmt.Errorf("pod %s: scheduled %v, started %v, ready %v: a time not recorded", pod.Name, s.scheduled, s.started, s.ready)
	}
	return nil
}

// userStarted is when the pod's user container (user-container, or else
// the first that is not queue-proxy) started running.
func userStarted(pod *corev1.Pod) time.Time {
	var pick *corev1.ContainerStatus
	for i, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "user-container" {
			pick = &pod.Status.ContainerStatuses[i]
			break
		}
		if pick == nil && cs.Name != "queue-proxy" {
			pick = &pod.Status.ContainerStatuses[i]
		}
	}
	switch {
	case pick == nil:
		return time.Time{}
	case pick.State.Running != nil:
		return pick.State.Running.StartedAt.Time
	case pick.State.Terminated != nil:
		return pick.State.Terminated.StartedAt.Time
	}
	return time.Time{}
}

// minMedMax returns the least, the median (the mean of the middle two for
// an even count) and the greatest of s, which it sorts.
func minMedMax(s []time.Duration) (lo, med, hi time.Duration) {
	if len(s) == 0 {
		return 0, 0, 0
	}
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// printSplit prints, for each segment of the kept cold samples, its least,
// median and greatest, with the total as the watch saw it.
func printSplit(kept []coldSample) {
	fmt.Printf("\ncold start split over the kept samples (times the cluster recorded: creationTimestamp, conditions'\n" +
		"lastTransitionTime and startedAt are to the second, so each segment is within +-1 s; the client's\n" +
		"create and the watch's first Job are to the millisecond; all clocks are this machine's):\n\n")
	fmt.Printf("%-52s %9s %9s %9s %4s\n", "", "min", "median", "max", "n")
	line := func(name string, d []time.Duration) {
		lo, med, hi := minMedMax(d)
		fmt.Printf("%-52s %9s %9s %9s %4d\n", name, ms(lo), ms(med), ms(hi), len(d))
	}
	var total []time.Duration
	for _, s := range kept {
		total = append(total, s.seen.Sub(s.create))
	}
	line("TES create -> first Job seen by the watch (ms)", total)
	for _, seg := range segments {
		var d []time.Duration
		for _, s := range kept {
			d = append(d, seg.to(s).Sub(seg.from(s)))
		}
		line(seg.name, d)
	}
}
