package main

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A watch the API server ends is taken again from the last version seen:
// a Job that completes after that is still recorded.
func TestJobTimesOutliveAnEndedWatch(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
	})
	watches := make(chan *watch.FakeWatcher, 2)
	rvs := make(chan string, 2)
	client.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(1, false)
		rvs <- a.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion
		watches <- w
		return true, w, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	jobs, err := watchJobs(ctx, client, "tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.stop()

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "task-a-ex-00", Namespace: "tasks", ResourceVersion: "5"}}
	next := func() *watch.FakeWatcher {
		select {
		case w := <-watches:
			return w
		case <-ctx.Done():
			t.Fatal("the watch the API server ended was not taken again")
			return nil
		}
	}
	first := next()
	first.Add(job.DeepCopy())
	first.Stop() // the API server ends the watch
	second := next()
	if rv := []string{<-rvs, <-rvs}; rv[0] != "1" || rv[1] != "5" {
		t.Fatalf("watches from versions %v, want 1 then 5 (the last seen)", rv)
	}
	done := job.DeepCopy()
	done.ResourceVersion = "9"
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	second.Modify(done)
	for {
		added, complete := jobs.get(job.Name)
		if !added.IsZero() && !complete.IsZero() {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("job added at %v, complete at %v: the second watch's change not recorded", added, complete)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A handler pod's object and its revision's EndpointSlice show the
// milestones of its start; each is recorded the first time it is seen.
func TestColdStartMilestones(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	yes, no := true, false
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want []string
	}{
		{"created", corev1.Pod{}, []string{markCreated}},
		{"scheduled", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, []string{markCreated, markScheduled}},
		{"queue-proxy running, the handler's container waiting", corev1.Pod{
			Spec: corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{PodIP: "10.0.0.2", ContainerStatuses: []corev1.ContainerStatus{
				{Name: "queue-proxy", State: running},
				{Name: "handler"},
			}},
		}, []string{markCreated, markScheduled, markIP, markQueueStarted}},
		{"Ready", corev1.Pod{
			Spec: corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{PodIP: "10.0.0.2", ContainerStatuses: []corev1.ContainerStatus{
				{Name: "handler", State: running, Ready: true},
				{Name: "queue-proxy", State: running, Ready: true},
			}, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}, []string{markCreated, markScheduled, markIP, markUserStarted, markUserReady, markQueueStarted, markPodReady}},
		{"not Ready", corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}, []string{markCreated}},
	} {
		if got := podMarks(&tc.pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: podMarks = %q, want %q", tc.name, got, tc.want)
		}
	}

	slice := discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "h-1"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "h-2"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
		{TargetRef: &corev1.ObjectReference{Kind: "Node", Name: "n"}},
		{},
	}}
	got := sliceMarks(&slice)
	want := map[string][]string{"h-1": {markEndpoint}, "h-2": {markEndpoint, markEndpointReady}}
	if len(got) != len(want) || !slices.Equal(got["h-1"], want["h-1"]) || !slices.Equal(got["h-2"], want["h-2"]) {
		t.Errorf("sliceMarks = %q, want %q", got, want)
	}

	pt := &podTimes{marks: map[string]map[string]time.Time{}}
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	pt.see("h-1", []string{markCreated}, t0)
	pt.see("h-1", []string{markCreated, markScheduled}, t0.Add(time.Second))
	m := pt.of("h-1")
	if !m[markCreated].Equal(t0) || !m[markScheduled].Equal(t0.Add(time.Second)) {
		t.Errorf("milestones %v: want created at %v (its first sighting), scheduled a second later", m, t0)
	}
	m[markPodReady] = t0
	if _, ok := pt.of("h-1")[markPodReady]; ok {
		t.Error("of returned the recorder's own map, not a copy")
	}
}
