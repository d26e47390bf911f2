// Package cluster starts and stops a local Kubernetes control plane for tests,
// benchmarks and the demo: etcd, kube-apiserver (RBAC, service account
// tokens), kube-controller-manager (the real Job controller, garbage
// collector, PV binder, namespace and service account controllers),
// kube-scheduler, and kwok playing the nodes, the pods and the kubelet's
// log endpoint. All of it runs as plain processes on free loopback ports with
// its state in a temporary directory.
//
// The binaries come from build.sh (make cluster-bins), which builds them from
// the Go module proxy into a cache directory shared by every checkout.
//
// Pods choose their fate with annotations (see README.md and stages/pod.yaml).
package cluster

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

//go:embed stages/*.yaml manifests/*.yaml
var embedded embed.FS

const (
	// serviceCIDR is the service IP range; serviceIP is the API server's
	// address in it (kubernetes.default).
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	podCIDR     = "10.244.0.0/16"

	// KubernetesVersion is the version of the control plane binaries.
	KubernetesVersion = "v1.35.4"
)

// Options configures Start. The zero value starts one node of 32 CPU and
// 256Gi memory on free ports in a new temporary directory.
type Options struct {
	// CacheDir holds bin/, crds/ and kwok-crds/ as written by build.sh.
	// Default: DefaultCacheDir().
	CacheDir string
	// Dir is the state directory (certificates, etcd data, logs, kubeconfigs).
	// It must not exist or be empty. Default: a new temporary directory.
	// Stop removes it either way.
	Dir string

	// Nodes is the number of fake nodes, named kwok-node-0, ...: default 1,
	// or none with RealNode.
	Nodes int
	// NodeCPU, NodeMemory and NodePods are each node's capacity
	// (defaults "32", "256Gi", "1000").
	NodeCPU, NodeMemory, NodePods string

	// Fixed ports on 127.0.0.1; 0 picks a free one.
	APIServerPort int
	EtcdPort      int
	KubeletPort   int

	// Extra command line flags, appended after the defaults (a later flag
	// wins for single-valued flags).
	APIServerFlags         []string
	ControllerManagerFlags []string
	SchedulerFlags         []string
	KwokFlags              []string

	// RealNode starts a real node beside the kwok nodes (RealNodeName): a
	// kubelet with containerd and runc on this machine, its pods on a bridge
	// of their own (RealNode.HostIP is this machine's address there), its
	// volumes directories of this machine (the default storage class
	// RealStorageClass), its images served by a registry of its own that
	// mirrors every registry. It needs root and the binaries of
	// build-node.sh (CheckRealNodeHost names what is missing).
	RealNode bool
	// NodeBinDir holds the node's binaries (default: NodeCacheDir()/bin).
	NodeBinDir string
	// KubeletFeatureGates (with RealNode) are set in the kubelet's
	// configuration beside the node's own (PodLogsQuerySplitStreams), e.g.
	// EventedPLEG to time a pod's start without the kubelet's relist.
	KubeletFeatureGates map[string]bool
	// NodeImages are loaded into the node's registry and containerd before
	// the kubelet starts; BuildNodeImages, if set, is called to make more of
	// them in the directory it is given.
	NodeImages      []NodeImage
	BuildNodeImages func(ctx context.Context, dir string) ([]NodeImage, error)
	// SandboxImage is the pod sandbox (pause) image, one of the node's images
	// (default DefaultSandboxImage).
	SandboxImage string

	// Services (with RealNode) gives the real node what in-cluster Services
	// need: kube-controller-manager with ServiceControllers too, kube-proxy
	// (iptables mode) and CoreDNS (the kubelet's clusterDNS, no forwarding)
	// on this machine, the API server at RealNode.HostIP (Server then names
	// that address) as the kubernetes Service's endpoint, the Service range
	// routed to the pods' bridge only, and NetworkPolicies enforced by
	// kube-network-policies. Off by default: it costs a few seconds and takes
	// host-wide state (one such cluster per machine). CheckServicesHost names
	// what the machine lacks.
	Services bool
	// ServicesBinDir holds kube-proxy, coredns and kube-network-policies
	// (default: ServicesCacheDir()/bin, as build-services.sh writes them).
	ServicesBinDir string

	// Knative (with RealNode and Services) runs Knative Eventing and
	// Serving on the real node (knative.go): their images are loaded with
	// the node's, their YAML applied once the cluster is up, and Start
	// returns once every Deployment of theirs is Available. It takes
	// minutes: set Timeout accordingly.
	Knative bool
	// KnativeCacheDir holds build-knative.sh's output (default
	// KnativeCacheDir()).
	KnativeCacheDir string
	// NATS (with Knative) adds a durable channel (natss.go): a NATS server
	// with JetStream and the NatsJetStreamChannel of eventing-natss, whose
	// images are loaded with Knative's and whose YAML is applied after
	// Knative's; a Broker runs on it when its spec.config names
	// NatsBrokerConfig. Knative's default channel stays the in-memory one.
	NATS bool
	// NatsCacheDir holds build-natss.sh's output (default NatsCacheDir()).
	NatsCacheDir string

	// Detach starts the processes in their own sessions so that they outlive
	// the calling program (cmd/cluster up). Without it they are killed when
	// the caller dies.
	Detach bool
	// Timeout bounds the whole start (default 2 minutes).
	Timeout time.Duration
	// Logf, if set, receives progress messages.
	Logf func(format string, args ...any)
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir is the state directory.
	Dir string
	// CacheDir is where the binaries and CRDs were taken from.
	CacheDir string
	// Kubeconfig is the path of the admin kubeconfig (group system:masters).
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Dynamic is an admin dynamic client.
	Dynamic dynamic.Interface
	// Server is the API server URL (https://127.0.0.1:<port>; with Services
	// https://<RealNode.HostIP>:<port>).
	Server string
	// Nodes are the names of the fake nodes.
	Nodes []string

	ports     ports
	processes []*Process
	logf      func(string, ...any)

	mu       sync.Mutex
	adapters []*Adapter
	watchers []context.CancelFunc
	node     *RealNode // nil without a real node
	stopped  bool
	attached bool // made by Attach: the control plane belongs to another program

	services bool // Options.Services
	// The health endpoints of the Services option's processes.
	dnsReady, proxyHealth, netpolReady string
}

type ports struct {
	Etcd, EtcdPeer, APIServer, Kubelet, ControllerManager, Scheduler int
}

// Start starts a cluster and returns once the API server is ready, every
// node is Ready and the default service account exists. On failure nothing
// it started is left running and its directory is removed.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	begin := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	switch {
	case opts.Nodes < 0:
		return nil, fmt.Errorf("Nodes %d: must not be negative", opts.Nodes)
	case opts.Nodes == 0 && !opts.RealNode:
		opts.Nodes = 1
	}
	if opts.Knative && !opts.Services {
		return nil, errors.New("Knative needs Services (and RealNode): its components are Deployments with Services, DNS and the API server reached from pods")
	}
	if opts.NATS && !opts.Knative {
		return nil, errors.New("NATS needs Knative: it is a channel of Knative Eventing")
	}
	if opts.NATS && opts.NatsCacheDir == "" {
		dir, err := NatsCacheDir()
		if err != nil {
			return nil, err
		}
		opts.NatsCacheDir = dir
	}
	if opts.Knative {
		if opts.KnativeCacheDir == "" {
			dir, err := KnativeCacheDir()
			if err != nil {
				return nil, err
			}
			opts.KnativeCacheDir = dir
		}
		build := opts.BuildNodeImages
		opts.BuildNodeImages = func(ctx context.Context, dir string) ([]NodeImage, error) {
			var images []NodeImage
			if build != nil {
				var err error
				if images, err = build(ctx, dir); err != nil {
					return nil, err
				}
			}
			k, err := KnativeImages(opts.KnativeCacheDir)
			if err != nil {
				return nil, err
			}
			ingress, err := KingressImage(ctx, dir)
			if err != nil {
				return nil, err
			}
			images = append(append(images, k...), ingress)
			if opts.NATS {
				n, err := NatsImages(opts.NatsCacheDir)
				if err != nil {
					return nil, err
				}
				images = append(images, n...)
			}
			return images, nil
		}
	}
	if opts.Services && !opts.RealNode {
		return nil, errors.New("Services needs RealNode: Services, DNS and network policies are the real node's")
	}
	if opts.NodeCPU == "" {
		opts.NodeCPU = "32"
	}
	if opts.NodeMemory == "" {
		opts.NodeMemory = "256Gi"
	}
	if opts.NodePods == "" {
		opts.NodePods = "1000"
	}
	for name, q := range map[string]string{"NodeCPU": opts.NodeCPU, "NodeMemory": opts.NodeMemory, "NodePods": opts.NodePods} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return nil, fmt.Errorf("%s %q: %w", name, q, err)
		}
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}

	cacheDir := opts.CacheDir
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	if err := checkCache(cacheDir); err != nil {
		return nil, err
	}

	p, err := choosePorts(opts)
	if err != nil {
		return nil, err
	}

	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tesk-cluster-"); err != nil {
			return nil, err
		}
	} else {
		entries, err := os.ReadDir(dir)
		switch {
		case err == nil && len(entries) > 0:
			return nil, fmt.Errorf("state directory %s is not empty (left over from an earlier cluster?): remove it or choose another", dir)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}

	c = &Cluster{
		Dir:      dir,
		CacheDir: cacheDir,
		Server:   fmt.Sprintf("https://127.0.0.1:%d", p.APIServer),
		ports:    p,
		logf:     logf,
		services: opts.Services,
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, stopErr)
			}
			c = nil
		}
	}()
	if opts.Services {
		// The API server listens on the pods' bridge: the bridge comes first.
		n, err := c.prepareRealNode(opts)
		if err != nil {
			return c, err
		}
		if c.ports.APIServer, err = pickPort("kube-apiserver", n.HostIP, opts.APIServerPort); err != nil {
			return c, err
		}
		c.Server = fmt.Sprintf("https://%s", net.JoinHostPort(n.HostIP, strconv.Itoa(c.ports.APIServer)))
	}

	if err := c.prepare(opts); err != nil {
		return c, err
	}
	// etcd
	if err := c.start(opts, "etcd", binEtcd, c.etcdArgs()); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "etcd health", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/health", p.Etcd))
	}); err != nil {
		return c, err
	}
	// kube-apiserver
	if err := c.start(opts, "kube-apiserver", binAPIServer, append(c.apiServerArgs(), opts.APIServerFlags...)); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	}); err != nil {
		return c, err
	}
	logf("kube-apiserver ready at %s (%s)", c.Server, time.Since(begin).Round(time.Millisecond))

	// Objects that must exist before kwok and the controllers start.
	if err := c.applyFiles(ctx, filepath.Join(cacheDir, "kwok-crds")); err != nil {
		return c, fmt.Errorf("install kwok CRDs: %w", err)
	}
	if opts.Nodes > 0 {
		if err := c.applyEmbedded(ctx, "manifests/storageclass.yaml"); err != nil {
			return c, fmt.Errorf("create storage class: %w", err)
		}
		if opts.RealNode {
			// The real node's storage class is the default.
			if _, err := c.Client.StorageV1().StorageClasses().Patch(ctx, "kwok-volume", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"false"}}}`), metav1.PatchOptions{}); err != nil {
				return c, fmt.Errorf("storage class kwok-volume: %w", err)
			}
		}
	}
	if err := c.createNodes(ctx, opts); err != nil {
		return c, err
	}
	if err := c.waitCRDsEstablished(ctx, "logs.kwok.x-k8s.io", "clusterlogs.kwok.x-k8s.io"); err != nil {
		return c, err
	}

	// Their ports are picked as they start, not with the others: a port
	// free when the cluster began may be another's seconds later.
	if c.ports.ControllerManager, err = freePort(); err != nil {
		return c, err
	}
	if err := c.start(opts, "kube-controller-manager", binControllerManager, append(c.controllerManagerArgs(), opts.ControllerManagerFlags...)); err != nil {
		return c, err
	}
	if c.ports.Scheduler, err = freePort(); err != nil {
		return c, err
	}
	if err := c.start(opts, "kube-scheduler", binScheduler, append(c.schedulerArgs(), opts.SchedulerFlags...)); err != nil {
		return c, err
	}
	p = c.ports
	if err := c.start(opts, "kwok", binKwok, append(c.kwokArgs(), opts.KwokFlags...)); err != nil {
		return c, err
	}

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: c.adminTLS(true)}, Timeout: 2 * time.Second}
	checks := []struct {
		what string
		fn   func(context.Context) (bool, error)
	}{
		{"kube-controller-manager /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", p.ControllerManager))
		}},
		{"kube-scheduler /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", p.Scheduler))
		}},
		{"kwok /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", p.Kubelet))
		}},
		{"nodes Ready", c.nodesReady},
		{"default service account", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		}},
		{"kube-root-ca.crt in default", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil, nil
		}},
	}
	for _, chk := range checks {
		if err := c.waitFor(ctx, chk.what, chk.fn); err != nil {
			return c, err
		}
	}
	if opts.RealNode {
		if err := c.startRealNode(ctx, opts); err != nil {
			return c, err
		}
	}
	if opts.Knative {
		t0 := time.Now()
		if err := c.InstallKnative(ctx, opts.KnativeCacheDir); err != nil {
			return c, err
		}
		logf("Knative Eventing and Serving %s Available (%s)", KnativeVersion, time.Since(t0).Round(time.Millisecond))
	}
	if opts.NATS {
		t0 := time.Now()
		if err := c.InstallNats(ctx, opts.NatsCacheDir); err != nil {
			return c, err
		}
		logf("NATS %s with JetStream and eventing-natss %s Available (%s)", NatsServerVersion, NatssVersion, time.Since(t0).Round(time.Millisecond))
	}
	logf("cluster ready in %s (state in %s)", time.Since(begin).Round(time.Millisecond), dir)
	return c, nil
}

// EtcdURL is the address of the etcd client port, plain HTTP on
// 127.0.0.1, as the API server reaches it; "" for a cluster Attach made.
func (c *Cluster) EtcdURL() string {
	if c.ports.Etcd == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", c.ports.Etcd)
}

// Processes returns the started components.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]*Process(nil), c.processes...)
	for _, a := range c.adapters {
		out = append(out, a.Process)
	}
	return out
}

// Stop stops every process the cluster started (adapters included) and
// removes its state directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	for _, cancel := range c.watchers {
		cancel()
	}
	var ps []*Process
	for _, a := range c.adapters {
		ps = append(ps, a.Process)
	}
	var etcd []*Process
	if c.attached {
		c.mu.Unlock()
		return stopAll(ps, 10*time.Second)
	}
	for _, p := range c.processes {
		if p.Name == "etcd" {
			etcd = append(etcd, p)
		} else {
			ps = append(ps, p)
		}
	}
	node := c.node
	c.mu.Unlock()

	err := stopAll(ps, 10*time.Second)
	if e := stopRealNode(node); e != nil {
		err = errors.Join(err, fmt.Errorf("real node: %w", e))
	}
	if e := stopAll(etcd, 10*time.Second); e != nil {
		err = errors.Join(err, e)
	}
	if err == nil && c.Dir != "" {
		if e := os.RemoveAll(c.Dir); e != nil {
			err = e
		}
	}
	return err
}

// prepare writes certificates, kubeconfig and kwok configuration.
func (c *Cluster) prepare(opts Options) error {
	for _, d := range []string{"logs", "etcd", "kwok", "kubeconfigs", "podlogs", "home"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	var apiIPs []net.IP
	if h := c.apiHost(); h != "127.0.0.1" {
		apiIPs = append(apiIPs, net.ParseIP(h))
	}
	if _, err := writePKI(filepath.Join(c.Dir, "pki"), apiIPs...); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := c.writeAdminKubeconfig(c.Kubeconfig); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	stages, err := fs.Glob(embedded, "stages/*.yaml")
	if err != nil {
		return err
	}
	for _, s := range stages {
		b, err := embedded.ReadFile(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.Dir, "kwok", filepath.Base(s)), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// connect builds the admin clients from the admin kubeconfig.
func (c *Cluster) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = 200
	cfg.Burst = 400
	c.Config = cfg
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(cfg)
	return err
}

func (c *Cluster) pki() pki { return pki{dir: filepath.Join(c.Dir, "pki")} }

// writeAdminKubeconfig writes a self-contained admin kubeconfig.
func (c *Cluster) writeAdminKubeconfig(path string) error {
	k := c.pki()
	return c.writeKubeconfigFor(path, "admin", k.path("admin.crt"), k.path("admin.key"))
}

// writeKubeconfigFor writes a self-contained kubeconfig presenting the
// client certificate crtPath/keyPath as user.
func (c *Cluster) writeKubeconfigFor(path, user, crtPath, keyPath string) error {
	ca, err := os.ReadFile(c.pki().path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(crtPath)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tesk-local"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["tesk-local"] = &clientcmdapi.Context{Cluster: "tesk-local", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "tesk-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// adminTLS returns a TLS config presenting the admin client certificate.
func (c *Cluster) adminTLS(insecure bool) *tls.Config {
	k := c.pki()
	cert, err := tls.LoadX509KeyPair(k.path("admin.crt"), k.path("admin.key"))
	cfg := &tls.Config{InsecureSkipVerify: insecure} //nolint:gosec // loopback health checks of self-signed serving certs
	if err == nil {
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

func (c *Cluster) start(opts Options, name, bin string, args []string) error {
	return c.startIn(opts, name, filepath.Join(c.CacheDir, "bin"), os.Getenv("PATH"), bin, args)
}

// startIn starts binDir/bin as the component name with PATH path, its log
// in logs/<name>.log.
func (c *Cluster) startIn(opts Options, name, binDir, path, bin string, args []string) error {
	env := []string{
		"PATH=" + path,
		"HOME=" + filepath.Join(c.Dir, "home"),
		"TMPDIR=" + os.TempDir(),
	}
	p, err := startProcess(name, filepath.Join(binDir, bin), args, env,
		filepath.Join(c.Dir, "logs", name+".log"), opts.Detach)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.processes = append(c.processes, p)
	c.mu.Unlock()
	return nil
}

// waitFor polls check until it reports true, the context ends, or a started
// process dies.
func (c *Cluster) waitFor(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		c.mu.Lock()
		ps := append([]*Process(nil), c.processes...)
		c.mu.Unlock()
		for _, p := range ps {
			if !p.Alive() {
				return fmt.Errorf("waiting for %s: %s exited; last lines of %s:\n%s", what, p.Name, p.Log, p.logTail(25))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := check(cctx)
		cancel()
		if err != nil {
			lastErr = err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("timed out waiting for %s", what)
			if lastErr != nil {
				msg += ": " + lastErr.Error()
			}
			return fmt.Errorf("%s (component logs in %s)", msg, filepath.Join(c.Dir, "logs"))
		case <-tick.C:
		}
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, nil
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// pickPort picks a free port on host, or checks that the fixed one is free.
func pickPort(name, host string, fixed int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(fixed)))
	if err != nil {
		if fixed != 0 {
			return 0, fmt.Errorf("%s port %s:%d is already in use (or not available): %w", name, host, fixed, err)
		}
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// choosePorts picks free loopback ports, or checks the fixed ones are free.
func choosePorts(opts Options) (ports, error) {
	var p ports
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	pick := func(name string, fixed int) (int, error) {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(fixed)))
		if err != nil {
			if fixed != 0 {
				return 0, fmt.Errorf("%s port 127.0.0.1:%d is already in use (or not available): %w", name, fixed, err)
			}
			return 0, err
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var err error
	if p.Etcd, err = pick("etcd", opts.EtcdPort); err != nil {
		return p, err
	}
	if p.EtcdPeer, err = pick("etcd peer", 0); err != nil {
		return p, err
	}
	if p.APIServer, err = pick("kube-apiserver", opts.APIServerPort); err != nil {
		return p, err
	}
	if p.Kubelet, err = pick("kwok kubelet server", opts.KubeletPort); err != nil {
		return p, err
	}
	return p, nil
}

func (c *Cluster) etcdArgs() []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", c.ports.Etcd)
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.ports.EtcdPeer)
	return []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--listen-metrics-urls=",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
		"--quota-backend-bytes=4294967296",
	}
}

func (c *Cluster) apiServerArgs() []string {
	k := c.pki()
	// Without Services nothing reaches the API server through the
	// kubernetes Service, whose endpoints are then left alone.
	reconciler := "none"
	if c.services {
		reconciler = "lease"
	}
	return []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.ports.Etcd),
		"--bind-address=" + c.apiHost(),
		"--advertise-address=" + c.apiHost(),
		fmt.Sprintf("--secure-port=%d", c.ports.APIServer),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "apiserver-generated"),
		"--tls-cert-file=" + k.path("apiserver.crt"),
		"--tls-private-key-file=" + k.path("apiserver.key"),
		"--client-ca-file=" + k.path("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + k.path("sa.pub"),
		"--service-account-signing-key-file=" + k.path("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--kubelet-certificate-authority=" + k.path("ca.crt"),
		"--kubelet-client-certificate=" + k.path("admin.crt"),
		"--kubelet-client-key=" + k.path("admin.key"),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true",
		// No node lifecycle controller runs to lift the not-ready taint that
		// this plugin puts on new nodes; kwok's nodes are ready at once.
		"--disable-admission-plugins=TaintNodesByCondition",
		// A namespace's node selector and tolerations (PlayPods); without
		// its annotations neither changes a pod.
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		"--profiling=false",
		// A container's stdout and stderr served apart, as the executors'
		// TES logs read them where the cluster allows it.
		"--feature-gates=PodLogsQuerySplitStreams=true",
		"--endpoint-reconciler-type=" + reconciler,
		"--max-requests-inflight=800",
		"--max-mutating-requests-inflight=400",
		"--v=1",
	}
}

// Controllers is the set of kube-controller-manager controllers the cluster
// runs.
var Controllers = []string{
	"job-controller",
	"garbage-collector-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"ttl-after-finished-controller",
	"clusterrole-aggregation-controller",
	"pod-garbage-collector-controller",
	"resourcequota-controller",
}

func (c *Cluster) controllerManagerArgs() []string {
	k := c.pki()
	controllers := Controllers
	if c.services {
		controllers = append(append([]string(nil), Controllers...), ServiceControllers...)
	}
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports.ControllerManager),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "controller-manager-generated"),
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + k.path("sa.key"),
		"--root-ca-file=" + k.path("ca.crt"),
		"--use-service-account-credentials=false",
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--concurrent-job-syncs=10",
		"--concurrent-gc-syncs=20",
		"--profiling=false",
		"--v=1",
	}
}

func (c *Cluster) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.ports.Scheduler),
		"--cert-dir=" + filepath.Join(c.Dir, "pki", "scheduler-generated"),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

func (c *Cluster) kwokArgs() []string {
	k := c.pki()
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		// Only the fake nodes: the real node has a kubelet.
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", c.ports.Kubelet),
		fmt.Sprintf("--server-address=127.0.0.1:%d", c.ports.Kubelet),
		"--tls-cert-file=" + k.path("kubelet.crt"),
		"--tls-private-key-file=" + k.path("kubelet.key"),
		"--cidr=" + podCIDR,
		"--enable-crds=Logs,ClusterLogs",
	}
	files, _ := filepath.Glob(filepath.Join(c.Dir, "kwok", "*.yaml"))
	for _, f := range files {
		args = append(args, "--config="+f)
	}
	return args
}

// createNodes registers the fake nodes; kwok makes them Ready.
func (c *Cluster) createNodes(ctx context.Context, opts Options) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(opts.NodeCPU),
		corev1.ResourceMemory:           resource.MustParse(opts.NodeMemory),
		corev1.ResourcePods:             resource.MustParse(opts.NodePods),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	for i := 0; i < opts.Nodes; i++ {
		node := fakeNode(fmt.Sprintf("kwok-node-%d", i), capacity, c.ports.Kubelet, opts.RealNode)
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
		c.Nodes = append(c.Nodes, node.Name)
	}
	return nil
}

// FakeNodeTaint is the taint of the fake nodes beside a real node: only
// the pods of a namespace PlayPods names (and those that tolerate it)
// go to them, so that the real node keeps what must really run.
var FakeNodeTaint = corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// fakeNode is the fake node name that kwok plays, with capacity, its
// kubelet server at kubeletPort; beside a real node it has FakeNodeTaint.
func fakeNode(name string, capacity corev1.ResourceList, kubeletPort int, besideReal bool) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(kubeletPort)}},
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
				KubeletVersion:  KubernetesVersion,
			},
		},
	}
	if besideReal {
		node.Spec.Taints = []corev1.Taint{FakeNodeTaint}
	}
	return node
}

// PlayPods sends the pods of namespace to the fake nodes, kwok playing
// them, where a real node runs the rest (Options.RealNode with Nodes):
// the API server's PodNodeSelector and PodTolerationRestriction admission
// give each pod created there the fake nodes' label as its node selector
// and a toleration of FakeNodeTaint. make bench-knative PODS=kwok measures
// the control path this way: Knative, the handler and the TES API on the
// real node, the tasks' pods on kwok's.
func (c *Cluster) PlayPods(ctx context.Context, namespace string) error {
	fake, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return fmt.Errorf("play pods: %w", err)
	}
	if len(fake.Items) == 0 {
		return errors.New("play pods: the cluster has no fake nodes (cluster up -nodes N)")
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": playedPodsAnnotations()}})
	if err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Namespaces().Patch(ctx, namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("play pods of %s: %w", namespace, err)
	}
	return nil
}

// playedPodsAnnotations are the namespace's annotations that PlayPods
// sets: the node selector of the fake nodes and the toleration of their
// taint, as the two admission plugins read them.
func playedPodsAnnotations() map[string]string {
	tol, _ := json.Marshal([]corev1.Toleration{{Key: FakeNodeTaint.Key, Operator: corev1.TolerationOpEqual, Value: FakeNodeTaint.Value, Effect: FakeNodeTaint.Effect}})
	return map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      "type=kwok",
		"scheduler.alpha.kubernetes.io/defaultTolerations": string(tol),
	}
}

func (c *Cluster) nodesReady(ctx context.Context) (bool, error) {
	for _, name := range c.Nodes {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready || n.Spec.Unschedulable {
			return false, nil
		}
	}
	return true, nil
}
