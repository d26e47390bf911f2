//go:build knative

package knative

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probeResult is one line of cmd/probe's output.
type probeResult struct {
	Kind     string `json:"kind"`
	Target   string `json:"target"`
	Round    int    `json:"round"`
	Answered bool   `json:"answered"`
	Error    string `json:"error"`
}

// A TES executor reaches none of the control path (the Broker's ingress,
// the ingress and the activator in front of the handler, the TES API's pod,
// the API server), while a pod of another namespace running the same probe
// with the same addresses reaches every one of them, and the executor
// still reaches the server its NetworkPolicy opens (the tests' S3 server):
// so "blocked" is config/knative's NetworkPolicies at work, not an address
// that answers nobody. Addresses are IPs, so that the answer does not hang
// on DNS.
func TestTasksCannotReachTheControlPath(t *testing.T) {
	ctx := context.Background()
	svcIP := func(ns, name string) string {
		t.Helper()
		s, err := env.C.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Spec.ClusterIP
	}
	api, err := env.TES(ctx, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	// The TES API scales to zero too: keep a pod of it up while the probes
	// run, so that its address answers the control pod.
	warm, stopWarm := context.WithCancel(ctx)
	defer stopWarm()
	go func() {
		for warm.Err() == nil {
			api.ServiceInfo(warm)
			sleep(warm, 2*time.Second)
		}
	}()
	var tesPod string
	for deadline := time.Now().Add(2 * time.Minute); tesPod == ""; {
		pods, err := env.Pods(ctx, "tesk-tes")
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				tesPod = p.Status.PodIP
			}
		}
		if tesPod == "" && time.Now().After(deadline) {
			t.Fatalf("no running pod of tesk-tes after 2m (%d pods, %v)", len(pods), err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	s3 := strings.TrimPrefix(env.Store.Endpoint, "http://")
	control := []string{
		"post=http://" + svcIP("knative-eventing", "broker-ingress") + "/" + Platform + "/default",
		"tcp=" + net.JoinHostPort(svcIP("kingress-standin", "kingress-standin"), "80"),
		"tcp=" + net.JoinHostPort(svcIP("knative-serving", "activator-service"), "80"),
		"tcp=" + net.JoinHostPort(tesPod, "8012"),
		"get=https://" + net.JoinHostPort(svcIP("default", "kubernetes"), "443") + "/version",
	}
	const rounds = 3
	args := append([]string{"-rounds", fmt.Sprint(rounds), "-pause", "1s", "-timeout", "3s", "tcp=" + s3}, control...)

	fromControl := runControlProbe(ctx, t, args)
	id, err := api.Create(ctx, &tesv1.Task{
		Name:      "probe",
		Executors: []tesv1.Executor{{Image: ProbeImage, Command: append([]string{"/probe"}, args...)}},
		Resources: smallTask(),
	})
	if err != nil {
		t.Fatal(err)
	}
	task, err := api.Wait(ctx, id, 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != "COMPLETE" || len(task.Logs) == 0 || len(task.Logs[0].Logs) != 1 {
		t.Fatalf("probe task %s: %s, logs %+v", id, task.State, task.Logs)
	}
	fromExecutor := parseProbe(t, task.Logs[0].Logs[0].Stdout)

	for _, arg := range args[6:] {
		target := arg[strings.IndexByte(arg, '=')+1:]
		c, x := fromControl[target], fromExecutor[target]
		if len(c) != rounds || len(x) != rounds {
			t.Errorf("%s: %d results from the control pod, %d from the executor, want %d each", target, len(c), len(x), rounds)
			continue
		}
		for i := range rounds {
			if !c[i].Answered {
				t.Errorf("%s did not answer the control pod (round %d: %s): the address is dead, so the executor's result proves nothing", target, i+1, c[i].Error)
			}
		}
		isS3 := arg == "tcp="+s3
		for i := range rounds {
			switch {
			case isS3 && !x[i].Answered && i > 0:
				t.Errorf("the S3 server its NetworkPolicy opens did not answer the executor (round %d: %s)", i+1, x[i].Error)
			case !isS3 && x[i].Answered && i == 0:
				// kube-network-policies polices a pod once its informer
				// has the pod's IP and its nftables set holds it: the
				// pod's first moments are not policed (README, Trust
				// boundaries).
				t.Logf("%s answered the executor's first attempt, before the NetworkPolicy plugin knew the pod", target)
			case !isS3 && x[i].Answered:
				t.Errorf("a TES executor reached %s (%s, round %d)", target, x[i].Kind, i+1)
			}
		}
		t.Logf("%-5s %-40s control pod: %v, executor's last round: %v (%s)", x[0].Kind, target, c[rounds-1].Answered, x[rounds-1].Answered, x[rounds-1].Error)
	}
}

// runControlProbe runs the probe in a pod of a namespace of its own (no
// NetworkPolicy) and returns its results by target.
func runControlProbe(ctx context.Context, t *testing.T, args []string) map[string][]probeResult {
	t.Helper()
	const ns = "tesk-probe-control"
	cs := env.C.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	name := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "probe", Image: ProbeImage, Args: args}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	deadline := time.Now().Add(3 * time.Minute)
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control probe pod %s: %s after 3m", name, p.Status.Phase)
		}
		if err := sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return parseProbe(t, string(out))
}

func parseProbe(t *testing.T, out string) map[string][]probeResult {
	t.Helper()
	m := map[string][]probeResult{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r probeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("probe output %q: %v", sc.Text(), err)
		}
		m[r.Target] = append(m[r.Target], r)
	}
	return m
}
