package cluster

import (
	"net"
	"strings"
	"testing"
)

// udpOnly holds a UDP port whose TCP twin was free a moment ago, so that
// portsFree's TCP check passes and its UDP check is the one that fails.
// Other test packages start clusters beside this one and take ports too.
func udpOnly(t *testing.T) (net.PacketConn, string) {
	t.Helper()
	for range 50 {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := u.LocalAddr().String()
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return u, addr
		}
		u.Close()
	}
	t.Fatal("no UDP port with a free TCP twin in 50 tries")
	return nil, ""
}

// The cluster DNS's port check names the address and the protocol in use.
func TestPortsFree(t *testing.T) {
	u, addr := udpOnly(t)
	defer u.Close()
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
	// A port just freed may be taken by another process before the check:
	// a correct check finds one of a few such ports free.
	var errs []error
	for range 5 {
		free, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = free.Addr().String()
		free.Close()
		if err := portsFree(addr); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = nil
		break
	}
	if errs != nil {
		t.Errorf("five free ports reported in use: %v", errs)
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
