package cluster

import (
	"net"
	"strings"
	"testing"
)

// The cluster DNS's port check names the address and the protocol in use.
func TestPortsFree(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	addr := u.LocalAddr().String()
	if err := portsFree(addr); err == nil || !strings.Contains(err.Error(), "UDP port "+addr+" is already in use") {
		t.Errorf("UDP port in use: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr = l.Addr().String()
	if err := portsFree(addr); err == nil || !strings.Contains(err.Error(), "TCP port "+addr+" is already in use") {
		t.Errorf("TCP port in use: %v", err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = free.Addr().String()
	free.Close()
	if err := portsFree(addr); err != nil {
		t.Errorf("a free port: %v", err)
	}
}

// kube-proxy keeps away from the host's sysctls and other interfaces.
func TestKubeProxyConfig(t *testing.T) {
	n := &RealNode{Name: RealNodeName, HostIP: "10.88.3.1", Subnet: "10.88.3.0/24"}
	cfg := kubeProxyConfig(n, "/k", 1, 2)
	for _, want := range []string{
		"mode: iptables", "bindAddress: 10.88.3.1", "clusterCIDR: 10.88.3.0/24", `nodePortAddresses: ["10.88.3.1/32"]`,
		"localhostNodePorts: false", "maxPerCore: 0", "tcpEstablishedTimeout: 0s", "oomScoreAdj: 0",
		"healthzBindAddress: 127.0.0.1:1", "metricsBindAddress: 127.0.0.1:2",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("kube-proxy's configuration lacks %q:\n%s", want, cfg)
		}
	}
}
