package cluster

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Services option (Options.Services, with RealNode) gives the real node
// what in-cluster Services need, all of it on this machine:
//
//   - kube-controller-manager also runs ServiceControllers (Deployments,
//     ReplicaSets, Endpoints, EndpointSlices, ...);
//   - the API server listens on this machine's address on the pods' bridge
//     (RealNode.HostIP; the cluster's Server URL then names it), advertises
//     it, and so the kubernetes Service's endpoints point there;
//   - kube-proxy (iptables mode) on the host turns Service IPs into
//     endpoints; the Service range (ServiceCIDR) is routed to the bridge only,
//     and the pods' traffic that would leave the bridge for another interface
//     is rejected;
//   - CoreDNS (the kubernetes plugin, no forwarding) answers the cluster's
//     names at HostIP:53, the kubelet's clusterDNS;
//   - kube-network-policies enforces NetworkPolicies on the node's pods
//     (nftables and nfqueue), their connections to this host included.
//
// It takes host-wide state (iptables chains, a route, an nftables table), so
// one cluster with Services runs on a machine at a time; Stop and `cluster
// down` remove all of it.

// ServiceCIDR is the range of Service cluster IPs; the kubernetes Service
// has its first address.
const ServiceCIDR = serviceCIDR

// ClusterDomain is the cluster's DNS domain
// (<service>.<namespace>.svc.cluster.local).
const ClusterDomain = "cluster.local"

// ServiceControllers are the kube-controller-manager controllers that the
// Services option adds to Controllers: what Deployments, StatefulSets,
// DaemonSets and Services need.
var ServiceControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
}

// ServicesCacheDirEnv names the environment variable that, when set,
// overrides the directory holding the Services option's binaries (bin/), as
// written by build-services.sh.
const ServicesCacheDirEnv = "TESK_SERVICES_CACHE"

// The Services option's binaries, as built by build-services.sh.
const (
	binKubeProxy = "kube-proxy"
	binCoreDNS   = "coredns"
	binNetpol    = "kube-network-policies"
)

var servicesBinaries = []string{binKubeProxy, binCoreDNS, binNetpol}

// servicesKeyFiles make up the cache key of build-services.sh.
var servicesKeyFiles = []string{
	"tools-proxy/go.mod",
	"tools-proxy/go.sum",
	"tools-services/go.mod",
	"tools-services/go.sum",
	"tools-services/cmd/coredns/main.go",
	"tools-services/cmd/kube-network-policies/main.go",
	"tools-services/kube-network-policies.patch",
}

// ServicesCacheDir returns where build-services.sh puts its binaries:
// $TESK_SERVICES_CACHE if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/services/<key>.
func ServicesCacheDir() (string, error) {
	if d := os.Getenv(ServicesCacheDirEnv); d != "" {
		return d, nil
	}
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	key, err := hashFiles(src, servicesKeyFiles, "")
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tesk-knative", "services", key), nil
}

// netpolTable is kube-network-policies' nftables table (family inet), and
// netpolQueue its nfqueue.
const (
	netpolTable = "tesk-network-policies"
	netpolQueue = 100
)

// NodeServices records what the Services option set up on this machine, so
// that Stop (or `cluster down`, from the state file) removes it.
type NodeServices struct {
	// BinDir holds kube-proxy, coredns and kube-network-policies.
	BinDir string `json:"binDir"`
	// DNS is the cluster DNS server (the kubelet's clusterDNS), host:port.
	DNS string `json:"dns"`
	// Route is the Service range routed to the pods' bridge, once added.
	Route string `json:"route,omitempty"`
	// ForwardRule is the iptables rule (table filter) that rejects the pods'
	// traffic to other interfaces, once added.
	ForwardRule []string `json:"forwardRule,omitempty"`
	// KubeProxy is set once kube-proxy started: its rules are removed with
	// kube-proxy --cleanup.
	KubeProxy bool `json:"kubeProxy,omitempty"`
	// NFTable is kube-network-policies' nftables table (family inet), once it
	// started.
	NFTable string `json:"nftTable,omitempty"`
}

// hostPath is the PATH of the host's network tools (iptables, ip, modprobe)
// for the Services option's processes and commands.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookHostTool finds a command in hostPath.
func lookHostTool(name string) (string, error) {
	for _, d := range filepath.SplitList(hostPath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, hostPath)
}

// hostTool runs a host tool, returning its combined output with the error.
func hostTool(ctx context.Context, name string, args ...string) (string, error) {
	p, err := lookHostTool(name)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Env = []string{"PATH=" + hostPath}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// servicesKernelOptions are the kernel options the Services option needs,
// with what needs each.
var servicesKernelOptions = []struct{ option, what string }{
	{"CONFIG_BRIDGE_NETFILTER", "br_netfilter: kube-proxy's rules for pods on the same bridge"},
	{"CONFIG_NF_NAT", "NAT: kube-proxy"},
	{"CONFIG_NETFILTER_XT_NAT", "the iptables DNAT and SNAT targets: kube-proxy"},
	{"CONFIG_NETFILTER_XT_MATCH_COMMENT", "the iptables comment match: kube-proxy"},
	{"CONFIG_NETFILTER_XT_MATCH_STATISTIC", "the iptables statistic match: kube-proxy's load balancing"},
	{"CONFIG_NF_TABLES", "nf_tables: kube-network-policies"},
	{"CONFIG_NF_TABLES_INET", "nf_tables' inet family: kube-network-policies"},
	{"CONFIG_NFT_COMPAT", "nft_compat: kube-network-policies' NFQUEUE rules"},
	{"CONFIG_NETFILTER_XT_TARGET_NFQUEUE", "the NFQUEUE target: kube-network-policies"},
	{"CONFIG_NETFILTER_NETLINK_QUEUE", "nfnetlink_queue: kube-network-policies"},
}

// kernelConfig reads the running kernel's build options from
// /proc/config.gz or /boot/config-<release>; nil when neither is readable.
func kernelConfig() map[string]string {
	var r io.Reader
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			r = zr
		}
	}
	if r == nil {
		rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
		if err != nil {
			return nil
		}
		f, err := os.Open("/boot/config-" + strings.TrimSpace(string(rel)))
		if err != nil {
			return nil
		}
		defer f.Close()
		r = f
	}
	cfg := map[string]string{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = v
		}
	}
	return cfg
}

// CheckServicesHost reports everything this machine lacks for the Services
// option, each named: the kernel's netfilter features, iptables, the
// binaries of build-services.sh, and the host-wide state another cluster
// with Services (or a kube-proxy of some other origin) would hold.
func CheckServicesHost(binDir string) error {
	var problems []string
	if cfg := kernelConfig(); cfg != nil {
		for _, o := range servicesKernelOptions {
			if v := cfg[o.option]; v != "y" && v != "m" {
				problems = append(problems, fmt.Sprintf("the kernel lacks %s (%s)", o.option, o.what))
			}
		}
	}
	switch b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); {
	case err != nil:
		problems = append(problems, "br_netfilter is not loaded (/proc/sys/net/bridge/bridge-nf-call-iptables is missing; modprobe br_netfilter): kube-proxy and the network policies need the pods' bridged traffic to pass netfilter")
	case strings.TrimSpace(string(b)) != "1":
		problems = append(problems, "net.bridge.bridge-nf-call-iptables is 0 (sysctl -w net.bridge.bridge-nf-call-iptables=1): kube-proxy and the network policies need the pods' bridged traffic to pass netfilter")
	}
	if _, err := os.Stat("/proc/net/netfilter/nfnetlink_queue"); err != nil {
		// A module is loaded on first use; load it now to know.
		_, _ = hostTool(context.Background(), "modprobe", "nfnetlink_queue")
		if _, err := os.Stat("/proc/net/netfilter/nfnetlink_queue"); err != nil {
			problems = append(problems, "the kernel has no nfnetlink_queue (/proc/net/netfilter/nfnetlink_queue; modprobe nfnetlink_queue): kube-network-policies needs it")
		}
	}
	iptables := true
	for _, t := range []string{"iptables", "iptables-save", "iptables-restore"} {
		if _, err := lookHostTool(t); err != nil {
			problems = append(problems, fmt.Sprintf("%s is missing (apt-get install iptables; make node-deps): kube-proxy needs it", t))
			iptables = false
		}
	}
	for _, b := range servicesBinaries {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			problems = append(problems, fmt.Sprintf("%s is missing in %s: run `make cluster-bins` (test/cluster/build-services.sh)", b, binDir))
		}
	}
	if iptables {
		if _, err := hostTool(context.Background(), "iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES"); err == nil {
			problems = append(problems, "the iptables chain KUBE-SERVICES (table nat) exists: another kube-proxy runs on this machine (another cluster with Services? stop it first), or one left its rules (kube-proxy --cleanup removes them)")
		}
	}
	if out, err := hostTool(context.Background(), "ip", "-4", "route", "show", "exact", serviceCIDR); err == nil && strings.TrimSpace(out) != "" {
		problems = append(problems, fmt.Sprintf("a route for the Service range %s exists already (%s): another cluster with Services runs on this machine, or left it behind", serviceCIDR, strings.TrimSpace(out)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("this machine cannot run the cluster's services:\n  - %s", strings.Join(problems, "\n  - "))
	}
	return nil
}

// servicesBinDir is opts.ServicesBinDir or the cache's bin/.
func servicesBinDir(opts Options) (string, error) {
	if opts.ServicesBinDir != "" {
		return opts.ServicesBinDir, nil
	}
	cache, err := ServicesCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "bin"), nil
}

// apiHost is the address the API server listens on and advertises:
// 127.0.0.1, or with Services this machine's address on the pods' bridge.
func (c *Cluster) apiHost() string {
	if c.services && c.node != nil {
		return c.node.HostIP
	}
	return "127.0.0.1"
}

// startServices starts what the Services option runs on the host before the
// kubelet: the Service range's route, the forward rule, CoreDNS, kube-proxy
// and kube-network-policies. Their readiness is awaited by
// waitServicesReady once the node is Ready.
func (c *Cluster) startServices(ctx context.Context, opts Options, n *RealNode) error {
	s := n.Services
	dir := filepath.Join(n.Dir, "services")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := func(name, bin string, args []string) error {
		return c.startIn(opts, name, s.BinDir, s.BinDir+":"+hostPath, bin, args)
	}

	// Service IPs go to the pods' bridge and nowhere else: a Service IP
	// without endpoints is rejected by kube-proxy, one outside any Service
	// is not routed off this machine.
	if _, err := hostTool(ctx, "ip", "route", "add", serviceCIDR, "dev", n.Bridge, "src", n.HostIP); err != nil {
		return fmt.Errorf("route the Service range to the pods' bridge: %w", err)
	}
	s.Route = serviceCIDR
	// The pods' traffic that would leave the bridge for another interface is
	// rejected: nothing a pod sends leaves this machine.
	rule := []string{"FORWARD", "-i", n.Bridge, "!", "-o", n.Bridge,
		"-m", "comment", "--comment", "tesk " + n.Bridge + ": pods reach nothing off this machine",
		"-j", "REJECT", "--reject-with", "icmp-net-prohibited"}
	if _, err := hostTool(ctx, "iptables", append([]string{"-w", "-I"}, rule...)...); err != nil {
		return fmt.Errorf("keep the pods' traffic on this machine: %w", err)
	}
	s.ForwardRule = rule

	// CoreDNS on the bridge's address.
	dnsAddr := net.JoinHostPort(n.HostIP, "53")
	if err := portsFree(dnsAddr); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	readyPort, err := freePort()
	if err != nil {
		return err
	}
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(c.corefile(n.HostIP, healthPort, readyPort)), 0o644); err != nil {
		return err
	}
	if err := start("coredns", binCoreDNS, []string{"-conf", corefile}); err != nil {
		return err
	}
	s.DNS = dnsAddr
	c.dnsReady = fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)

	// kube-proxy as system:kube-proxy (the node-proxier role).
	k := c.pki()
	if err := k.issue("kube-proxy", 12, pkix.Name{CommonName: "system:kube-proxy"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil); err != nil {
		return fmt.Errorf("kube-proxy certificate: %w", err)
	}
	proxyKubeconfig := filepath.Join(dir, "kube-proxy.kubeconfig")
	if err := c.writeKubeconfigFor(proxyKubeconfig, "kube-proxy", k.path("kube-proxy.crt"), k.path("kube-proxy.key")); err != nil {
		return err
	}
	proxyHealth, err := freePort()
	if err != nil {
		return err
	}
	proxyMetrics, err := freePort()
	if err != nil {
		return err
	}
	proxyConfig := filepath.Join(dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyConfig, []byte(kubeProxyConfig(n, proxyKubeconfig, proxyHealth, proxyMetrics)), 0o644); err != nil {
		return err
	}
	s.KubeProxy = true
	if err := start("kube-proxy", binKubeProxy, []string{"--config=" + proxyConfig, "--v=1"}); err != nil {
		return err
	}
	c.proxyHealth = fmt.Sprintf("http://127.0.0.1:%d/healthz", proxyHealth)

	// kube-network-policies.
	netpolPort, err := freePort()
	if err != nil {
		return err
	}
	s.NFTable = netpolTable
	if err := start("kube-network-policies", binNetpol, []string{
		"-kubeconfig", c.Kubeconfig,
		"-hostname-override", n.Name,
		"-table", netpolTable,
		"-nfqueue-id", strconv.Itoa(netpolQueue),
		"-metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", netpolPort),
		"-v=1",
	}); err != nil {
		return err
	}
	c.netpolReady = fmt.Sprintf("http://127.0.0.1:%d/readyz", netpolPort)

	return c.waitFor(ctx, "cluster DNS (CoreDNS "+dnsAddr+") ready", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, httpClient, c.dnsReady)
	})
}

// waitServicesReady waits, once the node is Ready, for kube-proxy's and
// kube-network-policies' health and for the kubernetes Service's endpoints
// at the API server's address on the bridge.
func (c *Cluster) waitServicesReady(ctx context.Context, n *RealNode) error {
	if err := c.waitFor(ctx, "kube-proxy /healthz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, httpClient, c.proxyHealth)
	}); err != nil {
		return fmt.Errorf("%w; last lines of kube-proxy's log:\n%s", err, c.processLogTail("kube-proxy", 15))
	}
	if err := c.waitFor(ctx, "kube-network-policies /readyz (its nftables rules in the kernel)", func(ctx context.Context) (bool, error) {
		return httpBody(ctx, c.netpolReady)
	}); err != nil {
		return fmt.Errorf("%w; last lines of kube-network-policies' log:\n%s", err, c.processLogTail("kube-network-policies", 15))
	}
	want := net.JoinHostPort(n.HostIP, strconv.Itoa(c.ports.APIServer))
	return c.waitFor(ctx, "the kubernetes Service's endpoints at "+want, func(ctx context.Context) (bool, error) {
		slices, err := c.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
		if err != nil {
			return false, err
		}
		for _, sl := range slices.Items {
			for _, p := range sl.Ports {
				for _, e := range sl.Endpoints {
					for _, a := range e.Addresses {
						if p.Port != nil && net.JoinHostPort(a, strconv.Itoa(int(*p.Port))) == want {
							return true, nil
						}
					}
				}
			}
		}
		return false, fmt.Errorf("the kubernetes Service's EndpointSlices do not name %s yet", want)
	})
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// httpBody reports a 200 answer; any other answer's body becomes the error.
func httpBody(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return true, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return false, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
}

// portsFree reports an error naming addr when its TCP or UDP port is in use.
func portsFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("TCP port %s is already in use (or not available): %w", addr, err)
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("UDP port %s is already in use (or not available): %w", addr, err)
	}
	u.Close()
	return nil
}

// corefile is CoreDNS's configuration: the cluster's zones from the API
// server, on the bridge's address only. There is no forward plugin: a name
// outside these zones is refused, so no query leaves this machine.
func (c *Cluster) corefile(hostIP string, healthPort, readyPort int) string {
	return fmt.Sprintf(`%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[2]s
    errors
    log . {
        class denial error
    }
    health 127.0.0.1:%[3]d
    ready 127.0.0.1:%[4]d
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        kubeconfig %[5]s tesk-local
        pods insecure
        ttl 5
    }
}
`, ClusterDomain, hostIP, healthPort, readyPort, c.Kubeconfig)
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode, the node's
// address on the bridge, node ports only there, and no change to the host's
// sysctls (conntrack sizes and timeouts, route_localnet) or its own OOM score.
func kubeProxyConfig(n *RealNode, kubeconfig string, healthPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
  qps: 50
  burst: 100
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
mode: iptables
clusterCIDR: %s
nodePortAddresses: ["%s/32"]
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.Name, n.HostIP, healthPort, metricsPort, n.Subnet, n.HostIP)
}

// stopServices removes what the Services option set up on this machine
// once its processes have stopped: kube-proxy's rules, kube-network-policies'
// table, the forward rule and the route. It is safe on a half-started node.
func stopServices(n *RealNode) error {
	s := n.Services
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if s.KubeProxy {
		cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, binKubeProxy), "--cleanup", "--v=0")
		cmd.Env = []string{"PATH=" + s.BinDir + ":" + hostPath}
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup (its iptables rules): %v: %s", err, lastLines(string(out), 10)))
		}
	}
	if s.NFTable != "" {
		cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, binNetpol), "-cleanup", "-table", s.NFTable)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-network-policies -cleanup (nftables table inet %s): %v: %s", s.NFTable, err, lastLines(string(out), 10)))
		}
	}
	if len(s.ForwardRule) > 0 {
		if out, err := hostTool(ctx, "iptables", append([]string{"-w", "-D"}, s.ForwardRule...)...); err != nil &&
			!strings.Contains(out, "does a matching rule exist") && !strings.Contains(out, "Bad rule") {
			errs = append(errs, err)
		}
	}
	if s.Route != "" && n.Bridge != "" {
		if out, err := hostTool(ctx, "ip", "route", "del", s.Route, "dev", n.Bridge); err != nil &&
			!strings.Contains(out, "No such process") && !strings.Contains(out, "Cannot find device") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
