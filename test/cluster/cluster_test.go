//go:build e2e

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// shared is the one cluster all tests of this package use (see TestMain).
var shared *cluster.Cluster

func TestMain(m *testing.M) {
	ctx := context.Background()
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start cluster:", err)
		os.Exit(1)
	}
	fmt.Printf("cluster started in %.1fs (%s)\n", time.Since(begin).Seconds(), c.Server)
	shared = c
	code := m.Run()
	procs := c.Processes()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop cluster:", err)
		code = 1
	}
	for _, p := range procs {
		if p.Alive() {
			fmt.Fprintf(os.Stderr, "%s (pid %d) still alive after Stop\n", p.Name, p.Pid)
			code = 1
		}
	}
	os.Exit(code)
}

var nsCounter atomic.Int64

// namespace creates a fresh namespace for one test and deletes it after.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	ctx := context.Background()
	_, err := shared.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default service account.
	waitFor(t, 30*time.Second, "default service account in "+name, func(ctx context.Context) (bool, error) {
		_, err := shared.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = shared.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func podSpec(annotations map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"true"}}},
		},
	}
}

func newJob(name string, labels, annotations map[string]string) *batchv1.Job {
	backoff := int32(0)
	tpl := podSpec(annotations)
	tpl.Labels = labels
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       batchv1.JobSpec{BackoffLimit: &backoff, Template: tpl},
	}
}

func newPod(name string, annotations map[string]string) *corev1.Pod {
	tpl := podSpec(annotations)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: tpl.Spec}
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitJob(t *testing.T, client kubernetes.Interface, ns, name string, typ batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	waitFor(t, 60*time.Second, fmt.Sprintf("job %s condition %s", name, typ), func(ctx context.Context) (bool, error) {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		job = j
		return jobCondition(j, typ), nil
	})
	return job
}

func waitPod(t *testing.T, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, 60*time.Second, fmt.Sprintf("pod %s: %s", name, what), func(ctx context.Context) (bool, error) {
		p, err := shared.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return cond(p), nil
	})
	return pod
}

func jobPods(t *testing.T, ns, job string) []corev1.Pod {
	t.Helper()
	pods, err := shared.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func TestNodesReadyAndSchedulable(t *testing.T) {
	nodes, err := shared.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("want 1 node, got %d", len(nodes.Items))
	}
	n := nodes.Items[0]
	if n.Spec.Unschedulable || len(n.Spec.Taints) > 0 {
		t.Errorf("node %s: unschedulable=%v taints=%v", n.Name, n.Spec.Unschedulable, n.Spec.Taints)
	}
	if got := n.Status.Allocatable.Cpu().String(); got != "32" {
		t.Errorf("allocatable cpu = %s, want 32", got)
	}
	if got := n.Status.Allocatable.Memory().String(); got != "256Gi" {
		t.Errorf("allocatable memory = %s, want 256Gi", got)
	}
}

func TestJobSucceeds(t *testing.T) {
	ns := namespace(t)
	begin := time.Now()
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(context.Background(), newJob("ok", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, shared.Client, ns, "ok", batchv1.JobComplete)
	t.Logf("job complete %s after create", time.Since(begin).Round(time.Millisecond))
	if !jobCondition(job, batchv1.JobSuccessCriteriaMet) {
		t.Errorf("job complete without SuccessCriteriaMet: %+v", job.Status.Conditions)
	}
	if job.Status.Succeeded != 1 {
		t.Errorf("succeeded = %d, want 1", job.Status.Succeeded)
	}
	pods := jobPods(t, ns, "ok")
	if len(pods) != 1 {
		t.Fatalf("want 1 pod, got %d", len(pods))
	}
	p := pods[0]
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod phase %s, want Succeeded", p.Status.Phase)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil ||
		p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("container status %+v, want terminated with exit code 0", p.Status.ContainerStatuses)
	}
}

func TestJobSucceedsAfterDelay(t *testing.T) {
	ns := namespace(t)
	begin := time.Now()
	job := newJob("slow", nil, map[string]string{"fate.tesk.test/delay": "2s"})
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Running first, for about the delay.
	waitFor(t, 30*time.Second, "running pod", func(ctx context.Context) (bool, error) {
		pods, err := shared.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=slow"})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	})
	waitJob(t, shared.Client, ns, "slow", batchv1.JobComplete)
	if d := time.Since(begin); d < 2*time.Second {
		t.Errorf("job with a 2s delay completed after %s", d)
	}
	p := jobPods(t, ns, "slow")[0]
	term := p.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.FinishedAt.Sub(p.Status.StartTime.Time) < 1500*time.Millisecond {
		t.Errorf("container ran from %v, terminated %+v: want about 2s", p.Status.StartTime, term)
	}
}

func TestJobFailsWithExitCode(t *testing.T) {
	ns := namespace(t)
	job := newJob("bad", nil, map[string]string{"fate.tesk.test/result": "fail", "fate.tesk.test/exit-code": "3"})
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, shared.Client, ns, "bad", batchv1.JobFailed)
	if j.Status.Failed != 1 {
		t.Errorf("failed = %d, want 1", j.Status.Failed)
	}
	pods := jobPods(t, ns, "bad")
	if len(pods) != 1 {
		t.Fatalf("want 1 pod, got %d", len(pods))
	}
	p := pods[0]
	if p.Status.Phase != corev1.PodFailed {
		t.Errorf("pod phase %s, want Failed", p.Status.Phase)
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("container statuses %+v, want terminated with exit code 3", cs)
	}
	if cs[0].State.Terminated.Reason != "Error" {
		t.Errorf("terminated reason %q, want Error", cs[0].State.Terminated.Reason)
	}
}

func TestFailDefaultExitCode(t *testing.T) {
	ns := namespace(t)
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), newPod("p", map[string]string{"fate.tesk.test/result": "fail"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "p", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if code := p.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
}

func TestWaitingFates(t *testing.T) {
	ns := namespace(t)
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"} {
		t.Run(reason, func(t *testing.T) {
			name := strings.ToLower(reason)
			if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), newPod(name, map[string]string{"fate.tesk.test/result": reason}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitPod(t, ns, name, "waiting "+reason, func(p *corev1.Pod) bool {
				cs := p.Status.ContainerStatuses
				return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reason
			})
			if p.Status.Phase != corev1.PodPending {
				t.Errorf("phase %s, want Pending", p.Status.Phase)
			}
			if p.Status.ContainerStatuses[0].State.Waiting.Message == "" {
				t.Errorf("no waiting message")
			}
			// It stays so.
			time.Sleep(700 * time.Millisecond)
			p, err := shared.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != corev1.PodPending || p.Status.ContainerStatuses[0].State.Waiting == nil {
				t.Errorf("pod moved on: phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
		})
	}
}

func TestInitContainerWaitingFates(t *testing.T) {
	ns := namespace(t)
	for _, fate := range []string{"init-ErrImagePull", "init-CreateContainerConfigError"} {
		t.Run(fate, func(t *testing.T) {
			name := strings.ToLower(fate)
			reason := strings.TrimPrefix(fate, "init-")
			pod := newPod(name, map[string]string{"fate.tesk.test/result": fate})
			pod.Spec.InitContainers = []corev1.Container{
				{Name: "init", Image: "busybox:1.36"},
				{Name: "init2", Image: "busybox:1.36"},
			}
			if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitPod(t, ns, name, "init container waiting "+reason, func(p *corev1.Pod) bool {
				ics := p.Status.InitContainerStatuses
				return len(ics) == 2 && ics[0].State.Waiting != nil && ics[0].State.Waiting.Reason == reason
			})
			if p.Status.Phase != corev1.PodPending {
				t.Errorf("phase %s, want Pending", p.Status.Phase)
			}
			if r := p.Status.InitContainerStatuses[1].State.Waiting; r == nil || r.Reason != "PodInitializing" {
				t.Errorf("second init container %+v, want waiting PodInitializing", p.Status.InitContainerStatuses[1].State)
			}
			if r := p.Status.ContainerStatuses[0].State.Waiting; r == nil || r.Reason != "PodInitializing" {
				t.Errorf("container %+v, want waiting PodInitializing", p.Status.ContainerStatuses[0].State)
			}
			initialized := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodInitialized {
					initialized = true
					if c.Status != corev1.ConditionFalse {
						t.Errorf("Initialized = %s, want False", c.Status)
					}
				}
			}
			if !initialized {
				t.Errorf("no Initialized condition: %+v", p.Status.Conditions)
			}
		})
	}
}

func TestInitContainersComplete(t *testing.T) {
	ns := namespace(t)
	pod := newPod("p", nil)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "p", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if ics := p.Status.InitContainerStatuses; len(ics) != 1 || ics[0].State.Terminated == nil || ics[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container statuses %+v", ics)
	}
}

func TestUnschedulable(t *testing.T) {
	ns := namespace(t)
	pod := newPod("big", nil)
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "big", "PodScheduled False", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			if c.Reason != corev1.PodReasonUnschedulable {
				t.Errorf("reason %q, want Unschedulable", c.Reason)
			}
			if !strings.Contains(c.Message, "Insufficient cpu") {
				t.Errorf("message %q, want Insufficient cpu", c.Message)
			}
		}
	}
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Errorf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	}
}

func TestPVCBoundAndMounted(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := shared.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "PVC bound", func(ctx context.Context) (bool, error) {
		p, err := shared.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.ClaimBound && p.Spec.VolumeName != "", nil
	})
	pod := newPod("uses-pvc", map[string]string{"fate.tesk.test/delay": "300ms"})
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := shared.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "uses-pvc", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

func TestPodLogs(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	want := "first line\nsecond line\n"
	if err := shared.SetPodLogs(ctx, ns, "talker", want); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Client.CoreV1().Pods(ns).Create(ctx, newPod("talker", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "talker", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	var got string
	waitFor(t, 10*time.Second, "pod log", func(ctx context.Context) (bool, error) {
		b, err := shared.Client.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{}).DoRaw(ctx)
		got = string(b)
		return err == nil && got == want, nil
	})
	// tailLines is honoured.
	tail := int64(1)
	b, err := shared.Client.CoreV1().Pods(ns).GetLogs("talker", &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
	if err != nil || string(b) != "second line\n" {
		t.Errorf("tail 1: %q, %v", b, err)
	}
}

func TestPodLogsBySelector(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	want := "output of the filer\n"
	stop, err := shared.SetLogsForSelector(ctx, ns, "app=filer", want)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	job := newJob("filer", map[string]string{"app": "filer"}, nil)
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, shared.Client, ns, "filer", batchv1.JobComplete)
	pod := jobPods(t, ns, "filer")[0].Name
	waitFor(t, 10*time.Second, "log of "+pod, func(ctx context.Context) (bool, error) {
		b, err := shared.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		return err == nil && string(b) == want, nil
	})
}

func TestNamespaceLogs(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	if err := shared.SetNamespaceLogs(ctx, ns, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := shared.Client.CoreV1().Pods(ns).Create(ctx, newPod("any", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "any", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	waitFor(t, 10*time.Second, "namespace log", func(ctx context.Context) (bool, error) {
		b, err := shared.Client.CoreV1().Pods(ns).GetLogs("any", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && string(b) == "hello\n", nil
	})
}

func TestRestartPolicyAlwaysKeepsRunning(t *testing.T) {
	ns := namespace(t)
	pod := newPod("server", map[string]string{"fate.tesk.test/delay": "100ms"})
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "server", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// A pod of the same fate that may not restart ends: by then the server
	// would have ended too, were it not restarted.
	control := newPod("control", map[string]string{"fate.tesk.test/delay": "100ms"})
	control.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), control, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "control", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	p, err := shared.Client.CoreV1().Pods(ns).Get(context.Background(), "server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running", p.Status.Phase)
	}
}

// A pod without the annotation takes its fate from an image
// fate.tesk.test/<result>[:<exit-code>].
func TestFateFromImage(t *testing.T) {
	ns := namespace(t)
	job := newJob("by-image", nil, nil)
	job.Spec.Template.Spec.Containers[0].Image = "fate.tesk.test/fail:4"
	if _, err := shared.Client.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, shared.Client, ns, "by-image", batchv1.JobFailed)
	pods := jobPods(t, ns, "by-image")
	if len(pods) != 1 {
		t.Fatalf("want 1 pod, got %d", len(pods))
	}
	if cs := pods[0].Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 4 {
		t.Fatalf("container statuses %+v, want terminated with exit code 4", cs)
	}

	pod := newPod("pull-by-image", nil)
	pod.Spec.Containers[0].Image = "fate.tesk.test/ErrImagePull"
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "pull-by-image", "waiting with ErrImagePull", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ErrImagePull"
	})
}

// The image fate.tesk.test/forever starts the pod and keeps it running, past
// every delay a pod of another fate would end after.
func TestFateForever(t *testing.T) {
	ns := namespace(t)
	pod := newPod("forever", map[string]string{})
	pod.Spec.Containers[0].Image = "fate.tesk.test/forever"
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "forever", "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// A pod of the default fate, created after it, ends: the forever pod
	// is past the delay that would have ended it.
	if _, err := shared.Client.CoreV1().Pods(ns).Create(context.Background(), newPod("mortal", map[string]string{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "mortal", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	p, err := shared.Client.CoreV1().Pods(ns).Get(context.Background(), "forever", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Fatalf("phase %s once a pod of the default fate ended, want still Running", p.Status.Phase)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			t.Errorf("container %s: state %+v, want running", cs.Name, cs.State)
		}
	}
}
