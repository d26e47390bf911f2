//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// markerPrefix names the objects settle creates: a task of that name never
// exists, and their events never reach the handler.
const markerPrefix = "settle-marker-"

// deliveries is what the adapter delivered to the handler's sink: the
// markers whose events arrived (by resource and name, "jobs/settle-marker-1")
// and the deliveries being handled.
type deliveries struct {
	mu       sync.Mutex
	markers  map[string]bool
	inFlight atomic.Int64
}

// track answers the markers' events itself and counts the others while the
// handler (h) handles them.
func (d *deliveries) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The adapter's subject is the object's path:
		// /apis/batch/v1/namespaces/<ns>/jobs/<name>.
		subject := r.Header.Get("Ce-Subject")
		if name := path.Base(subject); strings.HasPrefix(name, markerPrefix) {
			d.mu.Lock()
			d.markers[path.Base(path.Dir(subject))+"/"+name] = true
			d.mu.Unlock()
			w.WriteHeader(http.StatusOK)
			return
		}
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

func (d *deliveries) arrived(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.markers[key]
}

// settle returns once the handler has handled every event of a Job or a
// Pod that the adapter had seen when settle was called, and nothing is
// being handled: the test's "nothing more happens" checks can then look.
// It creates a marker Job (suspended) and a marker Pod (unschedulable)
// carrying the task label the adapter selects, and waits for both
// markers' events at the sink. The adapter sends each resource's events
// one at a time, in the order the API server gave them, so a marker's
// arrival means every earlier event of its resource was answered. It
// returns the markers' name, for watchers of their own (jobAdds.through).
func (e *env) settle() string {
	e.t.Helper()
	if e.delivered == nil {
		e.t.Fatal("settle: the env has no adapter")
	}
	ctx := context.Background()
	name := fmt.Sprintf("%s%d", markerPrefix, e.markers.Add(1))
	labels := map[string]string{taskmeta.LabelTask: name}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		NodeSelector:  map[string]string{"tesk.test/settle": "no-such-node"},
		Containers:    []corev1.Container{{Name: "marker", Image: "marker.tesk.test/none"}},
	}
	suspend := true
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			Suspend:  &suspend,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
	if _, err := e.c.Client.BatchV1().Jobs(e.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("settle: %v", err)
	}
	if _, err := e.c.Client.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: pod}, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("settle: %v", err)
	}
	e.waitFor("the adapter to deliver the events before "+name, 60*time.Second, func() bool {
		return e.delivered.arrived("jobs/"+name) && e.delivered.arrived("pods/"+name) && e.delivered.inFlight.Load() == 0
	})
	bg := metav1.DeletePropagationBackground
	_ = e.c.Client.BatchV1().Jobs(e.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	_ = e.c.Client.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{})
	return name
}

// idle waits until the handler handles no delivery of the adapter: for a
// test that stopped the adapter, so that a delivery it had sent is over.
func (e *env) idle() {
	e.t.Helper()
	e.waitFor("the handler to finish the adapter's deliveries", 30*time.Second, func() bool { return e.delivered.inFlight.Load() == 0 })
}

// settle is a barrier: the deliveries of events from before the call are
// over when it returns, however slow the handler (here a sink that takes
// 300 ms for each and does nothing else).
func TestSettleWaitsForEarlierDeliveries(t *testing.T) {
	var handled atomic.Int64
	slow := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond)
			handled.Add(1)
			w.WriteHeader(http.StatusOK)
		})
	}
	e := newEnv(t, envOptions{sink: slow})
	suspend := true
	for i := range 3 {
		name := fmt.Sprintf("task-settle01-ex-%02d", i)
		labels := map[string]string{taskmeta.LabelTask: "task-settle01"}
		_, err := e.c.Client.BatchV1().Jobs(e.ns).Create(context.Background(), &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "marker.tesk.test/none"}}},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
	if n := handled.Load(); n < 3 {
		t.Errorf("settle returned after %d deliveries of the three jobs' events", n)
	}
}
