package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/internal/cmdutil"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

func TestParseOptions(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name    string
		args    []string
		env     func(string) string
		want    options
		wantErr string
	}{
		{name: "defaults", env: env(), want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token"}},
		{name: "env", env: env("NAMESPACE", "tesk", "POD_TIMEOUT", " 30 ", "FILER_NAME", "f", "FILER_VERSION", "1.0", "PULL_POLICY_ALWAYS", "true", "DEBUG", "1", "PORT", "9090"),
			want: options{namespace: "tesk", podTimeout: "30", filerName: "f", filerVersion: "1.0", pullPolicyAlways: true, debug: true, port: 9090, sinkToken: "/oidc/token"}},
		{name: "flags win over env", args: []string{"--namespace", "a", "--pod-timeout", "5", "--port", "7070"}, env: env("NAMESPACE", "b", "POD_TIMEOUT", "6", "PORT", "9090"),
			want: options{namespace: "a", podTimeout: "5", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 7070, sinkToken: "/oidc/token"}},
		{name: "empty env is unset", env: env("NAMESPACE", " ", "FILER_NAME", ""), want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token"}},
		{name: "behaviour §2: the short flags", args: []string{"-n", "a", "-pt", "5", "-fn", "f", "-fv", "2.0", "-d"}, env: env(),
			want: options{namespace: "a", podTimeout: "5", filerName: "f", filerVersion: "2.0", debug: true, port: 8080, sinkToken: "/oidc/token"}},
		{name: "behaviour §2: the short flags win over env", args: []string{"-n", "a", "-pt", "7"}, env: env("NAMESPACE", "b", "POD_TIMEOUT", "6", "DEBUG", "true"),
			want: options{namespace: "a", podTimeout: "7", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", debug: true, port: 8080, sinkToken: "/oidc/token"}},
		{name: "state events to K_SINK, a SinkBinding's", env: env("K_SINK", "http://broker.example/tesk/default"),
			want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token", stateSink: "http://broker.example/tesk/default"}},
		{name: "STATE_EVENTS_SINK wins over K_SINK", env: env("K_SINK", "http://broker.example/tesk/default", "STATE_EVENTS_SINK", "http://recorder.example/"),
			want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token", stateSink: "http://recorder.example/"}},
		{name: "the sink's token elsewhere", env: env("SINK_TOKEN_FILE", "/var/run/token"),
			want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/var/run/token"}},
		{name: "state events required, and bound", env: env("STATE_EVENTS_REQUIRED", "true", "K_SINK", "http://broker.example/tesk/default"),
			want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token", stateSink: "http://broker.example/tesk/default", stateEventsRequired: true}},
		{name: "state events required, to a sink of the operator's", args: []string{"-state-events-sink", "http://recorder.example/"}, env: env("STATE_EVENTS_REQUIRED", "1"),
			want: options{namespace: cmdutil.PodNamespace(steps.DefaultNamespace), podTimeout: "240", filerName: "ghcr.io/elixir-cloud-aai/tesk-knative-filer", filerVersion: "latest", port: 8080, sinkToken: "/oidc/token", stateSink: "http://recorder.example/", stateEventsRequired: true}},
		{name: "state events required, a revision not bound yet", env: env("STATE_EVENTS_REQUIRED", "true"), wantErr: "neither STATE_EVENTS_SINK nor K_SINK"},
		{name: "state events required by the flag", args: []string{"-state-events-required"}, env: env(), wantErr: "neither STATE_EVENTS_SINK nor K_SINK"},
		{name: "bad STATE_EVENTS_REQUIRED", env: env("STATE_EVENTS_REQUIRED", "maybe", "K_SINK", "http://broker.example/"), wantErr: "STATE_EVENTS_REQUIRED"},
		{name: "bad PORT", env: env("PORT", "http"), wantErr: "PORT"},
		{name: "bad DEBUG", env: env("DEBUG", "sometimes"), wantErr: "DEBUG"},
		{name: "stray argument", args: []string{"task.json"}, env: env(), wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--poll-interval", "5"}, env: env(), wantErr: "poll-interval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseOptions(c.args, c.env)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one about %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// On SIGTERM the handler takes no new request, finishes the one in flight,
// and exits 0. Built as the Makefile builds it, it reports its version with
// --version and in its start line.
func TestSIGTERMFinishesRequestsInFlight(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "handler")
	const built = "v9.8.7-test"
	if out, err := exec.Command("go", "build", "-ldflags", "-X github.com/elixir-cloud-aai/tesk-knative/internal/version.Version="+built, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || string(out) != built+"\n" {
		t.Fatalf("handler --version: %q %v, want %s", out, err, built)
	}
	// A stand-in API server that holds its answer (the task is unknown)
	// until the test has sent SIGTERM: the handler's request is in flight
	// then, whatever the machine's speed.
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	defer api.Close()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, api.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", "tesk", "--port", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	type answer struct {
		code int
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(`{"task":"task-1","job":"task-1-ex-00"}`))
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "1")
		req.Header.Set("Ce-Source", "test")
		req.Header.Set("Ce-Type", "job.finished")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{code: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-arrived: // the request waits on the API server
	case a := <-done:
		t.Fatalf("the request was answered before it reached the API server: %d %q %v", a.code, a.body, a.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the request did not reach the API server\n%s", logs.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The handler has taken the signal (it no longer says it is ready,
	// or no longer answers) while the request waits; then the API server
	// answers.
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the handler still says it is ready 10 s after SIGTERM\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	a := <-done
	if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "unknown task") {
		t.Errorf("the request in flight: %d %q %v, want it answered 200", a.code, a.body, a.err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v, want 0\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the handler did not exit after SIGTERM\n%s", logs.String())
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("the handler still takes requests after it exited")
	}
	if !startLineGives(logs.String(), "version", built) {
		t.Errorf("the start line does not give the version %s:\n%s", built, logs.String())
	}
	if !strings.Contains(logs.String(), "Shutting down") || !strings.Contains(logs.String(), "Stopped") {
		t.Errorf("logs do not show the shutdown:\n%s", logs.String())
	}
}

// A K_OBSERVABILITY_CONFIG that is not valid stops the handler at start.
func TestInvalidObservabilityConfig(t *testing.T) {
	for _, v := range []string{`{"metrics-protocol":"carrier-pigeon"}`, `{"tracing-protocol":"grpc"}`, `not json`} {
		env := map[string]string{"K_OBSERVABILITY_CONFIG": v, "NAMESPACE": "tesk"}
		err := run(nil, func(name string) string { return env[name] })
		if err == nil || !strings.Contains(err.Error(), "K_OBSERVABILITY_CONFIG") {
			t.Errorf("%s: %v, want an error naming K_OBSERVABILITY_CONFIG", v, err)
		}
	}
}

// A BACKEND_PARAMETERS that does not parse stops the handler at start.
func TestInvalidBackendParameters(t *testing.T) {
	env := map[string]string{"BACKEND_PARAMETERS": "gpu: {max: 0, types: {nvidia.com/gpu: {}}}", "NAMESPACE": "tesk"}
	err := run(nil, func(name string) string { return env[name] })
	if err == nil || !strings.Contains(err.Error(), "BACKEND_PARAMETERS: gpu.max") {
		t.Errorf("%v, want an error naming BACKEND_PARAMETERS and gpu.max", err)
	}
}

// startLineGives reports whether the handler's start line (msg Ready) in
// logs has field key equal to want, wherever it is among the others (a
// build stamped with its VCS revision adds "commit").
func startLineGives(logs, key, want string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var fields map[string]any
		if json.Unmarshal([]byte(line), &fields) == nil && fields["msg"] == "Ready" {
			return fields[key] == want
		}
	}
	return false
}
