package eventserver

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// TestSweepReportsUsers: with METRICS_USERS, a sweep's gauge names the
// owners with the most active tasks, each one's active and waiting tasks,
// and sums the rest as other; without it, it names none.
func TestSweepReportsUsers(t *testing.T) {
	for _, named := range []int{1, 0} {
		s, rec := newObservedServer(t)
		s.Runner.Config.MetricsUsers = named
		anchor := func(name, owner string, waiting bool) *corev1.ConfigMap {
			cm := taskmeta.NewAnchor("tesk", name, nil, taskmeta.AnchorInfo{})
			cm.CreationTimestamp = metav1.Now() // within the grace: the sweep leaves it to its submission
			cm.Labels[taskmeta.LabelCreator] = owner
			if waiting {
				cm.Labels[taskmeta.LabelWaiting] = "true"
			}
			return cm
		}
		objs := []runtime.Object{anchor("task-a1", "alice", false), anchor("task-a2", "alice", true), anchor("task-b1", "bob", false)}
		s.Runner.Client = fake.NewSimpleClientset(objs...)
		sc := metadatafake.NewTestScheme()
		sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, &metav1.PartialObjectMetadata{})
		sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}, &metav1.PartialObjectMetadataList{})
		var mds []runtime.Object
		for _, o := range objs {
			mds = append(mds, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: o.(*corev1.ConfigMap).ObjectMeta})
		}
		s.Metadata = metadatafake.NewSimpleMetadataClient(sc, mds...)
		if res := post(t, s, "dev.knative.sources.ping", `{}`, nil); res.Code != http.StatusOK {
			t.Fatalf("sweep: %d %s", res.Code, res.Body)
		}
		points := collect(t, rec.metrics)
		users := 0
		for _, p := range points {
			if p.metric == MetricUserTasks {
				users++
			}
		}
		if named == 0 {
			if users != 0 {
				t.Errorf("without METRICS_USERS: %d points of %s", users, MetricUserTasks)
			}
			continue
		}
		for _, c := range []struct {
			user, kind string
			want       int64
		}{{"alice", "active", 2}, {"alice", "waiting", 1}, {"other", "active", 1}, {"other", "waiting", 0}} {
			if got := value(points, MetricUserTasks, attribute.String(AttrUser, c.user), attribute.String(AttrUserTasks, c.kind)); got != c.want {
				t.Errorf("%s %s = %d, want %d", c.user, c.kind, got, c.want)
			}
		}
		if users != 4 {
			t.Errorf("%d points of %s, want 4", users, MetricUserTasks)
		}
	}
}
