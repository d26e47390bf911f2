package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

func TestRESTConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := RESTConfig(p, Client{QPS: 7, Burst: 9, UserAgent: "ua"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || rc.QPS != 7 || rc.Burst != 9 || rc.UserAgent != "ua" || rc.Timeout != 30*time.Second {
		t.Fatalf("config: host %q qps %v burst %d agent %q timeout %v", rc.Host, rc.QPS, rc.Burst, rc.UserAgent, rc.Timeout)
	}
	if _, err := RESTConfig(filepath.Join(t.TempDir(), "none"), Client{}); err == nil {
		t.Fatal("a missing kubeconfig gave no error")
	}
}

func TestNewLogger(t *testing.T) {
	if l := NewLogger("x", false); l.Desugar().Core().Enabled(-1) {
		t.Fatal("debug enabled without debug")
	}
	if l := NewLogger("x", true); !l.Desugar().Core().Enabled(-1) {
		t.Fatal("debug not enabled with debug")
	}
}
