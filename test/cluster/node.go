package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNodeName is the name of the real node (a kubelet with containerd and
// runc on this machine).
const RealNodeName = "real-node-0"

// RealNodeLabel is set to "true" on the real node, so that a pod can ask
// for it with a node selector.
const RealNodeLabel = "tesk.ga4gh.org/real-node"

// RealStorageClass provisions directories on this machine as hostPath
// volumes for pods on the real node (the cluster's default storage class
// when the real node runs).
const RealStorageClass = "tesk-local-path"

const realProvisioner = "tesk.ga4gh.org/local-path"

// Debian's runc and CNI plugins (node-deps.sh).
var (
	runcPath   = "/usr/sbin/runc"
	cniBinDir  = "/usr/lib/cni"
	cniPlugins = []string{"bridge", "host-local", "loopback"}
)

// Node binaries, as built by build-node.sh into <node cache>/bin.
const (
	binKubelet     = "kubelet"
	binContainerd  = "containerd"
	binShim        = "containerd-shim-runc-v2"
	binCtr         = "ctr"
	binRegistry    = "registry"
	binProvisioner = "provisioner"
)

var nodeBinaries = []string{binKubelet, binContainerd, binShim, binCtr, binRegistry, binProvisioner}

// RealNode describes the real node of a running cluster: what a test needs
// to reach it and what Stop needs to take it down again.
type RealNode struct {
	// Name is the node's name (RealNodeName).
	Name string `json:"name"`
	// HostIP is this machine's address on the pods' bridge: servers that
	// pods must reach listen here. It is also the node's InternalIP.
	HostIP string `json:"hostIP"`
	// Subnet is the pods' address range (CIDR) on the bridge.
	Subnet string `json:"subnet"`
	// Bridge is the Linux bridge the pods are attached to.
	Bridge string `json:"bridge"`
	// CgroupRoot is the cgroup (in every hierarchy) under which the kubelet
	// puts the pods.
	CgroupRoot string `json:"cgroupRoot"`
	// Registry is host:port of the node's image registry, the mirror of every
	// registry an image names.
	Registry string `json:"registry"`
	// ContainerdSocket is containerd's gRPC socket.
	ContainerdSocket string `json:"containerdSocket"`
	// Images are the references of the images the node holds at start.
	Images []string `json:"images"`
	// BinDir holds the node's binaries (kubelet, containerd, ctr, ...).
	BinDir string `json:"binDir"`
	// Dir is the node's state directory (inside the cluster's).
	Dir string `json:"dir"`
	// Services is what the Services option set up for the node (nil
	// without it).
	Services *NodeServices `json:"services,omitempty"`
}

// NodeImage is an image the real node holds from its start: an OCI (or
// docker save) tarball and the reference it goes by.
type NodeImage struct {
	Ref string
	Tar string
}

// NodeCacheDirEnv names the environment variable that, when set, overrides
// the directory holding the node's binaries (bin/), as written by
// build-node.sh.
const NodeCacheDirEnv = "TESK_NODE_CACHE"

var nodeKeyFiles = []string{
	"tools-node/go.mod",
	"tools-node/go.sum",
	"tools-containerd/go.mod",
	"tools-containerd/go.sum",
	"tools-containerd/cmd/registry/main.go",
	"tools-containerd/cmd/provisioner/main.go",
	"k8s-version-ldflags.sh",
}

// NodeCacheDir returns where build-node.sh puts the node's binaries:
// $TESK_NODE_CACHE if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/node/<key>.
func NodeCacheDir() (string, error) {
	if d := os.Getenv(NodeCacheDirEnv); d != "" {
		return d, nil
	}
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	key, err := hashFiles(src, nodeKeyFiles, "")
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tesk-knative", "node", key), nil
}

// CheckRealNodeHost reports everything this machine lacks for a real node,
// each named: root, the kernel's overlay filesystem and cgroup controllers,
// runc, the CNI plugins, ip, and the node's binaries.
func CheckRealNodeHost(binDir string) error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "the real node needs root (kubelet, containerd and runc create mounts, cgroups and network namespaces)")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		problems = append(problems, "the kernel has no overlay filesystem (/proc/filesystems; modprobe overlay)")
	}
	hier, err := cgroupHierarchies()
	if err != nil {
		problems = append(problems, "reading the cgroup mounts: "+err.Error())
	}
	for _, ctl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		if _, ok := hier.v1[ctl]; !ok && hier.v2 == "" {
			problems = append(problems, fmt.Sprintf("no cgroup hierarchy with the %s controller is mounted", ctl))
		}
	}
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		problems = append(problems, "/dev/kmsg is missing (the kubelet's OOM watcher reads it)")
	}
	if _, err := exec.LookPath(runcPath); err != nil {
		problems = append(problems, fmt.Sprintf("runc is missing at %s (apt-get install runc; make node-deps)", runcPath))
	}
	for _, p := range cniPlugins {
		if _, err := exec.LookPath(filepath.Join(cniBinDir, p)); err != nil {
			problems = append(problems, fmt.Sprintf("the CNI plugin %s is missing in %s (apt-get install containernetworking-plugins; make node-deps)", p, cniBinDir))
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		problems = append(problems, "ip (iproute2) is missing")
	}
	for _, b := range nodeBinaries {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			problems = append(problems, fmt.Sprintf("%s is missing in %s: run `make cluster-bins` (test/cluster/build-node.sh)", b, binDir))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("this machine cannot run the real node:\n  - %s", strings.Join(problems, "\n  - "))
	}
	return nil
}

// hierarchies are the mounted cgroup hierarchies: v1 by controller, and the
// cgroup v2 mount ("" if none).
type hierarchies struct {
	v1 map[string]string
	v2 string
}

func cgroupHierarchies() (hierarchies, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return hierarchies{}, err
	}
	return parseCgroupMounts(string(b)), nil
}

// parseCgroupMounts reads the cgroup hierarchies from mountinfo.
func parseCgroupMounts(mountinfo string) hierarchies {
	h := hierarchies{v1: map[string]string{}}
	for _, line := range strings.Split(mountinfo, "\n") {
		// ... mountpoint ... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if h.v2 == "" {
				h.v2 = f[4]
			}
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				switch opt {
				case "cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma", "misc":
					h.v1[opt] = f[4]
				case "name=systemd":
					h.v1["systemd"] = f[4]
				}
			}
		}
	}
	return h
}

// dirs lists the distinct hierarchy mount points.
func (h hierarchies) dirs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, d := range h.v1 {
		add(d)
	}
	add(h.v2)
	sort.Strings(out)
	return out
}

// prepareRealNode checks the machine and makes the real node's directories,
// bridge and cgroups (with Services, before the control plane starts, as the
// API server listens on the bridge).
func (c *Cluster) prepareRealNode(opts Options) (*RealNode, error) {
	binDir := opts.NodeBinDir
	if binDir == "" {
		cache, err := NodeCacheDir()
		if err != nil {
			return nil, err
		}
		binDir = filepath.Join(cache, "bin")
	}
	hostErr := CheckRealNodeHost(binDir)
	var services *NodeServices
	if opts.Services {
		sbin, err := servicesBinDir(opts)
		if err != nil {
			return nil, err
		}
		hostErr = errors.Join(hostErr, CheckServicesHost(sbin))
		services = &NodeServices{BinDir: sbin}
	}
	if hostErr != nil {
		return nil, hostErr
	}
	n := &RealNode{Name: RealNodeName, BinDir: binDir, Dir: filepath.Join(c.Dir, "node"), Services: services}
	c.mu.Lock()
	c.node = n
	c.mu.Unlock()
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/certs.d/_default", "cni/net.d", "cni/ipam", "kubelet", "podlogs", "registry", "volumes", "opt"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return n, err
		}
	}
	if err := n.createBridge(); err != nil {
		return n, err
	}
	if err := n.createCgroupRoot(); err != nil {
		return n, err
	}
	return n, nil
}

// startRealNode starts the real node: a bridge with its own subnet, the
// image registry, containerd (runc, CNI), the images, the volume
// provisioner, with Services the host's services, and the kubelet; it
// returns once the node (and its services) are Ready.
func (c *Cluster) startRealNode(ctx context.Context, opts Options) (err error) {
	begin := time.Now()
	n := c.RealNode()
	if n == nil {
		if n, err = c.prepareRealNode(opts); err != nil {
			return err
		}
	}
	if err := c.issueNodeCerts(n); err != nil {
		return fmt.Errorf("real node certificates: %w", err)
	}
	regPort, err := freePort()
	if err != nil {
		return err
	}
	n.Registry = fmt.Sprintf("127.0.0.1:%d", regPort)
	if err := c.startNodeProcess(opts, n, "registry", binRegistry, []string{"-addr", n.Registry, "-blobs", filepath.Join(n.Dir, "registry")}); err != nil {
		return err
	}
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd", "containerd.sock")
	if err := n.writeContainerdConfig(opts.SandboxImage); err != nil {
		return err
	}
	if err := c.startNodeProcess(opts, n, "containerd", binContainerd, []string{"--config", filepath.Join(n.Dir, "containerd", "config.toml")}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the node's registry", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, "http://"+n.Registry+"/v2/")
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", func(ctx context.Context) (bool, error) {
		out, err := n.ctr(ctx, "version")
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		return true, nil
	}); err != nil {
		return err
	}
	c.logf("real node: registry %s, containerd %s (%s)", n.Registry, n.ContainerdSocket, time.Since(begin).Round(time.Millisecond))

	t0 := time.Now()
	images := opts.NodeImages
	if opts.BuildNodeImages != nil {
		built, err := opts.BuildNodeImages(ctx, filepath.Join(n.Dir, "images"))
		if err != nil {
			return fmt.Errorf("real node images: %w", err)
		}
		images = append(images, built...)
	}
	if err := n.load(ctx, images); err != nil {
		return err
	}
	c.logf("real node: %d images in the registry and in containerd (%s)", len(images), time.Since(t0).Round(time.Millisecond))

	if err := c.applyRealStorageClass(ctx, opts.Nodes == 0); err != nil {
		return err
	}
	if err := c.startNodeProcess(opts, n, "provisioner", binProvisioner, []string{
		"-kubeconfig", c.Kubeconfig, "-name", realProvisioner, "-base", filepath.Join(n.Dir, "volumes"), "-node", n.Name, "-v=1",
	}); err != nil {
		return err
	}
	if n.Services != nil {
		t0 := time.Now()
		if err := c.startServices(ctx, opts, n); err != nil {
			return err
		}
		c.logf("real node: Service range routed to %s, cluster DNS at %s, kube-proxy and kube-network-policies started (%s)",
			n.Bridge, n.Services.DNS, time.Since(t0).Round(time.Millisecond))
	}
	kubeletPort, err := freePortOn(n.HostIP)
	if err != nil {
		return err
	}
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	if err := c.writeKubeletConfig(n, kubeletPort, healthPort, opts.KubeletFeatureGates); err != nil {
		return err
	}
	if err := c.startNodeProcess(opts, n, "kubelet", binKubelet, []string{
		"--config=" + filepath.Join(n.Dir, "kubelet", "config.yaml"),
		"--kubeconfig=" + filepath.Join(n.Dir, "kubelet", "kubeconfig"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.HostIP,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet", "root"),
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet", "pki"),
		"--node-labels=" + RealNodeLabel + "=true,type=real",
		"--v=1",
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "node "+n.Name+" Ready", func(ctx context.Context) (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("the kubelet has not registered the node: %w", err)
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("node %s not Ready: %s: %s", n.Name, cond.Reason, cond.Message)
			}
		}
		return false, fmt.Errorf("node %s reports no Ready condition yet", n.Name)
	}); err != nil {
		return fmt.Errorf("%w; last lines of the kubelet's log:\n%s", err, c.processLogTail("kubelet", 15))
	}
	c.Nodes = append(c.Nodes, n.Name)
	if n.Services != nil {
		if err := c.waitServicesReady(ctx, n); err != nil {
			return err
		}
	}
	c.logf("real node %s Ready at %s, pods on %s (%s)", n.Name, n.HostIP, n.Subnet, time.Since(begin).Round(time.Millisecond))
	return nil
}

// RealNode returns the real node, or nil when the cluster has none.
func (c *Cluster) RealNode() *RealNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

func (c *Cluster) processLogTail(name string, lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.processes {
		if p.Name == name {
			return p.logTail(lines)
		}
	}
	return ""
}

func (c *Cluster) startNodeProcess(opts Options, n *RealNode, name, bin string, args []string) error {
	// containerd finds its shim on PATH; runc and the CNI plugins have
	// absolute paths in its configuration.
	return c.startIn(opts, name, n.BinDir, n.BinDir+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", bin, args)
}

// bridgeSubnets are the /24s the real node may use, 10.88.<i>.0/24: the first
// one that no interface of this machine uses is taken.
const bridgeSubnets = 64

// createBridge creates the pods' bridge on the first free subnet and gives
// this machine its first address.
func (n *RealNode) createBridge() error {
	used := map[string]bool{}
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, ifc := range ifaces {
		names[ifc.Name] = true
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				ip := ipn.IP.To4()
				if ip[0] == 10 && ip[1] == 88 {
					used[strconv.Itoa(int(ip[2]))] = true
				}
			}
		}
	}
	var lastErr error
	for i := 0; i < bridgeSubnets; i++ {
		name := fmt.Sprintf("tesk%d", i)
		if used[strconv.Itoa(i)] || names[name] {
			continue
		}
		if out, err := exec.Command("ip", "link", "add", name, "type", "bridge").CombinedOutput(); err != nil {
			lastErr = fmt.Errorf("ip link add %s type bridge: %v: %s", name, err, strings.TrimSpace(string(out)))
			if strings.Contains(string(out), "File exists") {
				continue
			}
			return fmt.Errorf("cannot create the pods' bridge (the kernel's bridge support?): %w", lastErr)
		}
		n.Bridge = name
		n.HostIP = fmt.Sprintf("10.88.%d.1", i)
		n.Subnet = fmt.Sprintf("10.88.%d.0/24", i)
		for _, args := range [][]string{
			{"addr", "add", n.HostIP + "/24", "dev", name},
			{"link", "set", name, "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
		}
		return nil
	}
	if lastErr == nil {
		lastErr = errors.New("every one is in use")
	}
	return fmt.Errorf("no free subnet for the pods' bridge among 10.88.0.0/24 to 10.88.%d.0/24: %w", bridgeSubnets-1, lastErr)
}

// createCgroupRoot creates the node's cgroup in every hierarchy (cpuset
// with its parent's CPUs and memory nodes, which a new cpuset lacks).
func (n *RealNode) createCgroupRoot() error {
	n.CgroupRoot = "/tesk-" + n.Bridge
	h, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, d := range h.dirs() {
		p := filepath.Join(d, n.CgroupRoot)
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("cgroup %s already exists: left over from a node that was not stopped? (remove it with rmdir once no process is in it)", p)
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", p, err)
		}
		if d == h.v1["cpuset"] {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(d, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(p, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", filepath.Join(p, f), err)
				}
			}
		}
	}
	return nil
}

// issueNodeCerts writes the kubelet's client certificate (system:node:<name>
// in system:nodes, for the Node authorizer) and serving certificate (its
// InternalIP), and its kubeconfig.
func (c *Cluster) issueNodeCerts(n *RealNode) error {
	k := c.pki()
	if err := k.issue("node-client", 10, pkix.Name{CommonName: "system:node:" + n.Name, Organization: []string{"system:nodes"}},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil); err != nil {
		return err
	}
	if err := k.issue("node-serving", 11, pkix.Name{CommonName: "system:node:" + n.Name},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP(n.HostIP), net.ParseIP("127.0.0.1")}, []string{n.Name, "localhost"}); err != nil {
		return err
	}
	return c.writeKubeconfigFor(filepath.Join(n.Dir, "kubelet", "kubeconfig"), "node", k.path("node-client.crt"), k.path("node-client.key"))
}

// capSysResource is CAP_SYS_RESOURCE, without which no process may lower
// its OOM score adjustment (as the kubelet asks for the pod sandbox and
// Guaranteed containers).
const capSysResource = 24

// hasCapability reports whether this process has the capability in its
// effective set.
func hasCapability(bit uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

// writeContainerdConfig writes containerd's configuration (CRI with runc
// and the CNI bridge, every registry mirrored by the node's own), the
// mirror's hosts.toml and the CNI network. Without CAP_SYS_RESOURCE (as in
// many sandboxes) containerd keeps OOM score adjustments at its own, since
// runc could not lower them.
func (n *RealNode) writeContainerdConfig(sandbox string) error {
	if sandbox == "" {
		sandbox = DefaultSandboxImage
	}
	d := filepath.Join(n.Dir, "containerd")
	q := strconv.Quote
	cfg := fmt.Sprintf(`version = 3
root = %s
state = %s

[grpc]
  address = %s

[ttrpc]
  address = %s

[debug]
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %s

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %s

    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %s

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    netns_mounts_under_state_dir = true
    restrict_oom_score_adj = %t

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %s
          Root = %s
          SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%s]
      conf_dir = %s
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`,
		q(filepath.Join(d, "root")), q(filepath.Join(d, "state")),
		q(n.ContainerdSocket), q(n.ContainerdSocket+".ttrpc"),
		q(filepath.Join(n.Dir, "opt")),
		q(sandbox), q(filepath.Join(d, "certs.d")),
		!hasCapability(capSysResource),
		q(runcPath), q(filepath.Join(d, "state", "runc")),
		q(cniBinDir), q(filepath.Join(n.Dir, "cni", "net.d")))
	if err := os.WriteFile(filepath.Join(d, "config.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	// Every registry is mirrored by the node's own: a pull is a real pull, and
	// nothing leaves this machine.
	hosts := fmt.Sprintf("[host.%s]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n", q("http://"+n.Registry))
	if err := os.WriteFile(filepath.Join(d, "certs.d", "_default", "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return err
	}
	cni := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "tesk",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      n.Bridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": n.Subnet, "gateway": n.HostIP}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(n.Dir, "cni", "ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "cni", "net.d", "10-tesk.conflist"), b, 0o644)
}

// DefaultSandboxImage is the pod sandbox image of the real node (containerd's
// default for its version).
const DefaultSandboxImage = "registry.k8s.io/pause:3.10.2"

func (c *Cluster) writeKubeletConfig(n *RealNode, port, healthPort int, gates map[string]bool) error {
	k := c.pki()
	dns := "resolvConf: /etc/resolv.conf\n"
	if n.Services != nil {
		// The cluster's DNS only: the pods' resolv.conf gets no name server
		// or search domain of this machine's.
		resolv := filepath.Join(n.Dir, "kubelet", "resolv.conf")
		if err := os.WriteFile(resolv, []byte("# the real node's pods use the cluster's DNS only\n"), 0o644); err != nil {
			return err
		}
		host, _, err := net.SplitHostPort(n.Services.DNS)
		if err != nil {
			return fmt.Errorf("cluster DNS address %q: %w", n.Services.DNS, err)
		}
		dns = fmt.Sprintf("resolvConf: %s\nclusterDNS: [%s]\nclusterDomain: %s\n", resolv, host, ClusterDomain)
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
podLogsDir: %s
%sserializeImagePulls: false
registerNode: true
maxPods: 110
# A container's stdout and stderr served apart (the executors' TES logs).
featureGates:
%simageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
evictionPressureTransitionPeriod: 10s
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
runtimeRequestTimeout: 2m
shutdownGracePeriod: 0s
localStorageCapacityIsolation: true
logging:
  format: text
`, n.HostIP, port, healthPort, k.path("node-serving.crt"), k.path("node-serving.key"), k.path("ca.crt"),
		n.ContainerdSocket, n.CgroupRoot, filepath.Join(n.Dir, "podlogs"), dns, kubeletGates(gates))
	return os.WriteFile(filepath.Join(n.Dir, "kubelet", "config.yaml"), []byte(cfg), 0o644)
}

// kubeletGates writes the node's feature gates (PodLogsQuerySplitStreams)
// and those of Options.KubeletFeatureGates, which win, as lines of the
// configuration's featureGates, sorted by name.
func kubeletGates(extra map[string]bool) string {
	gates := map[string]bool{"PodLogsQuerySplitStreams": true}
	maps.Copy(gates, extra)
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		fmt.Fprintf(&b, "  %s: %t\n", name, gates[name])
	}
	return b.String()
}

// ParseFeatureGates reads gates written as the kubelet's --feature-gates
// flag takes them: Name=true,Other=false.
func ParseFeatureGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, value, ok := strings.Cut(kv, "=")
		on, err := strconv.ParseBool(value)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("feature gate %q: want Name=true or Name=false", kv)
		}
		gates[name] = on
	}
	return gates, nil
}

// ctr runs containerd's ctr against the node's containerd, in the
// Kubernetes namespace.
func (n *RealNode) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.BinDir, binCtr), append([]string{"--address", n.ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

// LoadImages puts images into the real node's registry and containerd of a
// running cluster (one started by Start or attached to), as Start does with
// Options.NodeImages: for images a test builds once the cluster is up.
func (c *Cluster) LoadImages(ctx context.Context, images ...NodeImage) error {
	if c.node == nil {
		return errors.New("load images: the cluster has no real node")
	}
	return c.node.load(ctx, images)
}

func (n *RealNode) load(ctx context.Context, images []NodeImage) error {
	imported := map[string]bool{}
	for _, img := range images {
		if err := pushToRegistry(ctx, img, n.Registry); err != nil {
			return fmt.Errorf("image %s into the node's registry: %w", img.Ref, err)
		}
		// A tarball carries all its names: one import names them all.
		if !imported[img.Tar] {
			if err := n.importImage(ctx, img.Tar); err != nil {
				return err
			}
			imported[img.Tar] = true
		}
		n.Images = append(n.Images, img.Ref)
	}
	return nil
}

// importImage imports a tarball's images into containerd, under the names
// the tarball gives them.
func (n *RealNode) importImage(ctx context.Context, tar string) error {
	if out, err := n.ctr(ctx, "images", "import", "--local", tar); err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", tar, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) applyRealStorageClass(ctx context.Context, isDefault bool) error {
	reclaim := corev1.PersistentVolumeReclaimDelete
	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: RealStorageClass},
		Provisioner:       realProvisioner,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &immediate,
	}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class %s: %w", RealStorageClass, err)
	}
	return nil
}
