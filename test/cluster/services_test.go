//go:build e2e

package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// probeImage runs test/cluster/cmd/netprobe.
const probeImage = "tesk.test/netprobe:latest"

// servicesImages builds the pause image, the busybox stand-in (the echo
// server) and the probe's image.
func servicesImages(root string) func(ctx context.Context, dir string) ([]cluster.NodeImage, error) {
	return func(ctx context.Context, dir string) ([]cluster.NodeImage, error) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		built, err := ociimage.BuildAll(ctx, ociimage.Options{RepoRoot: root, OutDir: dir, Only: []string{ociimage.Pause, ociimage.Busybox}})
		if err != nil {
			return nil, err
		}
		var out []cluster.NodeImage
		for _, b := range built {
			for _, ref := range b.Refs {
				out = append(out, cluster.NodeImage{Ref: ref, Tar: b.Path})
			}
		}
		bin := filepath.Join(dir, "bin")
		if err := ociimage.GoBuild(ctx, "go", root, bin, nil, "./test/cluster/cmd/netprobe"); err != nil {
			return nil, err
		}
		img, err := ociimage.NewImage(ociimage.Config{Entrypoint: []string{"/netprobe"}, User: "65532:65532"},
			ociimage.LayerSpec{Tree: ociimage.BinaryTree("netprobe", filepath.Join(bin, "netprobe")), CreatedBy: "COPY netprobe /netprobe"})
		if err != nil {
			return nil, err
		}
		tar := filepath.Join(dir, "netprobe.tar")
		if err := ociimage.WriteArchive(tar, img, probeImage); err != nil {
			return nil, err
		}
		return append(out, cluster.NodeImage{Ref: probeImage, Tar: tar}), nil
	}
}

// probeRound is one line of netprobe's output.
type probeRound struct {
	Round     int    `json:"round"`
	DNS       string `json:"dns"`
	Name      string `json:"name"`
	IP        string `json:"ip"`
	API       string `json:"api"`
	APIName   string `json:"apiName"`
	Forbidden string `json:"forbidden"`
}

// The Services option on the real node: a pod resolves a Service's name
// with the cluster DNS, reaches the Service (a Deployment's pod, through
// kube-proxy) by name and by cluster IP, and reaches the API server through
// the kubernetes Service (by IP and by name, the certificate verified) with
// its ServiceAccount token, which RBAC lets read one ConfigMap (200) and not
// list Secrets (403). A NetworkPolicy denying egress in one namespace then
// cuts its pods, running and new, off the Service and the API server, while
// a pod of another namespace keeps reaching both; a policy that allows the
// API server and the DNS (as they are after kube-proxy's DNAT) lets them
// reach those two only; without a policy they reach both again. Stop removes the route, the iptables and nftables rules
// and the processes.
func TestServicesOnTheRealNode(t *testing.T) {
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		RealNode:        true,
		Services:        true,
		BuildNodeImages: servicesImages(root),
		Timeout:         5 * time.Minute,
		Logf:            t.Logf,
	})
	if err != nil {
		t.Fatalf("start a cluster with Services: %v", err)
	}
	t.Logf("cluster with Services started in %.1fs", time.Since(begin).Seconds())
	n := c.RealNode()
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	if !strings.Contains(c.Server, n.HostIP) {
		t.Errorf("Server %s is not at the bridge's address %s", c.Server, n.HostIP)
	}

	// The echo Service: a Deployment's busybox httpd.
	const server, body = "svc-echo", "hello from the echo service"
	mkNamespace(t, c, server)
	labels := map[string]string{"app": "echo"}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: server},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:    "httpd",
					Image:   "docker.io/library/busybox:latest",
					Command: []string{"sh", "-c", "mkdir -p /www && echo '" + body + "' >/www/index.html && exec httpd -f -p 8080 -h /www"},
					Ports:   []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(server).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client.CoreV1().Services(server).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: server},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the echo Deployment available", func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(server).Get(ctx, "echo", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, err
	})

	// Two client namespaces, each with a ServiceAccount that may read one
	// ConfigMap and nothing else.
	denied, open := "svc-denied", "svc-open"
	for _, ns := range []string{denied, open} {
		mkNamespace(t, c, ns)
		mkReader(t, c, ns)
	}
	name := "echo." + server + ".svc." + cluster.ClusterDomain
	probe := func(ns, pod string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
			Spec: corev1.PodSpec{
				ServiceAccountName: "reader",
				Containers: []corev1.Container{{
					Name:  "probe",
					Image: probeImage,
					Env: []corev1.EnvVar{
						{Name: "PROBE_NAME", Value: name}, {Name: "PROBE_IP", Value: svc.Spec.ClusterIP},
						{Name: "PROBE_PORT", Value: "8080"}, {Name: "PROBE_BODY", Value: body},
					},
				}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reaches := func(r probeRound) error {
		var bad []string
		if r.DNS != svc.Spec.ClusterIP {
			bad = append(bad, fmt.Sprintf("%s resolved to %q, want %s", name, r.DNS, svc.Spec.ClusterIP))
		}
		for what, got := range map[string]string{"the Service by name": r.Name, "the Service by cluster IP": r.IP} {
			if got != "ok" {
				bad = append(bad, what+": "+got)
			}
		}
		for what, got := range map[string]string{"the API server (kubernetes Service IP)": r.API, "the API server (kubernetes.default.svc)": r.APIName} {
			if got != "200" {
				bad = append(bad, what+": "+got+", want 200")
			}
		}
		if r.Forbidden != "403" {
			bad = append(bad, "listing Secrets: "+r.Forbidden+", want 403")
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	}
	cutOff := func(r probeRound) error {
		var bad []string
		for what, got := range map[string]string{
			"the Service by cluster IP": r.IP, "the Service by name": r.Name,
			"the API server (kubernetes Service IP)": r.API, "the API server (kubernetes.default.svc)": r.APIName,
			"listing Secrets": r.Forbidden,
		} {
			if !strings.HasPrefix(got, "error: ") {
				bad = append(bad, what+" answered: "+got)
			}
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	}

	probe(denied, "before")
	probe(open, "before")
	for _, ns := range []string{denied, open} {
		waitRounds(t, c, ns, "before", 3, "reaches the Service and the API server", reaches)
	}

	// Deny every egress in one namespace.
	if _, err := c.Client.NetworkingV1().NetworkPolicies(denied).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-egress", Namespace: denied},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe(denied, "after")
	probe(open, "after")
	waitRounds(t, c, denied, "before", 2, "is cut off by the NetworkPolicy", cutOff)
	waitRounds(t, c, denied, "after", 2, "is cut off by the NetworkPolicy", cutOff)
	waitRounds(t, c, open, "after", 3, "still reaches the Service and the API server", reaches)
	waitRounds(t, c, open, "before", 3, "still reaches the Service and the API server", reaches)

	// A policy that lets the namespace's pods reach the API server and the
	// cluster DNS only names them as they are after kube-proxy's DNAT: the
	// bridge's host address with the API server's port, and port 53.
	u, err := url.Parse(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	apiPort, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p int) *intstr.IntOrString { v := intstr.FromInt32(int32(p)); return &v }
	pol, err := c.Client.NetworkingV1().NetworkPolicies(denied).Get(ctx, "deny-egress", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: n.HostIP + "/32"}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port(apiPort)}, {Protocol: &udp, Port: port(53)}, {Protocol: &tcp, Port: port(53)}},
	}}
	if _, err := c.Client.NetworkingV1().NetworkPolicies(denied).Update(ctx, pol, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, c, denied, "after", 2, "reaches the API server and the DNS but not the Service", func(r probeRound) error {
		var bad []string
		if r.DNS != svc.Spec.ClusterIP {
			bad = append(bad, fmt.Sprintf("%s resolved to %q, want %s", name, r.DNS, svc.Spec.ClusterIP))
		}
		for what, got := range map[string]string{"the API server (kubernetes Service IP)": r.API, "the API server (kubernetes.default.svc)": r.APIName} {
			if got != "200" {
				bad = append(bad, what+": "+got+", want 200")
			}
		}
		if r.Forbidden != "403" {
			bad = append(bad, "listing Secrets: "+r.Forbidden+", want 403")
		}
		for what, got := range map[string]string{"the Service by name": r.Name, "the Service by cluster IP": r.IP} {
			if !strings.HasPrefix(got, "error: ") {
				bad = append(bad, what+" answered: "+got)
			}
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	})

	// Without the policy, the namespace's pods reach both again: the policy,
	// and nothing else, cut them off.
	if err := c.Client.NetworkingV1().NetworkPolicies(denied).Delete(ctx, "deny-egress", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRounds(t, c, denied, "after", 3, "reaches the Service and the API server again without the policy", reaches)

	// Every component ran throughout (a dead kube-network-policies would
	// cut every selected pod off, whatever the policies say).
	procs := c.Processes()
	for _, p := range procs {
		if !p.Alive() {
			t.Errorf("%s (pid %d) died during the test; its log %s ends:\n%s", p.Name, p.Pid, p.Log, tail(p.Log, 20))
		}
	}

	// Stop removes everything the option set up on this machine.
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, p := range procs {
		if p.Alive() {
			t.Errorf("%s (pid %d) still runs after Stop", p.Name, p.Pid)
		}
	}
	if out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput(); err == nil {
		t.Errorf("kube-proxy's chain KUBE-SERVICES is still there after Stop:\n%s", out)
	}
	if out, err := exec.Command("iptables", append([]string{"-w", "-C"}, n.Services.ForwardRule...)...).CombinedOutput(); err == nil {
		t.Errorf("the forward rule is still there after Stop (%s)", out)
	}
	if out, _ := exec.Command("ip", "-4", "route", "show", "exact", cluster.ServiceCIDR).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the Service range's route is still there after Stop: %s", out)
	}
	netpol := filepath.Join(n.Services.BinDir, "kube-network-policies")
	if out, err := exec.Command(netpol, "-exists", "-table", n.Services.NFTable).CombinedOutput(); err == nil || !strings.Contains(string(out), "absent") {
		t.Errorf("the nftables table inet %s after Stop: %s (%v)", n.Services.NFTable, out, err)
	}
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err == nil {
		t.Errorf("the bridge %s is still there after Stop", n.Bridge)
	}
}

// Bad input: Services without the real node, and without its binaries, is
// refused before anything starts, naming what is missing.
func TestServicesBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := cluster.Start(ctx, cluster.Options{Services: true}); err == nil || !strings.Contains(err.Error(), "Services needs RealNode") {
		t.Errorf("Services without RealNode: %v", err)
	}
	empty := t.TempDir()
	_, err := cluster.Start(ctx, cluster.Options{RealNode: true, Services: true, ServicesBinDir: empty})
	if err == nil {
		t.Fatal("a cluster started without the services' binaries")
	}
	for _, b := range []string{"kube-proxy", "coredns", "kube-network-policies"} {
		if want := b + " is missing in " + empty; !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if !strings.Contains(err.Error(), "build-services.sh") {
		t.Errorf("the error does not say how to build them: %v", err)
	}
}

func mkNamespace(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "default service account in "+ns, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// mkReader creates the ServiceAccount reader, allowed to get the ConfigMap
// kube-root-ca.crt of its namespace and nothing else.
func mkReader(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-root-ca.crt"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRounds waits until the probe pod's last n rounds all pass check
// (rounds printed since this call), and fails with the last rounds when they
// do not within two minutes.
func waitRounds(t *testing.T, c *cluster.Cluster, ns, pod string, n int, what string, check func(probeRound) error) {
	t.Helper()
	ctx := context.Background()
	first := -1
	var last []probeRound
	var lastErr error
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		b, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		var rounds []probeRound
		for _, line := range strings.Split(string(b), "\n") {
			var r probeRound
			if json.Unmarshal([]byte(line), &r) == nil && r.Round > 0 {
				rounds = append(rounds, r)
			}
		}
		if first < 0 {
			first = len(rounds)
		}
		rounds = rounds[min(first, len(rounds)):]
		if len(rounds) < n {
			continue
		}
		last = rounds[len(rounds)-n:]
		lastErr = nil
		for _, r := range last {
			if err := check(r); err != nil {
				lastErr = fmt.Errorf("round %d: %w", r.Round, err)
				break
			}
		}
		if lastErr == nil {
			t.Logf("%s/%s %s (rounds %d to %d)", ns, pod, what, last[0].Round, last[n-1].Round)
			return
		}
	}
	t.Fatalf("pod %s/%s never %s in %d rounds in a row: %v; its last rounds: %+v", ns, pod, what, n, lastErr, last)
}

// build-services.sh and the package agree on where the binaries are.
func TestServicesCacheDirMatchesScript(t *testing.T) {
	src, err := cluster.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(src, "build-services.sh"), "--print-dir").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := cluster.ServicesCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != dir && os.Getenv(cluster.ServicesCacheDirEnv) == "" {
		t.Errorf("build-services.sh says %s, ServicesCacheDir %s", got, dir)
	}
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
