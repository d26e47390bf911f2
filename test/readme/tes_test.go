//go:build e2e

package readme

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// TestREADMETESExamples runs the TES API examples of the README,
// docs/getting-started.md and docs/tes-api.md against the TES API and the
// handler as `make dev` runs them: <id> is the task the create example
// before it made, <next_page_token> the token of the list before. Then the
// tesctl commands of the README and docs/ (runTesctlExamples), and the
// kubectl commands of docs/getting-started.md's troubleshooting
// (runKubectlExamples).
func TestREADMETESExamples(t *testing.T) {
	root, _ := filepath.Abs("../..")
	cmds := tesExamples(t, root)
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	dir := t.TempDir()
	for _, cmd := range []string{"handler", "tes"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), filepath.Join(root, "cmd", cmd)).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	port, tesPort := freePort(t), freePort(t)
	logs, _ := os.Create(filepath.Join(dir, "logs"))
	s, err := devstack.Start(ctx, c, devstack.Options{Root: root, Namespace: "default", Port: port,
		Handler: filepath.Join(dir, "handler"), TES: filepath.Join(dir, "tes"), TESPort: tesPort, Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	addr := fmt.Sprintf("127.0.0.1:%d", tesPort)

	id, token := "", ""
	for i, cmd := range cmds {
		run := strings.ReplaceAll(cmd, "localhost:8081", addr)
		run = strings.ReplaceAll(run, "<id>", id)
		run = strings.ReplaceAll(run, "<next_page_token>", token)
		if strings.Contains(run, "<") && !strings.Contains(run, "-d @") {
			t.Fatalf("README example %d has a placeholder this test does not fill: %s", i+1, cmd)
		}
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
		switch {
		case strings.Contains(cmd, "-X POST") && strings.HasSuffix(strings.Fields(cmd)[4], "/tasks"):
			id, _ = body["id"].(string)
			waitTESComplete(t, "http://"+addr+"/ga4gh/tes/v1/tasks/"+id)
		case strings.Contains(cmd, "view=FULL") && body["state"] != tesv1.StateComplete:
			t.Errorf("the task is %v, want COMPLETE", body["state"])
		case strings.Contains(cmd, "/tasks?"):
			if _, ok := body["tasks"].([]any); !ok {
				t.Errorf("README example %d: no list of tasks: %s", i+1, out)
			}
			token, _ = body["next_page_token"].(string)
		}
	}
	if id == "" {
		t.Fatal("no README example created a task")
	}
	// The same with tesctl, on the same cluster.
	runTesctlExamples(t, root, dir, addr)
	// The troubleshooting's kubectl commands on a task that completed.
	runKubectlExamples(t, root, c, addr, fmt.Sprintf("127.0.0.1:%d", port))
	// The dashboard, at the address the README gives (http://localhost:8081/
	// with make dev): / leads to it; it knows the API needs no token here.
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/dashboard/" || !strings.Contains(string(page), `<script src="app.js">`) {
		t.Errorf("the README's dashboard address: %d at %s\n%.300s", resp.StatusCode, resp.Request.URL, page)
	}
	out, err := exec.Command("curl", "-sS", "http://"+addr+"/dashboard/config.json").Output()
	if err != nil || strings.TrimSpace(string(out)) != `{"api":"/ga4gh/tes/v1","auth":"none"}` {
		t.Errorf("the dashboard's configuration under make dev: %v %s", err, out)
	}
}

func waitTESComplete(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	state := ""
	for time.Now().Before(deadline) {
		out, err := exec.Command("curl", "-sS", url).Output()
		if err == nil {
			var v struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal(out, &v)
			if state = v.State; state == tesv1.StateComplete {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the README's TES task is %q after 90 s, want COMPLETE", state)
}
