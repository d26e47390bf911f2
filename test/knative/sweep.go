package knative

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// RareSchedule is the schedule HoldSweep gives the sweep's PingSource:
// once a year, so that no ping wakes the handler or makes good a lost
// event while it holds.
const RareSchedule = "0 0 1 1 *"

// HoldSweep sets the sweep's PingSource tesk-sweep to RareSchedule (its
// v1 spec has no field to suspend it) and returns the schedule it had and
// a func that sets that back.
func (e *Env) HoldSweep(ctx context.Context) (string, func() error, error) {
	pings := e.C.Dynamic.Resource(PingSourceGVR).Namespace(e.Namespaces.Platform)
	o, err := pings.Get(ctx, "tesk-sweep", metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	was, _, _ := unstructured.NestedString(o.Object, "spec", "schedule")
	set := func(ctx context.Context, schedule string) error {
		_, err := pings.Patch(ctx, "tesk-sweep", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"schedule":%q}}`, schedule)), metav1.PatchOptions{})
		return err
	}
	if err := set(ctx, RareSchedule); err != nil {
		return "", nil, err
	}
	return was, func() error { return set(context.Background(), was) }, nil
}

// FilterPods selects the pods of the Broker's filter in knative-eventing.
const FilterPods = "eventing.knative.dev/brokerRole=filter"

// FailedDeliveries counts the lines of the Broker's filter pods since
// start that report an event it could not deliver (a pod deleted meanwhile
// took its log with it).
func (e *Env) FailedDeliveries(ctx context.Context, start time.Time) (int, error) {
	pods, err := e.C.Client.CoreV1().Pods("knative-eventing").List(ctx, metav1.ListOptions{LabelSelector: FilterPods})
	if err != nil {
		return 0, err
	}
	if len(pods.Items) == 0 {
		return 0, fmt.Errorf("no pod of the Broker's filter (label %s)", FilterPods)
	}
	since := metav1.NewTime(start)
	n := 0
	for _, p := range pods.Items {
		out, err := e.C.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &since}).DoRaw(ctx)
		if err != nil {
			return 0, err
		}
		n += strings.Count(string(out), `"msg":"failed to send event"`)
	}
	return n, nil
}
