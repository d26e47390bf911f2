package tes

import (
	"context"
	"errors"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// task reads a task's jobs and pods and returns it in a view.
func (s *Server) task(ctx context.Context, cm *corev1.ConfigMap, view string) (tesv1.Task, error) {
	sel := labels.Set{taskmeta.LabelTask: cm.Name}.String()
	jobs, pods, err := s.store().JobsAndPods(ctx, sel)
	if err != nil {
		return tesv1.Task{}, err
	}
	return s.build(ctx, cm, jobs, pods, view), nil
}

// build derives a task in a view from its anchor, jobs and pods (those of
// other tasks are left out).
func (s *Server) build(ctx context.Context, cm *corev1.ConfigMap, jobs []batchv1.Job, pods []corev1.Pod, view string) tesv1.Task {
	id := cm.Name
	byPart := map[string]*batchv1.Job{}
	for i := range jobs {
		if t, part, ok := taskmeta.SplitJobName(jobs[i].Name); ok && t == id && jobs[i].Labels[taskmeta.LabelTask] == id {
			byPart[part] = &jobs[i]
		}
	}
	podList := []*corev1.Pod{}
	for i := range pods {
		if pods[i].Labels[taskmeta.LabelTask] == id {
			podList = append(podList, &pods[i])
		}
	}
	v := steps.BuildView(cm.ObjectMeta, byPart, podList, s.Config.Steps, s.now())
	out := tesv1.Task{ID: id, State: v.State}
	if view == tesv1.ViewMinimal {
		return out
	}
	stored, ok := StoredTask(cm)
	if !ok {
		stored = taskFromSpec(cm)
	}
	out.Name, out.Description = stored.Name, stored.Description
	out.Inputs, out.Outputs, out.Resources = stored.Inputs, stored.Outputs, stored.Resources
	out.Executors, out.Volumes, out.Tags = stored.Executors, stored.Volumes, stored.Tags
	out.CreationTime = v.CreationTime
	if view == tesv1.ViewBasic {
		out.Inputs = make([]tesv1.Input, len(stored.Inputs))
		for i, in := range stored.Inputs {
			in.Content = ""
			out.Inputs[i] = in
		}
		if len(out.Inputs) == 0 {
			out.Inputs = nil
		}
	}
	out.Logs = s.taskLogs(ctx, v, byPart, podList, view)
	if len(out.Logs) > 0 {
		req := s.requested(stored.Resources)
		out.Logs[0].Metadata = steps.Usage(out.Logs[0], byPart, req, s.now())
		if s.Config.Prices.On() {
			out.Logs[0].Metadata[steps.PricePerHourKey] = steps.PricePerHour(req, s.Config.Prices)
		}
	}
	return out
}

// requested is what a task asked for, as its usage weighs it: its
// resources, the disk of a task without one as the handler sizes it.
func (s *Server) requested(r *tesv1.Resources) steps.Requested {
	req := steps.Requested{DiskGB: s.Config.Steps.DefaultDiskGB}
	if req.DiskGB == 0 {
		req.DiskGB = jobspec.DefaultDiskGB
	}
	if r != nil {
		req.CPUCores, req.RAMGB = float64(r.CPUCores), r.RAMGB
		if r.DiskGB > 0 {
			req.DiskGB = r.DiskGB
		}
	}
	return req
}

// taskLogs keeps of the view's log what the view shows: every executor's
// log, in the executors' order; FULL adds the ends of each executor's stdout
// and stderr (recorded on its job once it ended, read from its pod while it
// runs) and the system logs.
func (s *Server) taskLogs(ctx context.Context, v tesv1.Task, jobs map[string]*batchv1.Job, pods []*corev1.Pod, view string) []tesv1.TaskLog {
	parts := steps.ExecutorParts(jobs)
	logs := v.Logs
	for i := range logs {
		for k := range logs[i].Logs {
			el := &logs[i].Logs[k]
			if view != tesv1.ViewFull {
				el.Stdout, el.Stderr = "", ""
				continue
			}
			if k >= len(parts) {
				continue
			}
			if _, recorded := steps.RecordedLog(jobs[parts[k]]); !recorded {
				el.Stdout, el.Stderr = s.liveLog(ctx, jobs[parts[k]].Name, pods)
			}
		}
		if view != tesv1.ViewFull {
			logs[i].SystemLogs = nil
		}
	}
	return logs
}

// liveLog is the end of the streams of a job's last pod, read at a cost
// bounded by the log tail's bytes (runner.LiveExecutorLog); "" if it cannot
// be read.
func (s *Server) liveLog(ctx context.Context, job string, pods []*corev1.Pod) (stdout, stderr string) {
	last := steps.LastPod(pods, job)
	if last == nil || len(last.Spec.Containers) == 0 {
		return "", ""
	}
	stdout, stderr, err := runner.LiveExecutorLog(ctx, s.Client, s.Config.Namespace, last.Name, last.Spec.Containers[0].Name, s.Config.LogTailBytes)
	if err != nil {
		s.Log.Debugw("Executor log not readable", "pod", last.Name, "error", err)
	}
	return stdout, stderr
}

// viewChunk is how many tasks of a page one set of LIST calls reads.
const viewChunk = 256

// views reads the page's tasks in a view, their states derived as GET
// derives them: for each chunk of the page, two LIST calls (their jobs,
// their pods, selected by the task label's values), whatever the namespace
// holds besides, and for BASIC and FULL a third (the anchors, for the
// submitted task). A task deleted meanwhile keeps its place with the state
// its metadata gives.
//
// read holds anchors already read whole (by the list's scan): a chunk whose
// anchors are all there is not read again.
func (s *Server) views(ctx context.Context, page []metav1.ObjectMeta, view string, out []tesv1.Task, read map[string]*corev1.ConfigMap) error {
	for from := 0; from < len(page); from += viewChunk {
		chunk := page[from:min(from+viewChunk, len(page))]
		names := make([]string, len(chunk))
		for i, m := range chunk {
			names[i] = m.Name
		}
		req, err := labels.NewRequirement(taskmeta.LabelTask, selection.In, names)
		if err != nil {
			return err
		}
		sel := labels.NewSelector().Add(*req).String()
		var cms []corev1.ConfigMap
		var cerr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			if view == tesv1.ViewMinimal {
				// The metadata listed holds all that MINIMAL shows.
				for _, m := range chunk {
					cms = append(cms, corev1.ConfigMap{ObjectMeta: m})
				}
				return
			}
			for _, m := range chunk {
				cm, ok := read[m.Name]
				if !ok {
					cms, cerr = s.store().Anchors(ctx, sel)
					return
				}
				cms = append(cms, *cm)
			}
		}()
		jobs, pods, err := s.store().JobsAndPods(ctx, sel)
		<-done
		if err = errors.Join(err, cerr); err != nil {
			return err
		}
		byName := map[string]*corev1.ConfigMap{}
		for i := range cms {
			if taskmeta.IsAnchor(cms[i].ObjectMeta) {
				byName[cms[i].Name] = &cms[i]
			}
		}
		jobsOf := map[string][]batchv1.Job{}
		for _, j := range jobs {
			jobsOf[j.Labels[taskmeta.LabelTask]] = append(jobsOf[j.Labels[taskmeta.LabelTask]], j)
		}
		podsOf := map[string][]corev1.Pod{}
		for _, p := range pods {
			podsOf[p.Labels[taskmeta.LabelTask]] = append(podsOf[p.Labels[taskmeta.LabelTask]], p)
		}
		// FULL reads each executor's log: a few tasks at a time.
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, m := range chunk {
			cm, ok := byName[m.Name]
			if !ok {
				out[from+i] = s.build(ctx, &corev1.ConfigMap{ObjectMeta: m}, nil, nil, tesv1.ViewMinimal)
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				out[from+i] = s.build(ctx, cm, jobsOf[m.Name], podsOf[m.Name], view)
			}()
		}
		wg.Wait()
	}
	return nil
}

// fill reads a page's tasks in a view richer than MINIMAL.
func (s *Server) fill(ctx context.Context, page []metav1.ObjectMeta, view string, tasks []tesv1.Task) error {
	if view == tesv1.ViewMinimal {
		return nil
	}
	return s.views(ctx, page, view, tasks, nil)
}
