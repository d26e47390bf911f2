// Command netprobe runs in a pod of the real node (the Services option's
// test): once a second it resolves a Service's name with the pod's
// resolv.conf, fetches the Service by name and by cluster IP, and calls the
// API server through the kubernetes Service with the pod's ServiceAccount
// token (verifying the API server's certificate with the pod's CA bundle):
// one GET its RBAC allows and one it does not. It prints each round as one
// JSON line on stdout, for the test to read from the pod's log.
//
// Environment: PROBE_NAME (the Service's DNS name), PROBE_IP (its cluster
// IP), PROBE_PORT, PROBE_BODY (what the Service answers).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Round is one round's results: an address, "ok", or an HTTP status code;
// anything else is the error.
type Round struct {
	Round     int    `json:"round"`
	DNS       string `json:"dns"`
	Name      string `json:"name"`
	IP        string `json:"ip"`
	API       string `json:"api"`
	APIName   string `json:"apiName"`
	Forbidden string `json:"forbidden"`
}

const timeout = 1500 * time.Millisecond

func main() {
	name, ip, port, body := os.Getenv("PROBE_NAME"), os.Getenv("PROBE_IP"), os.Getenv("PROBE_PORT"), os.Getenv("PROBE_BODY")
	ns, err := os.ReadFile(saDir + "/namespace")
	if err != nil {
		fmt.Fprintln(os.Stderr, "netprobe:", err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	if ca, err := os.ReadFile(saDir + "/ca.crt"); err != nil || !pool.AppendCertsFromPEM(ca) {
		fmt.Fprintln(os.Stderr, "netprobe: no CA bundle in", saDir)
		os.Exit(1)
	}
	api := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	plain := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	secure := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	enc := json.NewEncoder(os.Stdout)
	for i := 1; ; i++ {
		begin := time.Now()
		// The token is read each round: the kubelet rotates it.
		token, _ := os.ReadFile(saDir + "/token")
		r := Round{Round: i}
		r.DNS = lookup(name)
		r.Name = fetch(plain, "http://"+net.JoinHostPort(name, port)+"/", "", body)
		r.IP = fetch(plain, "http://"+net.JoinHostPort(ip, port)+"/", "", body)
		path := "/api/v1/namespaces/" + string(ns)
		r.API = fetch(secure, "https://"+api+path+"/configmaps/kube-root-ca.crt", string(token), "")
		r.APIName = fetch(secure, "https://kubernetes.default.svc"+path+"/configmaps/kube-root-ca.crt", string(token), "")
		r.Forbidden = fetch(secure, "https://"+api+path+"/secrets", string(token), "")
		_ = enc.Encode(r)
		time.Sleep(time.Second - time.Since(begin))
	}
}

func lookup(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(addrs, ",")
}

// fetch GETs url: "ok" if the answer is 200 with want as its body, else the
// status code (when want is empty, the status code).
func fetch(c *http.Client, url, token, want string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if want != "" && resp.StatusCode == http.StatusOK {
		if strings.TrimSpace(string(b)) == want {
			return "ok"
		}
		return fmt.Sprintf("200 with body %q", b)
	}
	return fmt.Sprint(resp.StatusCode)
}
