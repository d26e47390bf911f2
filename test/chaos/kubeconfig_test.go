package chaos

import (
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A client built from the redirected kubeconfig reaches the API server
// through the fault proxy, over TLS, with its token.
func TestRedirectKubeconfigThroughProxy(t *testing.T) {
	var auth string
	api, _ := ServeTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	p := NewAPIFaultProxy(u, api.Client().Transport, 1)
	p.ReadDelayRate = 0
	front, ca := ServeTLS(p)
	defer front.Close()

	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: api.URL, CertificateAuthorityData: []byte("old")}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "tok"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}
	if err := RedirectKubeconfig(in, out, front.URL, ca); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", out)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != front.URL {
		t.Fatalf("host %s, want %s", rc.Host, front.URL)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	if _, err := cs.CoreV1().Pods("x").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer tok" {
		t.Errorf("API server got Authorization %q", auth)
	}
	if err := RedirectKubeconfig(filepath.Join(dir, "missing"), out, front.URL, ca); err == nil {
		t.Errorf("no error for a missing kubeconfig")
	}
}
