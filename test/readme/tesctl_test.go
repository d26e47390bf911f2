//go:build e2e

package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// placeholder is a <name> the pages leave to the reader.
var placeholder = regexp.MustCompile(`<[a-z_ ]+>`)

// runTesctlExamples runs the tesctl commands of the README and docs/
// (tesctlExamples) with tesctl built from cmd/tesctl and TES_URL the TES API
// at addr, as `make dev` serves it on localhost:8081: each exits 0 (for
// submit --wait and wait: the task ended COMPLETE) and prints what the page
// says it prints. The task the commands name is the one the first submit
// made.
func runTesctlExamples(t *testing.T, root, dir, addr string) {
	t.Helper()
	bin := filepath.Join(dir, "tesctl")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "tesctl")).CombinedOutput(); err != nil {
		t.Fatalf("build tesctl: %v\n%s", err, out)
	}
	id := ""
	for i, cmd := range tesctlExamples(t, root) {
		run := strings.ReplaceAll(cmd, "localhost:8081", addr)
		if id != "" {
			run = strings.ReplaceAll(strings.ReplaceAll(run, docTaskID, id), "<id>", id)
		}
		if p := placeholder.FindString(run); p != "" {
			t.Fatalf("tesctl example %d has a placeholder this test does not fill (%s): %s", i+1, p, cmd)
		}
		m := tesctlCall.FindStringSubmatchIndex(run)
		run = run[:m[3]] + bin + " " + run[m[1]:]
		code, stdout, stderr := runTesctl(t, root, addr, run)
		t.Logf("tesctl example %d: %s\nexit %d\n%s%s", i+1, cmd, code, stdout, stderr)
		if code != 0 {
			t.Fatalf("tesctl example %d exited %d: %s\n%s%s", i+1, code, cmd, stdout, stderr)
		}
		args := tesctlArgs(cmd)
		switch args[0] {
		case "submit":
			// It prints the id (with --wait, then waits for the task to
			// end COMPLETE, exit 0).
			got := strings.TrimSpace(stdout)
			if _, ok := taskmeta.IDTime(got); !ok {
				t.Errorf("tesctl example %d printed %q, want the id of the task it made", i+1, stdout)
			}
			if id == "" {
				id = got
			}
		case "wait":
			if stderr == "" {
				t.Errorf("tesctl example %d printed no progress line on stderr", i+1)
			}
		case "get":
			var v tesv1.Task
			if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.ID != id || v.State != tesv1.StateComplete || len(v.Logs) == 0 {
				t.Errorf("tesctl example %d: %v, want the FULL view of %s COMPLETE with its logs", i+1, err, id)
			}
		case "list":
			if !strings.HasPrefix(stdout, "ID") {
				t.Errorf("tesctl example %d printed no table: %q", i+1, stdout)
			}
		case "logs":
			if strings.Contains(cmd, "--follow") && !strings.Contains(stdout, "==> executor 1 ") {
				t.Errorf("tesctl example %d did not print the second executor's output: %q", i+1, stdout)
			}
		case "cancel":
			if strings.TrimSpace(stdout) != id+": cancel requested" {
				t.Errorf("tesctl example %d printed %q, want the request taken", i+1, stdout)
			}
		}
	}
	if id == "" {
		t.Fatal("no tesctl example submitted a task")
	}
}

// runTesctl runs a command line in root with TES_URL the TES API at addr
// and returns its exit code and output.
func runTesctl(t *testing.T, root, addr, run string) (int, string, string) {
	t.Helper()
	return runShell(t, root, []string{"TES_URL=http://" + addr}, run)
}

// runShell runs a command line with bash in root, with env added to the
// environment, and returns its exit code and output.
func runShell(t *testing.T, root string, env []string, run string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", run)
	sh.Dir = root
	sh.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &errb
	err := sh.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatalf("%s: %v", run, err)
	}
	return 0, out.String(), errb.String()
}
