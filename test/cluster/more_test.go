//go:build e2e

package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

type event struct {
	Type    string
	Source  string
	Subject string
	Data    json.RawMessage
}

// sink is a CloudEvents receiver (binary content mode, as the adapter sends).
type sink struct {
	mu     sync.Mutex
	events []event
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.events = append(s.events, event{
		Type:    r.Header.Get("Ce-Type"),
		Source:  r.Header.Get("Ce-Source"),
		Subject: r.Header.Get("Ce-Subject"),
		Data:    body,
	})
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (s *sink) all() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.events...)
}

func TestAdapterDeliversJobUpdates(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	rcv := &sink{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	a, err := shared.StartAdapter(ctx, cluster.AdapterOptions{
		Namespace: ns,
		Sink:      srv.URL,
		Resources: []cluster.AdapterResource{
			{Group: "batch", Version: "v1", Resource: "jobs", LabelSelector: "taskmaster-name"},
			{Version: "v1", Resource: "pods", LabelSelector: "taskmaster-name"},
			{Version: "v1", Resource: "configmaps", LabelSelector: "taskmaster-name"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()

	labels := map[string]string{"taskmaster-name": "task-1"}
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(ctx, newJob("task-1", labels, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A job without the label is not delivered.
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(ctx, newJob("other", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "update event of the complete job", func(context.Context) (bool, error) {
		for _, e := range rcv.all() {
			if e.Type != "dev.knative.apiserver.resource.update" {
				continue
			}
			var job batchv1.Job
			if err := json.Unmarshal(e.Data, &job); err != nil || job.Kind != "Job" || job.Name != "task-1" {
				continue
			}
			if jobCondition(&job, batchv1.JobComplete) {
				return true, nil
			}
		}
		return false, nil
	})
	sawPod := false
	for _, e := range rcv.all() {
		var obj metav1.PartialObjectMetadata
		_ = json.Unmarshal(e.Data, &obj)
		if obj.Name == "other" {
			t.Errorf("event for the unlabelled job: %s", e.Type)
		}
		if obj.Kind == "Pod" && obj.Labels["taskmaster-name"] == "task-1" {
			sawPod = true
		}
		if !strings.HasPrefix(e.Type, "dev.knative.apiserver.resource.") {
			t.Errorf("unexpected event type %q", e.Type)
		}
	}
	if !sawPod {
		t.Errorf("no event for the job's pod")
	}
}

func TestServiceAccountKubeconfigHasOnlyItsRole(t *testing.T) {
	ns := namespace(t)
	other := namespace(t)
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := shared.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "handler", Namespace: ns}},
	}
	if _, err := shared.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path, err := shared.ServiceAccountKubeconfig(ctx, ns, "handler")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list pods in own namespace: %v", err)
	}
	if _, err := client.CoreV1().Pods(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list pods in another namespace: %v, want Forbidden", err)
	}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, newJob("nope", nil, nil), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create job: %v, want Forbidden", err)
	}
	// Who the API server takes the kubeconfig's token for: the review is
	// the check, so its failure fails the test.
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":handler"; got != want {
		t.Errorf("user %q, want %q", got, want)
	}
}

// TestGarbageCollection: objects owned by a ConfigMap go when it goes.
func TestGarbageCollection(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	cm, err := shared.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "task"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
	job := newJob("step", nil, map[string]string{"fate.tesk.test/delay": "1h"})
	job.OwnerReferences = owner
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "work", OwnerReferences: owner},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := shared.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var volume string
	waitFor(t, 30*time.Second, "PVC bound and job pod running", func(ctx context.Context) (bool, error) {
		p, err := shared.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "work", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.ClaimBound {
			return false, nil
		}
		volume = p.Spec.VolumeName
		pods, err := shared.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=step"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	})
	background := metav1.DeletePropagationBackground
	if err := shared.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "task", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "job, its pod, the PVC and its volume deleted", func(ctx context.Context) (bool, error) {
		_, errJob := shared.Client.BatchV1().Jobs(ns).Get(ctx, "step", metav1.GetOptions{})
		_, errPVC := shared.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "work", metav1.GetOptions{})
		_, errPV := shared.Client.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
		pods, err := shared.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(errJob) && apierrors.IsNotFound(errPVC) && apierrors.IsNotFound(errPV) &&
			err == nil && len(pods.Items) == 0, nil
	})
}

const validService = `
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: tesk
spec:
  template:
    spec:
      containers:
      - image: example.org/tesk-knative:latest
        ports:
        - containerPort: 8080
`

const invalidService = `
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: tesk-bad
spec:
  template:
    spec:
      containers: "not a list"
`

func TestKnativeCRDsServerSideDryRun(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := shared.InstallKnativeCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := shared.KnativeCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"services.serving.knative.dev", "apiserversources.sources.knative.dev", "triggers.eventing.knative.dev"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("CRD %s not installed (have %v)", want, names)
		}
	}
	withNS := func(m string) []byte {
		return []byte(strings.Replace(m, "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1))
	}
	if err := shared.DryRunApply(ctx, withNS(validService)); err != nil {
		t.Errorf("valid service rejected: %v", err)
	}
	err = shared.DryRunApply(ctx, withNS(invalidService))
	if err == nil {
		t.Errorf("invalid service accepted")
	} else {
		t.Logf("invalid service rejected: %v", err)
	}
	// A dry run stores nothing.
	gvr := schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	if _, err := shared.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, "tesk", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after dry run: %v, want NotFound", err)
	}
	// Installing twice is fine.
	if err := shared.InstallKnativeCRDs(ctx); err != nil {
		t.Errorf("second install: %v", err)
	}
}

// TestStopLeavesNothingRunning starts a second cluster (two nodes) and stops it.
func TestStopLeavesNothingRunning(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, Nodes: 2, NodeCPU: "4", NodeMemory: "8Gi"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 2 {
		t.Errorf("nodes %v", c.Nodes)
	}
	procs := c.Processes()
	if len(procs) != 5 {
		t.Errorf("processes %s, want 5", cluster.Names(procs))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Alive() {
			t.Errorf("%s (pid %d) alive after Stop", p.Name, p.Pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory left: %v", err)
	}
	if leftovers := processesUsing(t, dir); len(leftovers) > 0 {
		t.Errorf("processes still using %s: %v", dir, leftovers)
	}
}

// processesUsing lists the pids whose command line mentions path; /proc
// that cannot be read fails the test (no process would be found).
func processesUsing(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), path) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	t.Run("port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		dir := filepath.Join(t.TempDir(), "state")
		_, err = cluster.Start(ctx, cluster.Options{Dir: dir, APIServerPort: port})
		if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
			t.Fatalf("error %v, want port %d already in use", err, port)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state directory created: %v", err)
		}
	})
	t.Run("missing binary", func(t *testing.T) {
		cache := t.TempDir()
		_, err := cluster.Start(ctx, cluster.Options{CacheDir: cache})
		if err == nil || !strings.Contains(err.Error(), "make cluster-bins") || !strings.Contains(err.Error(), "bin/kube-apiserver") {
			t.Fatalf("error %v, want a hint to run make cluster-bins", err)
		}
	})
	t.Run("stale state directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "leftover"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := cluster.Start(ctx, cluster.Options{Dir: dir})
		if err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("error %v, want state directory not empty", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "leftover")); err != nil {
			t.Errorf("the directory was touched: %v", err)
		}
	})
	t.Run("component fails half way", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		_, err := cluster.Start(ctx, cluster.Options{Dir: dir, APIServerFlags: []string{"--no-such-flag"}})
		if err == nil || !strings.Contains(err.Error(), "kube-apiserver exited") {
			t.Fatalf("error %v, want kube-apiserver exited", err)
		}
		t.Logf("error: %v", err)
		if leftovers := processesUsing(t, dir); len(leftovers) > 0 {
			t.Errorf("processes left running: %v", leftovers)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state directory left: %v", err)
		}
	})
	t.Run("bad node capacity", func(t *testing.T) {
		_, err := cluster.Start(ctx, cluster.Options{NodeCPU: "lots"})
		if err == nil || !strings.Contains(err.Error(), "NodeCPU") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestCommandUpDown drives cmd/cluster as make cluster-up and cluster-down do.
func TestCommandUpDown(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "cluster")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cluster")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "dot-cluster")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	begin := time.Now()
	out, err := run("up", "-dir", dir)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Logf("up took %s:\n%s", time.Since(begin).Round(time.Millisecond), out)
	state, err := cluster.ReadState(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Stop() // in case the test fails half way

	// The kubeconfig works, the node is Ready and the default service account exists.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node, err := client.CoreV1().Nodes().Get(ctx, "kwok-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("node not ready: %+v", node.Status.Conditions)
	}
	if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default service account: %v", err)
	}

	if out, err := run("status", "-dir", dir); err != nil || strings.Count(out, "running") != 5 {
		t.Errorf("status: %v\n%s", err, out)
	}

	// A second up refuses.
	if out, err := run("up", "-dir", dir); err == nil || !strings.Contains(out, "already running") {
		t.Errorf("second up: %v\n%s", err, out)
	}

	out, err = run("down", "-dir", dir)
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	t.Logf("down: %s", out)
	for i := range state.Processes {
		if state.Processes[i].Alive() {
			t.Errorf("%s (pid %d) alive after down", state.Processes[i].Name, state.Processes[i].Pid)
		}
	}
	if _, err := os.Stat(state.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory %s left: %v", state.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left: %v", err)
	}
	if out, err := run("down", "-dir", dir); err != nil || !strings.Contains(out, "nothing to stop") {
		t.Errorf("second down: %v\n%s", err, out)
	}
	if out, err := run("status", "-dir", dir); err == nil {
		t.Errorf("status without a cluster succeeded:\n%s", out)
	}
}

// TestCommandUpAfterHalfStart: state whose processes are partly gone is
// cleaned up with a clear error, and nothing is left running.
func TestCommandUpAfterHalfStart(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "cluster")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/cluster").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "dot-cluster")
	if out, err := exec.Command(bin, "up", "-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	state, err := cluster.ReadState(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Stop()
	// Kill the scheduler behind the command's back.
	for i := range state.Processes {
		if state.Processes[i].Name == "kube-scheduler" {
			if err := state.Processes[i].Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := exec.Command(bin, "up", "-dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "half-started") {
		t.Fatalf("up over a half-started cluster: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for i := range state.Processes {
		if state.Processes[i].Alive() {
			t.Errorf("%s (pid %d) still alive", state.Processes[i].Name, state.Processes[i].Pid)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left: %v", err)
	}
	// Now up works again, and down cleans.
	if out, err := exec.Command(bin, "up", "-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "down", "-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
}

func TestCacheKeyMatchesScript(t *testing.T) {
	src, err := cluster.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(src, "cachekey.sh")).Output()
	if err != nil {
		t.Fatal(err)
	}
	key, err := cluster.CacheKey(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != key {
		t.Errorf("cachekey.sh says %s, CacheKey %s", got, key)
	}
	if !strings.HasSuffix(shared.CacheDir, key) && os.Getenv(cluster.CacheDirEnv) == "" {
		t.Errorf("cluster runs from %s, not the directory of key %s", shared.CacheDir, key)
	}
}
