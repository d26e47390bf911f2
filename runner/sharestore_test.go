package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// ownedAnchor is an anchor of an owner's task, not yet started, created
// age ago.
func ownedAnchor(name, owner string, age time.Duration) *corev1.ConfigMap {
	m := metav1.ObjectMeta{
		Name: name, Namespace: taskfixtures.Namespace, UID: types.UID(name + "-uid"),
		CreationTimestamp: metav1.NewTime(taskfixtures.Ago(age)),
		Labels:            map[string]string{taskmeta.LabelTask: name, taskmeta.LabelCreator: owner},
		Annotations:       map[string]string{taskmeta.AnnotationTTL: taskmeta.NoTTL},
	}
	return anchorObject(taskfixtures.TaskWith(1, taskfixtures.WithCPU), m)
}

func (f *fakeAPI) configMap(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.CoreV1().ConfigMaps(taskfixtures.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm
}

func (f *fakeAPI) share(t *testing.T, owner string) steps.Share {
	t.Helper()
	s, err := steps.ParseShare(f.configMap(t, steps.ShareName(owner)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fakeAPI) started(t *testing.T, task string) bool {
	t.Helper()
	_, ok := f.configMap(t, task).Annotations[taskmeta.AnnotationProgress]
	return ok
}

// TestShareHoldsAnOwnersTasks: under a share of one task, an owner's
// first task starts and takes its place in the owner's ledger; the second
// waits, QUEUED, labelled waiting, with nothing created; another owner's
// task starts. When the first ends, its place is given back and the
// waiting task starts at once.
func TestShareHoldsAnOwnersTasks(t *testing.T) {
	api := newFakeAPI(t, ownedAnchor("task-a1", "alice", 3*time.Minute), ownedAnchor("task-a2", "alice", 2*time.Minute), ownedAnchor("task-b1", "bob", time.Minute))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.Quota = steps.Quota{Tasks: 1}
	r := testRunner(api, cfg)
	ctx := testCtx(t)

	if res, err := r.Reconcile(ctx, taskfixtures.Namespace, "task-a1", Options{Event: "e1", Submit: true}); err != nil || res.Waiting || !api.started(t, "task-a1") {
		t.Fatalf("alice's first task: %+v %v", res, err)
	}
	if s := api.share(t, "alice"); len(s.Tasks) != 1 || s.Tasks["task-a1"] != 1 {
		t.Fatalf("alice's share %+v, want task-a1 holding 1 core", s)
	}
	before := len(api.Actions())
	res, err := r.Reconcile(ctx, taskfixtures.Namespace, "task-a2", Options{Event: "e2", Submit: true})
	if err != nil || !res.Waiting || res.State != tesv1.StateQueued || api.started(t, "task-a2") {
		t.Fatalf("alice's second task: %+v %v, want it waiting", res, err)
	}
	for _, a := range api.Actions()[before:] {
		if a.GetVerb() == "create" && a.GetResource().Resource != "configmaps" {
			t.Errorf("a waiting task created a %s", a.GetResource().Resource)
		}
	}
	if cm := api.configMap(t, "task-a2"); cm.Labels[taskmeta.LabelWaiting] != "true" || cm.Annotations[taskmeta.AnnotationCores] != "1" {
		t.Errorf("the waiting task's labels %v, annotations %v", cm.Labels, cm.Annotations)
	}
	if res, err := r.Reconcile(ctx, taskfixtures.Namespace, "task-b1", Options{Event: "e3", Submit: true}); err != nil || res.Waiting {
		t.Fatalf("bob's task: %+v %v", res, err)
	}

	// alice's first task ends (cancelled): its place goes to the second.
	a1 := api.configMap(t, "task-a1")
	a1.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	if _, err := api.CoreV1().ConfigMaps(taskfixtures.Namespace).Update(ctx, a1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Reconcile(ctx, taskfixtures.Namespace, "task-a1", Options{Event: "e4", Cancel: true})
	if err != nil || res.State != tesv1.StateCanceling || api.started(t, "task-a2") {
		t.Fatalf("the cancel: %+v %v", res, err)
	}
	// Its job is gone (the fake deletes at once): the task ends.
	res, err = r.Reconcile(ctx, taskfixtures.Namespace, "task-a1", Options{Event: "e5", GoneJob: taskmeta.ObjectName("task-a1", "ex-00")})
	if err != nil || res.Ended != tesv1.StateCanceled {
		t.Fatalf("the cancelled task's end: %+v %v", res, err)
	}
	if !api.started(t, "task-a2") {
		t.Fatal("the waiting task did not start when a place was given back")
	}
	if cm := api.configMap(t, "task-a2"); cm.Labels[taskmeta.LabelWaiting] != "" {
		t.Errorf("the started task is still labelled waiting: %v", cm.Labels)
	}
	if s := api.share(t, "alice"); len(s.Tasks) != 1 || s.Tasks["task-a2"] != 1 {
		t.Errorf("alice's share %+v, want task-a2 alone", s)
	}
}

// TestShareCountsTasksThatAskNoCPU: under a share of 2 cores, an owner's
// tasks that ask for no CPU hold a core each: two start, the third waits.
func TestShareCountsTasksThatAskNoCPU(t *testing.T) {
	noCPU := func(name string, age time.Duration) *corev1.ConfigMap {
		cm := ownedAnchor(name, "alice", age)
		return anchorObject(taskfixtures.TaskWith(1), cm.ObjectMeta)
	}
	api := newFakeAPI(t, noCPU("task-a1", 3*time.Minute), noCPU("task-a2", 2*time.Minute), noCPU("task-a3", time.Minute))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.Quota = steps.Quota{CPU: 2}
	r := testRunner(api, cfg)
	for i, c := range []struct {
		task    string
		waiting bool
	}{{"task-a1", false}, {"task-a2", false}, {"task-a3", true}} {
		res, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, c.task, Options{Event: fmt.Sprintf("e%d", i), Submit: true})
		if err != nil || res.Waiting != c.waiting || api.started(t, c.task) == c.waiting {
			t.Fatalf("%s: %+v %v, want waiting %v", c.task, res, err, c.waiting)
		}
	}
	if s := api.share(t, "alice"); len(s.Tasks) != 2 || s.Cores() != 2 {
		t.Errorf("alice's share %+v, want two tasks of a core each", s)
	}
	if cm := api.configMap(t, "task-a3"); cm.Annotations[taskmeta.AnnotationCores] != "1" {
		t.Errorf("the waiting task's annotations %v, want 1 core", cm.Annotations)
	}
}

// TestShareRefusesATaskLargerThanTheShare: a task that asks for more cores
// than a whole share can never run: it ends SYSTEM_ERROR at submission.
func TestShareRefusesATaskLargerThanTheShare(t *testing.T) {
	api := newFakeAPI(t, ownedAnchor("task-big", "alice", time.Minute))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.Quota = steps.Quota{CPU: 0.5}
	r := testRunner(api, cfg)
	res, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, "task-big", Options{Event: "e1", Submit: true})
	if err != nil || res.Ended != tesv1.StateSystemError || api.configMap(t, steps.ShareName("alice")) != nil {
		t.Errorf("%+v %v, want SYSTEM_ERROR and no share taken", res, err)
	}
}

// TestSweepSettlesShares: a sweep gives back the place of a task that
// ended without giving it back, and of one whose anchor is gone, starts a
// task that holds a place but never started, and starts the waiting tasks
// that fit, fairly.
func TestSweepSettlesShares(t *testing.T) {
	ended := ownedAnchor("task-a0", "alice", 10*time.Minute)
	ended.Annotations[taskmeta.AnnotationState] = tesv1.StateComplete
	ended.Annotations[taskmeta.AnnotationProgress] = taskfixtures.ProgressOf([]string{taskmeta.PartPVC, "ex-00"}, "e0", taskfixtures.Ago(9*time.Minute), taskmeta.PartPVC, "ex-00").String()
	waitingA := ownedAnchor("task-a1", "alice", 5*time.Minute)
	waitingA.Labels[taskmeta.LabelWaiting] = "true"
	waitingA.Annotations[taskmeta.AnnotationCores] = "1"
	claimed := ownedAnchor("task-b1", "bob", 4*time.Minute)
	ledger := func(owner string, s steps.Share) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: steps.ShareName(owner), Namespace: taskfixtures.Namespace,
			Labels: map[string]string{taskmeta.LabelShare: "true", taskmeta.LabelCreator: owner}},
			Data: map[string]string{steps.ShareKey: s.Encode()}}
	}
	api := newFakeAPI(t, ended, waitingA, claimed,
		ledger("alice", steps.Share{Tasks: map[string]float64{"task-a0": 1, "task-gone": 1}}),
		ledger("bob", steps.Share{Tasks: map[string]float64{"task-b1": 1}}))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.Quota = steps.Quota{Tasks: 1}
	r := testRunner(api, cfg)
	res, err := r.Sweep(testCtx(t), taskfixtures.Namespace, "sweep-1", newMetadataFake(t, api))
	if err != nil {
		t.Fatalf("sweep: %v (%+v)", err, res)
	}
	if !api.started(t, "task-a1") || !api.started(t, "task-b1") {
		t.Errorf("started: waiting %v, claimed %v; want both", api.started(t, "task-a1"), api.started(t, "task-b1"))
	}
	if s := api.share(t, "alice"); len(s.Tasks) != 1 || s.Tasks["task-a1"] != 1 {
		t.Errorf("alice's share %+v, want task-a1 alone", s)
	}
}

// newMetadataFake serves the fake API's ConfigMaps, as they are now, to a
// sweep's list of the anchors' metadata.
func newMetadataFake(t *testing.T, api *fakeAPI) metadata.Interface {
	t.Helper()
	list, err := api.CoreV1().ConfigMaps(taskfixtures.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, cm := range list.Items {
		objs = append(objs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: cm.ObjectMeta})
	}
	return metadatafake.NewSimpleMetadataClient(scheme, objs...)
}

// TestWaitingTasksStartFromTheirMetadata: when a task's end gives its
// place back, the owner's waiting tasks are found by their metadata alone
// (an anchor may hold a MiB of a task) where the Runner has a metadata
// client, and the oldest starts while the younger waits on.
func TestWaitingTasksStartFromTheirMetadata(t *testing.T) {
	api := newFakeAPI(t, ownedAnchor("task-a1", "alice", 3*time.Minute), ownedAnchor("task-a2", "alice", 2*time.Minute), ownedAnchor("task-a3", "alice", time.Minute))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.Quota = steps.Quota{Tasks: 1}
	r := testRunner(api, cfg)
	ctx := testCtx(t)
	for i, task := range []string{"task-a1", "task-a3", "task-a2"} {
		if _, err := r.Reconcile(ctx, taskfixtures.Namespace, task, Options{Event: fmt.Sprintf("e%d", i), Submit: true}); err != nil {
			t.Fatal(err)
		}
	}
	md := newMetadataFake(t, api).(*metadatafake.FakeMetadataClient)
	r.Metadata = md
	before := len(api.Actions())

	a1 := api.configMap(t, "task-a1")
	a1.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	if _, err := api.CoreV1().ConfigMaps(taskfixtures.Namespace).Update(ctx, a1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, "task-a1", Options{Event: "e4", Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Reconcile(ctx, taskfixtures.Namespace, "task-a1", Options{Event: "e5", GoneJob: taskmeta.ObjectName("task-a1", "ex-00")}); err != nil || res.Ended != tesv1.StateCanceled {
		t.Fatalf("the cancelled task's end: %+v %v", res, err)
	}
	if !api.started(t, "task-a2") || api.started(t, "task-a3") {
		t.Errorf("started: the oldest waiting %v, the younger %v; want the oldest alone", api.started(t, "task-a2"), api.started(t, "task-a3"))
	}
	for _, a := range api.Actions()[before:] {
		if a.GetVerb() == "list" && a.GetResource().Resource == "configmaps" {
			t.Errorf("the waiting tasks were listed whole: %v", a)
		}
	}
	lists := 0
	for _, a := range md.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Labels.String() == "creator-user-id=alice,"+taskmeta.LabelWaiting+"=true" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("%d metadata lists of alice's waiting tasks, want 1", lists)
	}
}
