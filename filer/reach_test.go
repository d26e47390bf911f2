package filer

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReachPermits(t *testing.T) {
	r, err := NewReach(" 10.20.0.0/16, fd00:1::/32 ,")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"93.184.215.14":    true,  // a public address
		"2606:4700::1111":  true,  // a public IPv6 address
		"10.20.30.40":      true,  // in an allowed range
		"10.21.0.1":        false, // private, outside it
		"172.16.5.4":       false,
		"192.168.1.1":      false,
		"100.64.0.1":       false, // shared address space
		"127.0.0.1":        false,
		"169.254.169.254":  false, // the cloud's metadata service
		"0.0.0.0":          false,
		"::1":              false,
		"::ffff:10.0.0.1":  false, // an IPv4-mapped private address
		"::ffff:10.20.0.1": true,
		"fe80::1":          false,
		"fd00:1::5":        true,
		"fd00:2::5":        false,
		"224.0.0.1":        false,
		// A zone: no prefix contains a zoned address unless it is dropped.
		"fe80::1%eth0":    false,
		"fe80::1%1":       false,
		"::1%lo":          false,
		"fd00:2::5%eth0":  false,
		"fd00:1::5%eth0":  true,
		"2606:4700::1%e0": true,
		// NAT64's well-known prefix: judged as the IPv4 address it carries.
		"64:ff9b::a9fe:a9fe":     false, // 169.254.169.254
		"64:ff9b::10.0.0.1":      false,
		"64:ff9b::7f00:1":        false, // 127.0.0.1
		"64:ff9b::10.20.0.1":     true,  // in an allowed range
		"64:ff9b::93.184.215.14": true,
		"64:ff9b::a9fe:a9fe%e0":  false,
		// NAT64's local-use prefix: where it carries the address is the
		// operator's choice, so all of it.
		"64:ff9b:1::a9fe:a9fe":  false,
		"64:ff9b:1:5db8:d70e::": false,
		// 6to4: the IPv4 address in bits 16 to 47.
		"2002:a9fe:a9fe::1": false, // 169.254.169.254
		"2002:0a00:0001::1": false, // 10.0.0.1
		"2002:c0a8:0101::":  false, // 192.168.1.1
		"2002:0a14:0001::1": true,  // 10.20.0.1, allowed
		"2002:5db8:d70e::1": true,  // 93.184.215.14
		// Teredo and IPv4-compatible addresses: denied whole.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": false,
		"2001::1":                              false,
		"::10.0.0.1":                           false,
		"::93.184.215.14":                      false,
		"2001:db8::1":                          true, // next to Teredo, not in it
		"64:ff9c::1":                           true, // next to NAT64, not in it
	} {
		if got := r.Permits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: permitted %v, want %v", addr, got, want)
		}
	}
	// An allowed range that holds a NAT64 or 6to4 address allows it, whatever
	// the IPv4 address it carries.
	all, err := NewReach("64:ff9b::/96, 2002:a9fe::/32")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"64:ff9b::10.0.0.1", "2002:a9fe:a9fe::1"} {
		if !all.Permits(netip.MustParseAddr(addr)) {
			t.Errorf("%s: refused, though its range is allowed", addr)
		}
	}
	for _, bad := range []string{"10.0.0.1", "minio.local/16", "10.0.0.0/33"} {
		if _, err := NewReach(bad); err == nil || !strings.Contains(err.Error(), "is not a CIDR") {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}

// TestReachControl: the dialer's check parses the address it is given,
// a zoned one included (a URL's http://[fe80::1%25eth0]/), and refuses a
// private one as such.
func TestReachControl(t *testing.T) {
	r, err := NewReach("")
	if err != nil {
		t.Fatal(err)
	}
	for address, refusal := range map[string]string{
		"93.184.215.14:443":          "",
		"[2606:4700::1111]:443":      "",
		"[2606:4700::1111%eth0]:443": "",
		"169.254.169.254:80":         "a private address, which the filer may not reach",
		"[fe80::1%eth0]:80":          "a private address, which the filer may not reach",
		"[fe80::1%2]:80":             "a private address, which the filer may not reach",
		"[64:ff9b::a9fe:a9fe]:80":    "a private address, which the filer may not reach",
		"[2002:a9fe:a9fe::1]:80":     "a private address, which the filer may not reach",
		"[::1%lo]:80":                "a private address, which the filer may not reach",
		"localhost:80":               "the filer connects to IP addresses only",
	} {
		err := r.control(context.Background(), "tcp", address, nil)
		switch {
		case refusal == "" && err != nil:
			t.Errorf("%s: %v, want it permitted", address, err)
		case refusal != "" && (err == nil || !strings.Contains(err.Error(), refusal)):
			t.Errorf("%s: %v, want %q", address, err, refusal)
		}
	}
}

// TestReachOnEveryConnection: the check holds after the name is resolved
// and on a redirect: an allowed server's redirect to a private address, and
// a name that resolves to one, are refused without a request reaching it.
func TestReachOnEveryConnection(t *testing.T) {
	var hits atomic.Int32
	private := listenOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("secret"))
	}))
	allowed := listenOn(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("fine"))
			return
		}
		http.Redirect(w, r, private+"/x", http.StatusFound)
	}))
	r, err := NewReach("127.0.0.2/32")
	if err != nil {
		t.Fatal(err)
	}
	tr := newHTTPTransport(5*time.Second, nil, r)
	defer tr.close()
	get := func(url string) (string, error) {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := tr.get(ctx, url, f); err != nil {
			return "", err
		}
		b, _ := os.ReadFile(f.Name())
		return string(b), nil
	}
	if body, err := get(allowed + "/ok"); err != nil || body != "fine" {
		t.Fatalf("an allowed address: %q %v", body, err)
	}
	for name, url := range map[string]string{
		"a redirect to a private address": allowed + "/redirect",
		"a private address":               private + "/x",
		"a name of a private address":     strings.Replace(private, "127.0.0.1", "localhost", 1) + "/x",
	} {
		_, err := get(url)
		if err == nil || !strings.Contains(err.Error(), "a private address, which the filer may not reach") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the private server got %d requests", n)
	}
}

// listenOn serves h on a free port of host until the test ends.
func listenOn(t *testing.T, host string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}
