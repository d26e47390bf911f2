package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

// handlerSelector picks the pods and Deployments of the handler's Knative
// Service, of every revision.
const handlerSelector = "serving.knative.dev/service=tesk-handler"

// coldSample is one cold round: the client's create time, the watch seeing
// the first Job, and when the watches saw the handler pod that took the
// task pass each milestone.
type coldSample struct {
	create, seen time.Time
	pod          string
	marks        map[string]time.Time
	// warm says why the sample is not cold (a handler pod existed, or was
	// asked for, at the create); empty when it was.
	warm string
}

// describe lists the sample's milestones as times from the create, in the
// order they were seen.
func (s coldSample) describe() string {
	type mark struct {
		name string
		at   time.Duration
	}
	var ms []mark
	for name, at := range s.marks {
		ms = append(ms, mark{name, at.Sub(s.create).Round(time.Millisecond)})
	}
	slices.SortStableFunc(ms, func(a, b mark) int { return cmp.Compare(a.at, b.at) })
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s +%s", m.name, m.at)
	}
	return s.pod + ": " + strings.Join(parts, ", ")
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

// coldSplit picks, once the task's first Job exists, the handler pod that
// took it (the first the watch saw after the create) and its milestones,
// and marks the sample warm if a handler pod was created before the
// create. creationTimestamp is to the second, so a pod created in the
// create's own second counts as started by it (the list right before the
// create sees any older one).
func coldSplit(ctx context.Context, env *knative.Env, pt *podTimes, id string, s *coldSample) error {
	pods, err := handlerPods(ctx, env)
	if err != nil {
		return err
	}
	createSecond := s.create.Truncate(time.Second)
	for _, p := range pods {
		if p.CreationTimestamp.Time.Before(createSecond) {
			s.warm = fmt.Sprintf("pod %s created %s, before the create", p.Name, p.CreationTimestamp.UTC().Format(time.TimeOnly))
			return nil
		}
	}
	var first time.Time
	for _, p := range pods {
		marks := pt.of(p.Name)
		if at := marks[markCreated]; !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first, s.pod, s.marks = at, p.Name, marks
		}
	}
	if s.pod == "" {
		return fmt.Errorf("task %s: its first Job exists, but the watch saw no pod of tesk-handler", id)
	}
	s.marks[markFirstJobSeen] = s.seen
	return nil
}

// The milestones of a handler pod's start, in the order a cold start
// usually passes them, each the first time a watch saw it: this machine's
// clock, to the millisecond.
const (
	markCreated       = "pod created"
	markScheduled     = "pod scheduled (spec.nodeName)"
	markIP            = "pod IP reported (status.podIP)"
	markQueueStarted  = "queue-proxy running"
	markUserStarted   = "handler's container running"
	markEndpoint      = "in the revision's EndpointSlice"
	markUserReady     = "handler's container ready"
	markPodReady      = "pod Ready"
	markEndpointReady = "ready in the revision's EndpointSlice"
	markFirstJobSeen  = "first Job seen"
	queueContainer    = "queue-proxy"
)

var milestones = []string{markCreated, markScheduled, markIP, markQueueStarted, markUserStarted, markEndpoint, markUserReady, markPodReady, markEndpointReady}

// podMarks lists the milestones a handler pod's object shows.
func podMarks(pod *corev1.Pod) []string {
	marks := []string{markCreated}
	if pod.Spec.NodeName != "" {
		marks = append(marks, markScheduled)
	}
	if pod.Status.PodIP != "" {
		marks = append(marks, markIP)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		// Knative names the Service's own container as the Service does
		// (user-container when it does not); queue-proxy is Knative's.
		started, ready := markUserStarted, markUserReady
		if cs.Name == queueContainer {
			started, ready = markQueueStarted, ""
		}
		if cs.State.Running != nil {
			marks = append(marks, started)
		}
		if cs.Ready && ready != "" {
			marks = append(marks, ready)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			marks = append(marks, markPodReady)
		}
	}
	return marks
}

// sliceMarks lists, by pod, the milestones an EndpointSlice shows: the
// pod among its endpoints, and ready there.
func sliceMarks(s *discoveryv1.EndpointSlice) map[string][]string {
	marks := map[string][]string{}
	for _, e := range s.Endpoints {
		if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
			continue
		}
		m := []string{markEndpoint}
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			m = append(m, markEndpointReady)
		}
		marks[e.TargetRef.Name] = m
	}
	return marks
}

// podTimes records when the watches first saw each handler pod pass each
// milestone.
type podTimes struct {
	mu    sync.Mutex
	marks map[string]map[string]time.Time
	stop  func()
}

func (p *podTimes) see(pod string, marks []string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.marks[pod]
	if m == nil {
		m = map[string]time.Time{}
		p.marks[pod] = m
	}
	for _, k := range marks {
		if _, ok := m[k]; !ok {
			m[k] = now
		}
	}
}

// of returns a copy of a pod's milestones.
func (p *podTimes) of(pod string) map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.marks[pod])
}

// watchHandler watches the handler's pods and the EndpointSlices of the
// namespace ns (the revision's private Service lists the pods Knative
// routes to) and records each milestone as it is first seen. A cold round
// is minutes long, shorter than the API server keeps a watch, but a
// RetryWatcher takes each watch again where it left off all the same.
func watchHandler(ctx context.Context, client kubernetes.Interface, ns string) (*podTimes, error) {
	pt := &podTimes{marks: map[string]map[string]time.Time{}}
	pods := client.CoreV1().Pods(ns)
	podList, err := pods.List(ctx, metav1.ListOptions{LabelSelector: handlerSelector})
	if err != nil {
		return nil, err
	}
	stopPods, err := follow(ctx, podList.Items, podList.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = handlerSelector
		return pods.Watch(ctx, o)
	}, func(pod *corev1.Pod, now time.Time) { pt.see(pod.Name, podMarks(pod), now) })
	if err != nil {
		return nil, err
	}
	eps := client.DiscoveryV1().EndpointSlices(ns)
	sliceList, err := eps.List(ctx, metav1.ListOptions{})
	if err != nil {
		stopPods()
		return nil, err
	}
	stopSlices, err := follow(ctx, sliceList.Items, sliceList.ResourceVersion, eps.Watch, func(s *discoveryv1.EndpointSlice, now time.Time) {
		for pod, marks := range sliceMarks(s) {
			pt.see(pod, marks, now)
		}
	})
	if err != nil {
		stopPods()
		return nil, err
	}
	pt.stop = func() { stopPods(); stopSlices() }
	return pt, nil
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

// printSplit prints, for each milestone of the kept cold samples' handler
// pods and for the first Job, the least, median and greatest time from the
// client's create to a watch seeing it (one machine's clock, to the
// millisecond); n counts the samples whose watch saw the milestone.
func printSplit(kept []coldSample) {
	fmt.Printf("\ncold start split over the kept samples: from the client's TES create to a watch of this\n" +
		"process seeing each milestone of the handler pod that took the task (this machine's clock):\n\n")
	fmt.Printf("%-52s %9s %9s %9s %4s\n", "TES create ->", "min", "median", "max", "n")
	for _, m := range append(slices.Clone(milestones), markFirstJobSeen) {
		var d []time.Duration
		for _, s := range kept {
			if at, ok := s.marks[m]; ok {
				d = append(d, at.Sub(s.create))
			}
		}
		lo, med, hi := minMedMax(d)
		fmt.Printf("%-52s %9s %9s %9s %4d\n", m, ms(lo), ms(med), ms(hi), len(d))
	}
}
