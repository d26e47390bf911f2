//go:build e2e

// Package readme runs the curl examples of the README and of the pages
// they moved to (docs/events.md, docs/getting-started.md, docs/tes-api.md)
// against the handler and the TES API as `make dev` runs them, the tesctl
// commands of the README and docs/, and the kubectl commands of
// docs/getting-started.md's troubleshooting, so that they cannot rot.
package readme

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestREADMECurlExamples(t *testing.T) {
	root, _ := filepath.Abs("../..")
	cmds := handlerExamples(t, root)
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	bin := filepath.Join(t.TempDir(), "handler")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "handler")).CombinedOutput(); err != nil {
		t.Fatalf("build the handler: %v\n%s", err, out)
	}
	port := freePort(t)
	logs, _ := os.Create(filepath.Join(t.TempDir(), "handler.log"))
	s, err := devstack.Start(ctx, c, devstack.Options{Root: root, Namespace: "default", Port: port, Handler: bin, Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	for i, cmd := range cmds {
		run := strings.ReplaceAll(cmd, "localhost:8080", addr)
		sh := exec.Command("bash", "-c", run)
		sh.Dir = root
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("README example %d failed: %v\n%s\n%s", i+1, err, cmd, out)
		}
		var body map[string]any
		if err := json.Unmarshal(out, &body); err != nil {
			t.Fatalf("README example %d: the answer is not a JSON object: %v\n%s\n%s", i+1, err, cmd, out)
		}
		if msg, ok := body["error"]; ok {
			t.Fatalf("README example %d answered an error: %v\n%s", i+1, msg, cmd)
		}
		t.Logf("example %d: %s", i+1, out)
		if strings.Contains(cmd, "task.submitted") {
			// The rest of the examples speak of the task once it ran.
			waitComplete(t, "http://"+addr+"/tasks/default/task-1234abcd")
		}
		if strings.Contains(cmd, "/tasks/default/") && body["state"] != tesv1.StateComplete {
			t.Errorf("the view says %v, want COMPLETE", body["state"])
		}
		if strings.Contains(cmd, "job.finished") || strings.Contains(cmd, "pod.stuck") {
			// A late step of the ended task: the handler reads the task
			// and does nothing.
			actions, _ := body["actions"].([]any)
			if body["task"] != "task-1234abcd" || body["state"] != tesv1.StateComplete || len(actions) != 0 {
				t.Errorf("README example %d, a late step of the completed task: %s, want task-1234abcd COMPLETE with no action", i+1, out)
			}
		}
		if strings.Contains(cmd, "task.cancelled") && !strings.Contains(string(out), "already ended") {
			t.Errorf("cancelling the completed task: %s, want it to say the task already ended", out)
		}
	}
}

func waitComplete(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	state := ""
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			var v tesv1.Task
			_ = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			state = v.State
			if state == tesv1.StateComplete {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the README's task is %q after 90 s, want COMPLETE", state)
}
