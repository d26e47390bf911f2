package main

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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
