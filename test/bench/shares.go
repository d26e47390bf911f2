package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// The shares' bench: 100 owners under a share of one task, each with one
// task running (its executor's job suspended) and 99 waiting: 10,000 tasks.
const (
	shareOwners  = 100
	shareWaiting = 99
	shareRuns    = 5
)

// benchShares measures what the shares cost a step: a submission whose
// owner's share is full (it waits), one whose owner has room, beside the
// same submission without shares; the end of a task, which gives back its
// place and starts its owner's oldest waiting task; and a sweep of the
// namespace with and without shares.
func benchShares(ctx context.Context, c *cluster.Cluster) error {
	ns := "bench-shares"
	cfg := steps.DefaultConfig()
	cfg.Quota = steps.Quota{Tasks: 1}
	in, err := newInstrumented(ctx, c, ns, cfg)
	if err != nil {
		return err
	}
	begin := time.Now()
	if err := createShareTasks(ctx, c, ns); err != nil {
		return err
	}
	fmt.Printf("== Shares: %d owners under a share of one task, each with one running and %d waiting (%d tasks); created in %.1fs\n",
		shareOwners, shareWaiting, shareOwners*(shareWaiting+1), time.Since(begin).Seconds())
	plain := *in.srv.Runner
	plain.Config.Quota = steps.Quota{}
	measure := func(what string, fn func(i int, ctx context.Context) error) error {
		var ds []time.Duration
		var reqs []int64
		for i := 0; i < shareRuns; i++ {
			counter := new(atomic.Int64)
			start := time.Now()
			if err := fn(i, context.WithValue(ctx, counterKey{}, counter)); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			ds = append(ds, time.Since(start))
			reqs = append(reqs, counter.Load())
		}
		fmt.Printf("  %-58s n=%d time %s  requests %s\n", what, shareRuns, minMedMax(ds), ipct(reqs))
		return nil
	}
	// A waiting task submitted again: its owner's share is full.
	if err := measure("submission, the owner's share full (it waits)", func(i int, ctx context.Context) error {
		res, err := in.srv.Runner.Reconcile(ctx, ns, shareTask(i, 1), runner.Options{Event: fmt.Sprintf("full-%d", i), Submit: true})
		if err == nil && !res.Waiting {
			err = fmt.Errorf("%s started", shareTask(i, 1))
		}
		return err
	}); err != nil {
		return err
	}
	// New owners' tasks: with shares (a ledger read and created), and
	// without, for the ratio.
	if err := createFresh(ctx, c, ns, "fresh-share", shareRuns); err != nil {
		return err
	}
	if err := createFresh(ctx, c, ns, "fresh-plain", shareRuns); err != nil {
		return err
	}
	if err := measure("submission, the owner has room (with shares)", func(i int, ctx context.Context) error {
		_, err := in.srv.Runner.Reconcile(ctx, ns, fmt.Sprintf("fresh-share-%d", i), runner.Options{Event: "room", Submit: true})
		return err
	}); err != nil {
		return err
	}
	if err := measure("submission without shares", func(i int, ctx context.Context) error {
		_, err := plain.Reconcile(ctx, ns, fmt.Sprintf("fresh-plain-%d", i), runner.Options{Event: "plain", Submit: true})
		return err
	}); err != nil {
		return err
	}
	// A running task ends (its job deleted by a cancel): its place goes
	// to its owner's oldest waiting task, which starts.
	for i := 0; i < shareRuns; i++ {
		task := shareTask(i, 0)
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, task, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if _, err := in.srv.Runner.Reconcile(ctx, ns, task, runner.Options{Event: "cancel", Cancel: true}); err != nil {
			return err
		}
	}
	if err := measure("the end of a task that gives its place to a waiting one", func(i int, ctx context.Context) error {
		task := shareTask(i, 0)
		res, err := in.srv.Runner.Reconcile(ctx, ns, task, runner.Options{Event: "gone", GoneJob: taskmeta.ObjectName(task, "ex-00")})
		if err == nil && res.Ended == "" {
			err = fmt.Errorf("%s did not end: %+v", task, res)
		}
		if err == nil {
			next, gerr := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, shareTask(i, 1), metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			if _, started := next.Annotations[taskmeta.AnnotationProgress]; !started {
				err = fmt.Errorf("%s did not start", shareTask(i, 1))
			}
		}
		return err
	}); err != nil {
		return err
	}
	if err := measure("a sweep, with shares", func(i int, ctx context.Context) error {
		_, err := in.srv.Runner.Sweep(ctx, ns, fmt.Sprintf("sweep-share-%d", i), in.srv.Metadata)
		return err
	}); err != nil {
		return err
	}
	// Without shares the waiting tasks would all start: the same number of
	// tasks, running, in a namespace of their own, for the ratio.
	plainNS := ns + "-plain"
	pin, err := newInstrumented(ctx, c, plainNS, steps.DefaultConfig())
	if err != nil {
		return err
	}
	if err := createWaitingTasks(ctx, c, plainNS, 0, shareOwners*(shareWaiting+1)); err != nil {
		return err
	}
	if err := measure("a sweep of as many running tasks, without shares", func(i int, ctx context.Context) error {
		_, err := pin.srv.Runner.Sweep(ctx, plainNS, fmt.Sprintf("sweep-plain-%d", i), pin.srv.Metadata)
		return err
	}); err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// shareTask names the n-th task of owner i (n 0 runs, the others wait).
func shareTask(i, n int) string { return fmt.Sprintf("share-%03d-%03d", i, n) }

// createShareTasks writes the bench's tasks: per owner, one running (its
// anchor started, its executor's job suspended, its place in the owner's
// ledger) and shareWaiting waiting, each created a moment after the last.
func createShareTasks(ctx context.Context, c *cluster.Cluster, ns string) error {
	// A waiting task that starts runs until deleted (kwok's manual fate):
	// the sweeps measured find nothing due but the shares.
	ex := executorJob("x", 0)
	ex.Spec.Template.Annotations = map[string]string{cluster.FateAnnotationPrefix + "result": "manual"}
	spec, _ := json.Marshal(taskspec.Task{Executors: []batchv1.Job{ex}})
	gz := taskspec.Gzip(spec)
	return inParallel(0, shareOwners, func(i int) error { return createOwner(ctx, c, ns, i, gz) })
}

// createOwner writes one owner's tasks and ledger.
func createOwner(ctx context.Context, c *cluster.Cluster, ns string, i int, gz []byte) error {
	owner := fmt.Sprintf("user-%03d", i)
	for n := 0; n <= shareWaiting; n++ {
		task := shareTask(i, n)
		meta := metav1.ObjectMeta{Name: task, Labels: map[string]string{taskmeta.LabelTask: task, taskmeta.LabelCreator: owner},
			Annotations: map[string]string{taskmeta.AnnotationTTL: taskmeta.NoTTL}}
		if n == 0 {
			prog := taskmeta.Progress{Parts: []string{"ex-00"}, Started: []string{"ex-00"}}
			meta.Annotations[taskmeta.AnnotationProgress] = prog.String()
		} else {
			meta.Labels[taskmeta.LabelWaiting] = "true"
			meta.Annotations[taskmeta.AnnotationCores] = "0"
		}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta,
			BinaryData: map[string][]byte{taskspec.ConfigMapKey: gz}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if n == 0 {
			job := jobspec.ExecutorJob(taskmeta.Anchor{Name: task, Namespace: ns, UID: cm.UID},
				&taskspec.Task{Executors: []batchv1.Job{executorJob(task, 0)}}, 0, jobspec.DefaultConfig())
			yes := true
			job.Spec.Suspend = &yes
			if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	ledger := steps.Share{Tasks: map[string]float64{shareTask(i, 0): 0}}
	_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: steps.ShareName(owner), Labels: map[string]string{taskmeta.LabelShare: "true", taskmeta.LabelCreator: owner}},
		Data:       map[string]string{steps.ShareKey: ledger.Encode()},
	}, metav1.CreateOptions{})
	return err
}

// createFresh writes n unstarted tasks of n owners who hold nothing.
func createFresh(ctx context.Context, c *cluster.Cluster, ns, prefix string, n int) error {
	spec, _ := json.Marshal(taskspec.Task{Executors: []batchv1.Job{executorJob("x", 0)}})
	for i := 0; i < n; i++ {
		task := fmt.Sprintf("%s-%d", prefix, i)
		_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: task,
			Labels:      map[string]string{taskmeta.LabelTask: task, taskmeta.LabelCreator: task},
			Annotations: map[string]string{taskmeta.AnnotationTTL: taskmeta.NoTTL}},
			BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(spec)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	return nil
}

// minMedMax is the minimum, median and maximum of a few samples.
func minMedMax(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("min %.1fms median %.1fms max %.1fms", ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
}
