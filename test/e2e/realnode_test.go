//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The real node's tests run on a cluster of their own whose only node is a
// real kubelet with containerd and runc (test/cluster Options.RealNode):
// every container of these tasks really runs, the filer really moves data
// through the task's volume, and every pod status comes from the kubelet.

// realFiler is the filer image on the real node, built from this checkout.
const (
	realFilerName    = "tesk-filer"
	realFilerVersion = "realnode"
)

var (
	realOnce    sync.Once
	realShared  *cluster.Cluster
	realErr     error
	realStarted time.Duration
)

// realNodeCluster starts the real node's cluster on first use.
func realNodeCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	realOnce.Do(func() {
		begin := time.Now()
		root, err := filepath.Abs("../..")
		if err != nil {
			realErr = err
			return
		}
		realShared, realErr = cluster.Start(context.Background(), cluster.Options{
			RealNode:        true,
			BuildNodeImages: cluster.ProjectImages(root, realFilerName+":"+realFilerVersion),
			Timeout:         5 * time.Minute,
			Logf: func(format string, args ...any) {
				fmt.Printf("real node: "+format+"\n", args...)
			},
		})
		realStarted = time.Since(begin)
		fmt.Printf("real node cluster started in %.1fs\n", realStarted.Seconds())
	})
	if realErr != nil {
		t.Fatalf("start the real node's cluster: %v", realErr)
	}
	return realShared
}

func stopRealNodeCluster() error {
	if realShared == nil {
		return nil
	}
	return realShared.Stop()
}

// newRealEnv is an env on the real node's cluster whose filer is the real
// filer image; pods that cannot start fail their job after podTimeout.
func newRealEnv(t *testing.T, podTimeout time.Duration, config func(*steps.Config)) *env {
	c := realNodeCluster(t)
	return newEnv(t, envOptions{cluster: c, config: func(cfg *steps.Config) {
		cfg.FilerName, cfg.FilerVersion = realFilerName, realFilerVersion
		cfg.PodTimeout = podTimeout
		if config != nil {
			config(cfg)
		}
	}})
}

// realExecutor is an executor Job spec (as the TESK API writes it) that runs
// script with sh in image.
func realExecutor(task string, i int, image, script string) map[string]any {
	ex := executor(task, i, nil, nil)
	c := ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["image"] = image
	c["command"] = []any{"sh", "-c", script}
	return ex
}

func containerOf(ex map[string]any) map[string]any {
	return ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

// serveOn serves h on a free port of host until the test ends, returning its
// base URL.
func serveOn(t *testing.T, host string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// awsSecret creates the filer's aws-secret for the S3 server.
func (e *env) awsSecret(srv *s3server.Server) {
	e.t.Helper()
	config, credentials := srv.AWSConfig()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: jobspec.AWSSecretName, Namespace: e.ns},
		StringData: map[string]string{"config": config, "credentials": credentials},
	}
	if _, err := e.c.Client.CoreV1().Secrets(e.ns).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// podLog reads a container's log through the API server from the kubelet.
func (e *env) podLog(pod string) string {
	e.t.Helper()
	b, err := e.c.Client.CoreV1().Pods(e.ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		e.t.Fatalf("log of pod %s: %v", pod, err)
	}
	return string(b)
}

// jobLog is the log of the job's first pod.
func (e *env) jobLog(job string) string {
	e.t.Helper()
	pods := e.podsOf(job)
	if len(pods) == 0 {
		e.t.Fatalf("job %s has no pod", job)
	}
	return e.podLog(pods[0].Name)
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// A TES task through the TES API on the real node: a content, an HTTP and
// an S3 input; two executors that read them at their paths and pass a file
// through a volume both mount; outputs to S3, one a wildcard with
// path_prefix. Every byte is checked where it lands, the output sizes come
// from the real filer pod's log, and the view shows exit code 0 for both
// executors (behaviour §4, §5, §7).
func TestRealNodeDataPath(t *testing.T) {
	ctx := context.Background()
	e := newRealEnv(t, 60*time.Second, nil)
	node := e.c.RealNode()

	const httpBody = "bytes over http\n"
	web := serveOn(t, node.HostIP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/in/web.txt" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, httpBody)
	}))
	srv, err := s3server.StartOn(node.HostIP)
	if err != nil {
		t.Fatalf("S3 server: %v", err)
	}
	defer srv.Stop()
	const s3Body = "bytes from s3\n"
	if err := srv.CreateBucket(ctx, "tes"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(ctx, "tes", "in/object.txt", s3Body); err != nil {
		t.Fatal(err)
	}
	e.awsSecret(srv)
	api := newTESAPI(t, e, e.url)

	const content = "inline content\n"
	all := content + httpBody + s3Body
	id := api.create(map[string]any{
		"name": "real data path",
		"inputs": []any{
			map[string]any{"path": "/data/in/content.txt", "content": content},
			map[string]any{"url": web + "/in/web.txt", "path": "/data/in/web.txt"},
			map[string]any{"url": "s3://tes/in/object.txt", "path": "/data/in/object.txt", "type": "FILE"},
		},
		"outputs": []any{
			map[string]any{"url": "s3://tes/out/sums.txt", "path": "/data/out/sums.txt", "type": "FILE"},
			map[string]any{"url": "s3://tes/out/digest.txt", "path": "/data/out/digest.txt", "type": "FILE"},
			map[string]any{"url": "s3://tes/out/parts", "path": "/data/out/parts/*.txt", "path_prefix": "/data/out/parts", "type": "FILE"},
		},
		"volumes": []any{"/shared"},
		"executors": []any{
			map[string]any{
				"image": "busybox",
				"command": []any{"sh", "-c", "cat /data/in/content.txt /data/in/web.txt /data/in/object.txt > /shared/all.txt && " +
					"cd /data/in && sha256sum content.txt web.txt object.txt && " +
					"mkdir -p /data/out/parts && head -c 5 /shared/all.txt > /data/out/parts/a.txt && echo second > /data/out/parts/b.txt"},
				"stdout": "/data/out/sums.txt",
			},
			map[string]any{
				"image":   "alpine",
				"command": []any{"sh", "-c", "sha256sum < /shared/all.txt | cut -d' ' -f1 > /data/out/digest.txt && wc -c < /shared/all.txt"},
			},
		},
	})
	v := api.waitState(id, "COMPLETE", 4*time.Minute)

	wantSums := fmt.Sprintf("%s  content.txt\n%s  web.txt\n%s  object.txt\n", sha256Hex(content), sha256Hex(httpBody), sha256Hex(s3Body))
	wants := map[string]string{
		"out/sums.txt":    wantSums,
		"out/digest.txt":  sha256Hex(all) + "\n",
		"out/parts/a.txt": all[:5],
		"out/parts/b.txt": "second\n",
	}
	for key, want := range wants {
		got, err := srv.Get(ctx, "tes", key)
		if err != nil {
			t.Errorf("output %s: %v", key, err)
		} else if got != want {
			t.Errorf("output %s = %q, want %q", key, got, want)
		}
	}

	// The sizes come from the real filer pod's log, read through the kubelet.
	out, err := e.job(id + "-outputs-filer")
	if err != nil {
		t.Fatal(err)
	}
	var logged []map[string]string
	if err := json.Unmarshal([]byte(out.Annotations[taskmeta.AnnotationOutputFileLogs]), &logged); err != nil {
		t.Fatalf("output-file-logs %q: %v", out.Annotations[taskmeta.AnnotationOutputFileLogs], err)
	}
	sizes := map[string]string{}
	for _, o := range logged {
		sizes[o["url"]] = o["size_bytes"]
	}
	for key, want := range wants {
		if got := sizes["s3://tes/"+key]; got != strconv.Itoa(len(want)) {
			t.Errorf("output-file-logs size of %s = %q, want %d (all: %v)", key, got, len(want), logged)
		}
	}
	if log := e.jobLog(id + "-outputs-filer"); !strings.Contains(log, `"path":"/data/out/digest.txt","size_bytes":"65"`) {
		t.Errorf("the outputs filer's log does not report its upload:\n%s", log)
	}
	// The second executor's standard output is the size of the shared file.
	if got := strings.TrimSpace(e.jobLog(id + "-ex-01")); got != strconv.Itoa(len(all)) {
		t.Errorf("second executor printed %q, want %d", got, len(all))
	}

	if v = api.get(id, "BASIC"); v["state"] != "COMPLETE" {
		t.Fatalf("BASIC view %v", v)
	}
	logs, _ := v["logs"].([]any)
	if len(logs) == 0 {
		t.Fatalf("BASIC view has no logs: %v", v)
	}
	exLogs := logs[len(logs)-1].(map[string]any)["logs"].([]any)
	if len(exLogs) != 2 {
		t.Fatalf("executor logs %v, want 2", exLogs)
	}
	for i, l := range exLogs {
		if code := l.(map[string]any)["exit_code"]; code != float64(0) {
			t.Errorf("executor %d exit_code %v, want 0", i, code)
		}
	}
}

// Exit codes come from the real containers: an executor that exits 3 ends
// the task EXECUTOR_ERROR with exit code 3; with ignore_error, an executor
// that exits 1 is followed by the next one and the task completes
// (behaviour §4).
func TestRealNodeExitCodes(t *testing.T) {
	e := newRealEnv(t, 60*time.Second, nil)
	t.Run("exit 3", func(t *testing.T) {
		task := "task-realexit3"
		e.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "echo failing; exit 3"), realExecutor(task, 1, "busybox", "echo never"))))
		v := e.waitState(task, tesv1.StateExecutorError, 3*time.Minute)
		if n := len(v.Logs[0].Logs); n != 1 || v.Logs[0].Logs[0].ExitCode != 3 {
			t.Errorf("executor logs %+v, want one with exit code 3", v.Logs[0].Logs)
		}
		if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
			t.Errorf("the executor after the failed one was created: %v", err)
		}
		if log := e.jobLog(task + "-ex-00"); log != "failing\n" {
			t.Errorf("log %q", log)
		}
	})
	t.Run("ignore_error", func(t *testing.T) {
		task := "task-realignore"
		first := realExecutor(task, 0, "busybox", "exit 1")
		first["metadata"].(map[string]any)["annotations"] = map[string]any{"ignore-error": "true"}
		e.submit(task, noIO(taskJSON(first, realExecutor(task, 1, "ubuntu", "echo after"))))
		v := e.waitState(task, tesv1.StateComplete, 3*time.Minute)
		var codes []int32
		for _, l := range v.Logs[0].Logs {
			codes = append(codes, l.ExitCode)
		}
		if fmt.Sprint(codes) != "[1 0]" {
			t.Errorf("exit codes %v, want [1 0]", codes)
		}
		if log := e.jobLog(task + "-ex-01"); log != "after\n" {
			t.Errorf("log of the second executor %q", log)
		}
	})
}

// Executor logs as TES clients read them, from real containers: three
// executors, the second writing to both streams and failing with
// ignore_error; the task completes, and once every pod of the task is
// deleted (as pod garbage collection or a removed node would) the view
// still lists the three executors in order, with their exit codes, times
// and stdout and stderr apart (the local cluster serves a container's
// streams apart).
func TestRealNodeExecutorLogsOutlivePods(t *testing.T) {
	e := newRealEnv(t, 60*time.Second, nil)
	task := "task-reallogs"
	second := realExecutor(task, 1, "busybox", "echo to-out; echo to-err >&2; exit 4")
	second["metadata"].(map[string]any)["annotations"] = map[string]any{"ignore-error": "true"}
	e.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "echo first"), second, realExecutor(task, 2, "busybox", "echo third; echo warn >&2"))))
	e.waitState(task, tesv1.StateComplete, 3*time.Minute)
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task}
	if err := shared.Client.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}, sel); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the task's pods to be gone", time.Minute, func() bool {
		pods, err := shared.Client.CoreV1().Pods(e.ns).List(ctx, sel)
		return err == nil && len(pods.Items) == 0
	})
	v, code := e.view(task)
	if code != 200 || len(v.Logs) != 1 {
		t.Fatalf("view %d %+v", code, v)
	}
	logs := v.Logs[0].Logs
	want := []struct {
		code           int32
		stdout, stderr string
	}{{0, "first\n", ""}, {4, "to-out\n", "to-err\n"}, {0, "third\n", "warn\n"}}
	if len(logs) != len(want) {
		t.Fatalf("%d executor logs after the pods were deleted, want %d: %+v", len(logs), len(want), logs)
	}
	for i, w := range want {
		l := logs[i]
		if l.ExitCode != w.code || l.Stdout != w.stdout || l.Stderr != w.stderr || l.StartTime == "" || l.EndTime == "" {
			t.Errorf("executor %d: exit code %d stdout %q stderr %q times %q %q; want %d %q %q and both times",
				i, l.ExitCode, l.Stdout, l.Stderr, l.StartTime, l.EndTime, w.code, w.stdout, w.stderr)
		}
	}
}

// Pods that cannot start on a real kubelet: an image the registry does not
// have (ErrImagePull, then ImagePullBackOff) and a root image whose task asks
// to run as non-root (CreateContainerConfigError)
// fail their job after the pod timeout, and the task ends EXECUTOR_ERROR
// naming the job (behaviour §6).
func TestRealNodePodsThatCannotStart(t *testing.T) {
	e := newRealEnv(t, 5*time.Second, nil)
	for _, tc := range []struct {
		name    string
		change  func(c map[string]any)
		reasons []string
	}{
		{"pull", func(c map[string]any) { c["image"] = "example.invalid/tesk/absent:1.0" }, []string{"ErrImagePull", "ImagePullBackOff"}},
		// A root image asked to run as non-root: the kubelet refuses
		// to create the container.
		{"config", func(c map[string]any) {
			c["securityContext"] = map[string]any{"runAsNonRoot": true}
		}, []string{"CreateContainerConfigError"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := "task-realcannot" + tc.name
			ex := realExecutor(task, 0, "busybox", "echo never")
			tc.change(containerOf(ex))
			e.submit(task, noIO(taskJSON(ex)))
			var seen string
			e.waitFor("the kubelet's waiting reason", 2*time.Minute, func() bool {
				for _, p := range e.podsOf(task + "-ex-00") {
					for _, cs := range p.Status.ContainerStatuses {
						if w := cs.State.Waiting; w != nil {
							for _, r := range tc.reasons {
								if w.Reason == r {
									seen = r
									return true
								}
							}
						}
					}
				}
				return false
			})
			t.Logf("kubelet: %s", seen)
			v := e.sweepUntil(task, tesv1.StateExecutorError, time.Minute)
			e.checkFailedByService(task + "-ex-00")
			if msg := strings.Join(v.Logs[0].SystemLogs, " "); !strings.Contains(msg, task+"-ex-00") {
				t.Errorf("system_logs %v", v.Logs[0].SystemLogs)
			}
		})
	}
}

// Cancelling a task whose executor runs `sleep 600`: the job is deleted, the
// kubelet stops the container, and the task is CANCELED (behaviour §3).
func TestRealNodeCancelStopsTheContainer(t *testing.T) {
	e := newRealEnv(t, 60*time.Second, nil)
	task := "task-realcancel"
	e.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "exec sleep 600"))))
	var pod corev1.Pod
	e.waitFor("the executor's container to run", 2*time.Minute, func() bool {
		for _, p := range e.podsOf(task + "-ex-00") {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					pod = p
					return true
				}
			}
		}
		return false
	})
	if n := sleepers(); n == 0 {
		t.Fatal("no `sleep 600` process runs on this machine while the executor runs")
	}
	code, body := e.post("task.cancelled", map[string]any{"task": task, "namespace": e.ns})
	if code != http.StatusOK {
		t.Fatalf("task.cancelled: %d %s", code, body)
	}
	e.waitState(task, tesv1.StateCanceled, 2*time.Minute)
	e.waitFor("the executor's pod to be gone", 2*time.Minute, func() bool {
		_, err := e.c.Client.CoreV1().Pods(e.ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	e.waitFor("the container's process to end", time.Minute, func() bool { return sleepers() == 0 })
}

// sleepers counts this machine's `sleep 600` processes.
func sleepers() int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == "sleep 600" {
			n++
		}
	}
	return n
}

// Requests become limits (behaviour §5): the executor's container runs with
// a cgroup memory limit equal to its memory request.
func TestRealNodeMemoryLimitIsTheRequest(t *testing.T) {
	e := newRealEnv(t, 60*time.Second, nil)
	task := "task-reallimits"
	ex := realExecutor(task, 0, "busybox",
		"cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
	containerOf(ex)["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "96Mi"}}
	e.submit(task, noIO(taskJSON(ex)))
	e.waitState(task, tesv1.StateComplete, 3*time.Minute)
	got := strings.TrimSpace(e.jobLog(task + "-ex-00"))
	if want := strconv.Itoa(96 << 20); got != want {
		t.Errorf("the container's memory limit is %s, want %s (its request)", got, want)
	}
	j, err := e.job(task + "-ex-00")
	if err != nil {
		t.Fatal(err)
	}
	if l := j.Spec.Template.Spec.Containers[0].Resources.Limits.Memory(); l.String() != "96Mi" {
		t.Errorf("job's memory limit %s, want 96Mi", l)
	}
}

// A filer whose input URL cannot be reached: the task ends SYSTEM_ERROR and
// the filer's own error is in its pod's log (behaviour §7). With
// FILER_BACKOFF_LIMIT 1 the job's second pod fails too (Kubernetes' default,
// 6 retries, would take about ten minutes of back-off).
func TestRealNodeUnreachableInput(t *testing.T) {
	one := int32(1)
	e := newRealEnv(t, 60*time.Second, func(c *steps.Config) { c.FilerBackoffLimit = &one })
	node := e.c.RealNode()
	// A port on the bridge address that nothing listens on.
	l, err := net.Listen("tcp", net.JoinHostPort(node.HostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/missing.txt"
	l.Close()
	task := "task-realunreach"
	spec := taskJSON(realExecutor(task, 0, "busybox", "echo never"))
	spec["inputs"] = []any{map[string]any{"name": "in", "url": url, "path": "/data/in/missing.txt", "type": "FILE"}}
	delete(spec, "outputs")
	e.submit(task, spec)
	e.waitState(task, tesv1.StateSystemError, 3*time.Minute)
	log := e.jobLog(task + "-inputs-filer")
	if !strings.Contains(log, l.Addr().String()) || !strings.Contains(strings.ToLower(log), "refused") {
		t.Errorf("the inputs filer's log does not say why:\n%s", log)
	}
	if n := len(e.podsOf(task + "-inputs-filer")); n != 2 {
		t.Errorf("the inputs filer ran %d pods, want 2 (backoffLimit 1)", n)
	}
	if _, err := e.job(task + "-ex-00"); !apierrors.IsNotFound(err) {
		t.Errorf("the executor was created: %v", err)
	}
}

// The filer reaches no private address the operator has not allowed: an
// allowed server (FILER_ALLOWED_CIDRS holds this machine's bridge address)
// that redirects to the cloud's metadata service gets the task nowhere. It
// ends SYSTEM_ERROR with the filer's refusal in its log, and no executor
// runs.
func TestRealNodeFilerRefusesPrivateAddresses(t *testing.T) {
	one := int32(1)
	e := newRealEnv(t, 60*time.Second, func(c *steps.Config) { c.FilerBackoffLimit = &one })
	node := e.c.RealNode()
	url := serveOn(t, node.HostIP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
	})) + "/in.txt"
	task := "task-realprivate"
	spec := taskJSON(realExecutor(task, 0, "busybox", "echo never"))
	spec["inputs"] = []any{map[string]any{"name": "in", "url": url, "path": "/data/in/in.txt", "type": "FILE"}}
	delete(spec, "outputs")
	e.submit(task, spec)
	e.waitState(task, tesv1.StateSystemError, 3*time.Minute)
	log := e.jobLog(task + "-inputs-filer")
	if !strings.Contains(log, "169.254.169.254") || !strings.Contains(log, "a private address, which the filer may not reach") {
		t.Errorf("the inputs filer's log does not say it refused the metadata service:\n%s", log)
	}
	if _, err := e.job(task + "-ex-00"); !apierrors.IsNotFound(err) {
		t.Errorf("the executor was created: %v", err)
	}
}

// An executor runs hardened by default (behaviour §3.13): as the user its
// image asks for (root, for busybox), without capabilities, without
// privilege escalation, under the runtime's seccomp profile and without a
// ServiceAccount token, and it still writes the task's volume. A task may
// choose another user; EXECUTOR_SECURITY_CONTEXT with runAsNonRoot refuses
// root images.
func TestRealNodeHardenedExecutor(t *testing.T) {
	probe := `id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '; ` +
		`ls /var/run/secrets/kubernetes.io/serviceaccount 2>/dev/null || echo no-token; ` +
		`echo data > /scratch/written && cat /scratch/written`
	withVolume := func(spec map[string]any) map[string]any {
		spec = noIO(spec)
		spec["volumes"] = []any{"/scratch"}
		return spec
	}
	e := newRealEnv(t, 30*time.Second, nil)
	t.Run("the defaults: the image's root, no capabilities, no token", func(t *testing.T) {
		task := "task-realhardened"
		e.submit(task, withVolume(taskJSON(realExecutor(task, 0, "busybox", probe))))
		e.waitState(task, tesv1.StateComplete, 3*time.Minute)
		want := "0\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\nno-token\ndata\n"
		if log := e.jobLog(task + "-ex-00"); log != want {
			t.Errorf("log %q, want %q", log, want)
		}
		pods := e.podsOf(task + "-ex-00")
		if ps := pods[0].Spec; ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
			t.Errorf("pod automountServiceAccountToken %v", ps.AutomountServiceAccountToken)
		}
	})
	t.Run("the task's own user", func(t *testing.T) {
		task := "task-realuser"
		ex := realExecutor(task, 0, "busybox", "id -u; grep '^CapEff:' /proc/self/status | tr -s '\t' ' '")
		containerOf(ex)["securityContext"] = map[string]any{"runAsUser": 1000}
		e.submit(task, noIO(taskJSON(ex)))
		e.waitState(task, tesv1.StateComplete, 3*time.Minute)
		if log := e.jobLog(task + "-ex-00"); log != "1000\nCapEff: 0000000000000000\n" {
			t.Errorf("log %q", log)
		}
	})
	t.Run("EXECUTOR_SECURITY_CONTEXT runAsNonRoot refuses root images", func(t *testing.T) {
		nonRoot := newRealEnv(t, 5*time.Second, func(c *steps.Config) {
			c.ExecutorSecurityContext = jobspec.DefaultExecutorSecurityContext()
			yes := true
			c.ExecutorSecurityContext.RunAsNonRoot = &yes
		})
		task := "task-realnonroot"
		nonRoot.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "echo never"))))
		v := nonRoot.sweepUntil(task, tesv1.StateExecutorError, 3*time.Minute)
		if msg := strings.Join(v.Logs[0].SystemLogs, " "); !strings.Contains(msg, "CreateContainerConfigError") {
			t.Errorf("system_logs %q, want CreateContainerConfigError", msg)
		}
	})
}
