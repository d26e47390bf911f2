package filer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// PrivateRanges are the addresses a filer refuses to connect to unless the
// operator allows them: the cluster's own (its pods and Services, the API
// server, the nodes on a private network), loopback, link-local with the
// cloud's metadata service (169.254.169.254, which hands out the node's
// credentials), shared address space, and the unspecified and multicast
// addresses. They are the ranges the tasks' NetworkPolicy leaves out, and
// more: the check holds where no network plugin enforces the policy, and
// in the moment after a pod starts before it does.
//
// IPv6 prefixes that carry an IPv4 address to a translator or tunnel, and
// so could reach a private IPv4 address, are in it whole where their
// IPv4 address cannot be read from a fixed place or nothing legitimate is
// served from them: NAT64's local-use prefix 64:ff9b:1::/48 (its operator
// picks where the IPv4 address sits), Teredo (2001::/32, whose client
// address is obscured and sits behind a relay) and the deprecated
// IPv4-compatible ::/96. The two whose IPv4 address has a fixed place,
// NAT64's well-known 64:ff9b::/96 (the last 32 bits) and 6to4's 2002::/16
// (bits 16 to 47), are not: Permits checks the IPv4 address they carry as
// it checks that address itself, so a cluster that reaches IPv4 servers
// through DNS64 and NAT64 still reaches the public ones.
var PrivateRanges = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "::/96", "64:ff9b:1::/48", "2001::/32", "fc00::/7", "fe80::/10", "ff00::/8",
)

// nat64, sixToFour: the prefixes whose IPv4 address Permits checks.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Reach decides which addresses a filer may connect to for HTTP(S) and FTP
// URLs, the hosts a task names: every address but those of Denied, except
// those of Allowed. It is checked on each connection, after the name was
// resolved, so a name that resolves to a private address, a redirect to
// one and an FTP server's PASV answer naming one are refused alike. S3 is
// not checked: its endpoint is the operator's, not the task's.
type Reach struct {
	Denied, Allowed []netip.Prefix
}

// NewReach is a Reach that denies PrivateRanges but the CIDRs allowed (a
// comma-separated list, e.g. "10.20.0.0/16,fd00::/8"); an entry that is not
// a CIDR is an error naming it.
func NewReach(allowed string) (*Reach, error) {
	r := &Reach{Denied: PrivateRanges}
	for _, s := range strings.Split(allowed, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR (e.g. 10.20.0.0/16)", s)
		}
		r.Allowed = append(r.Allowed, p.Masked())
	}
	return r, nil
}

// Permits reports whether an address may be connected to. An IPv6 zone
// (fe80::1%eth0) is dropped first: a prefix contains no zoned address. An
// address of NAT64's well-known prefix or of 6to4 that no allowed range
// holds is judged as the IPv4 address it carries.
func (r *Reach) Permits(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range r.Allowed {
		if p.Contains(ip) {
			return true
		}
	}
	if v4, ok := embeddedIPv4(ip); ok {
		return r.Permits(v4)
	}
	for _, p := range r.Denied {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// control is a net.Dialer's ControlContext: it refuses a connection to an
// address the Reach does not permit, before the connection is made.
func (r *Reach) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("the filer connects to IP addresses only, not %q", address)
	}
	if !r.Permits(ap.Addr()) {
		return &net.AddrError{Err: "a private address, which the filer may not reach (the operator allows ranges with FILER_ALLOWED_CIDRS)", Addr: ap.Addr().String()}
	}
	return nil
}

// embeddedIPv4 is the IPv4 address an address of NAT64's well-known prefix
// (RFC 6052) or of 6to4 (RFC 3056) carries.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	switch b := ip.As16(); {
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// mustPrefixes parses CIDRs known to be valid.
func mustPrefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}
