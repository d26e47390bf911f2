//go:build e2e

package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The log the containers of examples/tes-task.json print on a real node:
// the second executor the upper-cased greeting, the outputs filer the line
// of the files it uploaded.
const (
	exampleResult  = "HELLO FROM TES"
	exampleFileLog = `TESK_OUTPUT_FILE_LOGS [{"output":0,"path":"/data/out/result.txt","size_bytes":"15"}]`
	exampleOutput  = `[{"url":"s3://tes-results/hello-tes/result.txt","path":"/data/out/result.txt","size_bytes":"15"}]`
)

// runKubectlExamples runs the troubleshooting commands of kubectlPage
// (kubectlExamples) against the test's cluster c as a reader runs them
// against make dev's: in root, the page's export lines first (KUBECONFIG c's
// admin kubeconfig in place of .cluster/kubeconfig; PATH as the page sets
// it, which gives the kubectl of the cluster build), <task> a task of
// examples/tes-task.json submitted to the TES API at addr (namespace
// default) that ended COMPLETE, the block's curl at the handler's view at
// handler. The logs command runs for the filers too, as its comment says.
// Each exits 0 and prints what the page says it prints.
//
// It runs them on two tasks. On the first, kwok plays the pods without a
// log, as on make dev's kwok nodes: kubectl logs answers that there is none
// and the outputs filer's job has no record of the uploaded files, as the
// page says. On the second, kwok serves every pod of the task one log with
// what the containers print on a real node (the second executor's result,
// the outputs filer's TESK_OUTPUT_FILE_LOGS line): kubectl logs prints it,
// and the jsonpath the uploaded file the service read from it.
func runKubectlExamples(t *testing.T, root string, c *cluster.Cluster, addr, handler string) {
	t.Helper()
	var setup, cmds []string
	for _, cmd := range kubectlExamples(t, root) {
		code := withoutComment(cmd)
		switch {
		case strings.HasPrefix(code, "export KUBECONFIG="):
			setup = append(setup, "export KUBECONFIG='"+c.Kubeconfig+"'")
		case strings.HasPrefix(code, "export PATH="):
			if os.Getenv(cluster.CacheDirEnv) != "" {
				// The cluster's binaries are not where build.sh puts them.
				code = "export PATH='" + filepath.Join(c.CacheDir, "bin") + "':$PATH"
			}
			setup = append(setup, code)
		case strings.HasPrefix(code, "kubectl logs ") && strings.HasSuffix(code, "-ex-00"):
			cmds = append(cmds, code, strings.TrimSuffix(code, "ex-00")+"inputs-filer", strings.TrimSuffix(code, "ex-00")+"outputs-filer")
		default:
			cmds = append(cmds, code)
		}
	}
	prefix := strings.Join(setup, " && ") + " && "
	want := filepath.Join(c.CacheDir, "bin", "kubectl")
	if code, out, errs := runShell(t, root, nil, prefix+"command -v kubectl"); code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("after the export lines of %s, kubectl is %q (exit %d, %s), want the cluster build's %s", kubectlPage, out, code, errs, want)
	}
	for _, logs := range []bool{false, true} {
		id := submitExample(t, root, addr)
		if logs {
			stop, err := c.SetLogsForSelector(context.Background(), "default", taskmeta.LabelTask+"="+id, exampleResult+"\n"+exampleFileLog+"\n")
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
		}
		waitTESComplete(t, "http://"+addr+"/ga4gh/tes/v1/tasks/"+id)
		for i, cmd := range cmds {
			run := strings.ReplaceAll(strings.ReplaceAll(cmd, docTask, id), "localhost:8080", handler)
			code, stdout, stderr := runShell(t, root, nil, prefix+run)
			t.Logf("kubectl example %d (pods with a log: %v): %s\nexit %d\n%s%s", i+1, logs, run, code, stdout, stderr)
			if strings.HasPrefix(cmd, "kubectl logs ") {
				switch {
				case !logs && (code == 0 || !strings.Contains(stderr, "no logs found")):
					t.Errorf("kubectl example %d on kwok's pods without a log: exit %d, %q, want an error saying there is none", i+1, code, stderr)
				case logs && (code != 0 || !strings.Contains(stdout, exampleResult+"\n")):
					t.Errorf("kubectl example %d: exit %d, %q %q, want the pod's log", i+1, code, stdout, stderr)
				}
				continue
			}
			if code != 0 {
				t.Errorf("kubectl example %d exited %d: %s\n%s%s", i+1, code, run, stdout, stderr)
				continue
			}
			switch {
			case strings.HasPrefix(cmd, handlerViewExample):
				var view map[string]any
				if err := json.Unmarshal([]byte(stdout), &view); err != nil || view["id"] != id || view["state"] != tesv1.StateComplete {
					t.Errorf("kubectl example %d, the handler's view: %v %v, want the task %s COMPLETE:\n%s", i+1, view, err, id, stdout)
				}
			case strings.HasPrefix(cmd, "kubectl get configmap "):
				for _, w := range []string{"kind: ConfigMap", "  name: " + id + "\n", taskmeta.AnnotationProgress + ": ", taskmeta.AnnotationState + ": " + tesv1.StateComplete + "\n"} {
					if !strings.Contains(stdout, w) {
						t.Errorf("kubectl example %d: the anchor has no %q:\n%s", i+1, w, stdout)
					}
				}
			case strings.HasPrefix(cmd, "kubectl get jobs,pods,pvc "):
				for _, part := range []string{"inputs-filer", "ex-00", "ex-01", "outputs-filer"} {
					for _, w := range []string{"job.batch/" + id + "-" + part + " ", "pod/" + id + "-" + part + "-"} {
						if !strings.Contains(stdout, w) {
							t.Errorf("kubectl example %d lists no %s:\n%s", i+1, w, stdout)
						}
					}
				}
			case strings.Contains(cmd, "-o jsonpath="):
				if want := map[bool]string{false: "", true: exampleOutput}[logs]; stdout != want {
					t.Errorf("kubectl example %d printed %q, want %q", i+1, stdout, want)
				}
			default:
				t.Errorf("kubectl example %d: this test does not know what it prints: %s", i+1, cmd)
			}
		}
	}
}

// submitExample creates the task of examples/tes-task.json through the TES
// API at addr and returns its id.
func submitExample(t *testing.T, root, addr string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "examples", "tes-task.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/ga4gh/tes/v1/tasks", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created tesv1.CreateTaskResponse
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusOK || created.ID == "" {
		t.Fatalf("create the example task: %s, %v", resp.Status, err)
	}
	return created.ID
}
