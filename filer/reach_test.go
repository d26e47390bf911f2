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
	} {
		if got := r.Permits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: permitted %v, want %v", addr, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.1", "minio.local/16", "10.0.0.0/33"} {
		if _, err := NewReach(bad); err == nil || !strings.Contains(err.Error(), "is not a CIDR") {
			t.Errorf("%q: %v, want an error naming it", bad, err)
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
