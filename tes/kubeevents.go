package tes

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// KubeEventsPath is this service's extension to TES: a task's story, its
// Kubernetes Events and its steps' times (GET, under BasePath; the same
// access rules as GET /tasks/{id}).
const KubeEventsPath = "/tasks/:id/events"

// TaskKubeEvents is the answer of GET /tasks/{id}/events.
type TaskKubeEvents struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// ServerTime is the service's clock when it answered: the end of the
	// bars of steps still running.
	ServerTime string `json:"server_time"`
	// Events are the Kubernetes Events of the task's anchor, volume claim,
	// jobs and pods, oldest first. The API server keeps Events for a while
	// only (an hour by default).
	Events []TaskKubeEvent `json:"events"`
	// Steps are the task's parts in the order they run, with their times.
	Steps []TaskStep `json:"steps"`
}

// TaskKubeEvent is one Kubernetes Event of a task's object.
type TaskKubeEvent struct {
	Time    string `json:"time"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Object is the kind and name of the object the Event is about
	// (ConfigMap/<task> for the task's own story).
	Object string `json:"object"`
	Count  int32  `json:"count,omitempty"`
	// Source is the component that recorded it.
	Source string `json:"source,omitempty"`

	at time.Time
}

// taskKubeEvents serves GET /tasks/{id}/events: the task's Kubernetes Events,
// its state and its steps with their times.
func (s *Server) taskKubeEvents(c echo.Context) error {
	cm, err := s.anchor(c, c.Param("id"))
	if err != nil {
		return s.fail(c, err)
	}
	ctx := c.Request().Context()
	jobs, pods, err := s.store().JobsAndPods(ctx, labels.Set{taskmeta.LabelTask: cm.Name}.String())
	if err != nil {
		return s.fail(c, err)
	}
	evs, err := s.kubeEventsOf(ctx, storyObjects(cm.Name, jobs, pods))
	if err != nil {
		return s.fail(c, err)
	}
	now := s.now()
	state := s.build(ctx, cm, jobs, pods, tesv1.ViewMinimal).State
	return c.JSON(http.StatusOK, TaskKubeEvents{
		ID:         cm.Name,
		State:      state,
		ServerTime: now.UTC().Format(time.RFC3339Nano),
		Events:     evs,
		Steps:      Timeline(cm.ObjectMeta, jobs, pods, evs),
	})
}

// maxStoryObjects bounds the jobs and pods whose Events a task's story
// reads (one LIST each), and maxObjectEvents the Events read of each: a
// task of thousands of executors costs the API server no more than one of
// a few dozen.
const (
	maxStoryObjects = 64
	maxObjectEvents = 100
)

// storyObjects names the objects whose Events tell a task's story: its
// anchor and its volume claim, and of its jobs and pods the
// maxStoryObjects created last.
func storyObjects(task string, jobs []batchv1.Job, pods []corev1.Pod) []string {
	type object struct {
		name    string
		created time.Time
	}
	var objs []object
	for _, j := range jobs {
		objs = append(objs, object{j.Name, j.CreationTimestamp.Time})
	}
	for _, p := range pods {
		objs = append(objs, object{p.Name, p.CreationTimestamp.Time})
	}
	sort.SliceStable(objs, func(i, k int) bool { return objs[i].created.After(objs[k].created) })
	names := []string{task, taskmeta.PVCName(task)}
	for _, o := range objs[:min(len(objs), maxStoryObjects)] {
		names = append(names, o.name)
	}
	return names
}

// kubeEventsOf lists the Events about each of the named objects (a LIST with a
// field selector per name, a few at a time), oldest first.
func (s *Server) kubeEventsOf(ctx context.Context, names []string) ([]TaskKubeEvent, error) {
	var mu sync.Mutex
	var out []TaskKubeEvent
	seen := map[types.UID]bool{}
	var firstErr error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			items, err := s.store().KubeEventsAbout(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for i := range items {
				if uid := items[i].UID; uid != "" {
					if seen[uid] {
						continue
					}
					seen[uid] = true
				}
				out = append(out, kubeEventOf(&items[i]))
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	sort.SliceStable(out, func(i, k int) bool {
		if !out[i].at.Equal(out[k].at) {
			return out[i].at.Before(out[k].at)
		}
		return out[i].Object < out[k].Object
	})
	if out == nil {
		out = []TaskKubeEvent{}
	}
	return out, nil
}

// kubeEventOf converts an Event (recorded through events.k8s.io/v1 or
// core/v1); its time is the last time it was seen.
func kubeEventOf(e *corev1.Event) TaskKubeEvent {
	t := e.EventTime.Time
	count := e.Count
	if e.Series != nil {
		t = e.Series.LastObservedTime.Time
		count = e.Series.Count
	}
	if !e.LastTimestamp.IsZero() && e.LastTimestamp.After(t) {
		t = e.LastTimestamp.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	src := e.ReportingController
	if src == "" {
		src = e.Source.Component
	}
	if count <= 1 {
		count = 0
	}
	return TaskKubeEvent{
		Time:    formatTime(t),
		Type:    e.Type,
		Reason:  e.Reason,
		Message: e.Message,
		Object:  e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
		Count:   count,
		Source:  src,
		at:      t,
	}
}

// formatTime is RFC 3339 in UTC, with the fraction of a second when there
// is one (Events have microseconds, objects seconds).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
