package eventserver

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// The gauges report the last sweep's counts, the step ages as of each
// collection, for SweepFresh after the sweep; then nothing.
func TestSweptTasksGauges(t *testing.T) {
	r := sdkmetric.NewManualReader()
	s, err := NewTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), tracenoop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	s.now = func() time.Time { return now }
	gauges := func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		if err := r.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						got[m.Name+"{"+dp.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = float64(dp.Value)
					}
				case metricdata.Gauge[float64]:
					for _, dp := range d.DataPoints {
						got[m.Name+"{"+dp.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = dp.Value
					}
				}
			}
		}
		return got
	}
	if got := gauges(); len(got) != 0 {
		t.Fatalf("before any sweep: %v", got)
	}
	states := map[string]int{"QUEUED": 2, "RUNNING": 1, "COMPLETE": 0}
	s.SweptTasks(states, 2, map[string]time.Time{"QUEUED": t0.Add(-time.Minute), "RUNNING": t0.Add(-time.Hour)})
	states["QUEUED"] = 99 // the gauges hold a copy
	now = t0.Add(2 * time.Minute)
	want := map[string]float64{
		MetricTasks + "{tesk.task.state=QUEUED}":         2,
		MetricTasks + "{tesk.task.state=RUNNING}":        1,
		MetricTasks + "{tesk.task.state=COMPLETE}":       0,
		MetricTasksQueued + "{}":                         2,
		MetricTasksStepAge + "{tesk.task.state=QUEUED}":  180,
		MetricTasksStepAge + "{tesk.task.state=RUNNING}": 3720,
	}
	if got := gauges(); !reflect.DeepEqual(got, want) {
		t.Fatalf("gauges %v, want %v", got, want)
	}
	now = t0.Add(SweepFresh + time.Second)
	if got := gauges(); len(got) != 0 {
		t.Fatalf("%s after the sweep: %v, want nothing", SweepFresh+time.Second, got)
	}
	s.SweptTasks(map[string]int{"QUEUED": 0}, 0, nil)
	if got := gauges(); len(got) != 2 || got[MetricTasksQueued+"{}"] != 0 {
		t.Fatalf("after the next sweep: %v", got)
	}
	// The owners a sweep names: each one's active and waiting tasks.
	s.SweptUsers(map[string]steps.UserCounts{"alice": {Active: 3, Waiting: 2}, steps.OtherUsers: {Active: 1}})
	got := gauges()
	for k, v := range map[string]float64{
		MetricUserTasks + "{tesk.user=alice,tesk.user.tasks.kind=active}":  3,
		MetricUserTasks + "{tesk.user=alice,tesk.user.tasks.kind=waiting}": 2,
		MetricUserTasks + "{tesk.user=other,tesk.user.tasks.kind=active}":  1,
		MetricUserTasks + "{tesk.user=other,tesk.user.tasks.kind=waiting}": 0,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (%v), want %v", k, g, ok, v)
		}
	}
}
