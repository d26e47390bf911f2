package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// ranLog is what each executor of the TES benchmark's tasks prints.
const ranLog = "reading /data/in.txt\nhello\n"

// runTESTasks runs the tasks the TES benchmark created through its API to
// their end, so that their views are timed as a client reads a task that
// ran (its logs, its jobs' times): a handler of the namespace under
// config/knative's Role, fed by the ApiServerSource adapter, is sent each
// task's task.submitted (the benchmark's TES API has no sink), and the
// executors' pods on kwok print ranLog. It returns once every task's
// anchor records COMPLETE, and stops the handler and the adapter.
func runTESTasks(ctx context.Context, c *cluster.Cluster, ns string, ids []string) error {
	if err := devstack.ApplyRBAC(ctx, c, filepath.Join("config", "knative", "rbac.yaml"), ns, nil); err != nil {
		return err
	}
	if err := c.SetNamespaceLogs(ctx, ns, ranLog); err != nil {
		return err
	}
	rc, err := serviceAccountConfig(ctx, c, ns, devstack.HandlerRole)
	if err != nil {
		return err
	}
	cfg := steps.DefaultConfig()
	cfg.Namespace = ns
	cfg.ExecutorPodAnnotations = []string{cluster.FateAnnotationPrefix}
	srv, err := eventserver.New(rc, cfg, zap.NewNop().Sugar())
	if err != nil {
		return err
	}
	hs := httptest.NewServer(srv.Echo())
	defer hs.Close()
	a, err := c.StartAdapter(ctx, cluster.AdapterOptions{Namespace: ns, Sink: hs.URL, Resources: devstack.AdapterResources()})
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop() }()
	start := time.Now()
	if err := inParallel(0, len(ids), func(i int) error {
		data, _ := json.Marshal(map[string]string{"task": ids[i]})
		_, err := postEvent(hs.URL, events.TypeTaskSubmitted, data)
		return err
	}); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
		if err != nil {
			return err
		}
		done, other := 0, map[string]string{}
		for _, cm := range cms.Items {
			switch st := cm.Annotations[taskmeta.AnnotationState]; st {
			case tesv1.StateComplete:
				done++
			case "":
			default:
				other[cm.Name] = st
			}
		}
		if len(other) > 0 {
			return fmt.Errorf("TES benchmark: tasks ended otherwise than COMPLETE: %v", other)
		}
		if done == len(ids) {
			fmt.Printf("  the %d tasks ran to COMPLETE in %.1fs (a handler of the namespace, the adapter, kwok's pods)\n", done, time.Since(start).Seconds())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("TES benchmark: %d of %d tasks COMPLETE after 10 minutes", done, len(ids))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// besideAnchor creates a Job and a Pod of one executor beside an anchor of
// the list benchmark, as the handler would create them for the task
// (jobspec.ExecutorJob), that no controller works on: the Job
// suspended, the Pod for a scheduler that does not run. The namespace then
// holds what a namespace of tasks holds besides its anchors, for the
// views' LISTs of jobs and pods to select from.
func besideAnchor(ctx context.Context, c *cluster.Cluster, cm *corev1.ConfigMap) error {
	job := jobspec.ExecutorJob(taskmeta.Anchor{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID},
		&taskspec.Task{Executors: []batchv1.Job{executorJob(cm.Name, 0)}}, 0, jobspec.DefaultConfig())
	yes := true
	job.Spec.Suspend = &yes
	job, err := c.Client.BatchV1().Jobs(cm.Namespace).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// Not the Job's (a suspended Job deletes its pods): its labels but the
	// Job's selector.
	labels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		if _, sel := job.Spec.Selector.MatchLabels[k]; !sel {
			labels[k] = v
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-bench", Labels: labels, Annotations: job.Spec.Template.Annotations},
		Spec:       job.Spec.Template.Spec,
	}
	pod.Spec.SchedulerName = "tesk-bench-none"
	_, err = c.Client.CoreV1().Pods(cm.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	return err
}
