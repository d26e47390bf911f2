//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/apicheck"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
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

// cli runs the tesctl binary with TES_URL set.
type cli struct {
	t        *testing.T
	bin, url string
	dir      string
}

func (c *cli) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "TES_URL="+c.url)
	return cmd
}

// run runs tesctl and returns its exit code, stdout and stderr.
func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	cmd := c.cmd(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		c.t.Fatalf("tesctl %v: %v", args, err)
	}
	return 0, out.String(), errb.String()
}

// ok runs tesctl and fails the test unless it exits 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	if code != 0 {
		c.t.Fatalf("tesctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// tesctl against the TES API and the handler as make dev runs them (the
// binaries, the Roles of config/knative, the ApiServerSource adapter), with
// every answer of the API held to its OpenAPI document on the way.
func TestTesctlAgainstTheLocalCluster(t *testing.T) {
	root, _ := filepath.Abs("../..")
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	dir := t.TempDir()
	for _, cmd := range []string{"handler", "tes", "tesctl"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), filepath.Join(root, "cmd", cmd)).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	logs, _ := os.Create(filepath.Join(dir, "logs"))
	s, err := devstack.Start(ctx, c, devstack.Options{Root: root, Namespace: "default", Port: freePort(t),
		Handler: filepath.Join(dir, "handler"), TES: filepath.Join(dir, "tes"), TESPort: freePort(t), Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	stop, err := c.SetLogsForSelector(ctx, "default", taskmeta.LabelTask, "HELLO FROM TES\n")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	checker, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(s.TESURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = checker.Transport(nil, func(err error) { t.Errorf("OpenAPI: %v", err) })
	ps := httptest.NewServer(proxy)
	defer ps.Close()
	x := &cli{t: t, bin: filepath.Join(dir, "tesctl"), url: ps.URL, dir: root}

	// The README's example task, submitted from its file, waited for, read.
	id := strings.TrimSpace(x.ok("submit", "examples/tes-task.json"))
	if !strings.HasPrefix(id, "task-") {
		t.Fatalf("submit printed %q", id)
	}
	code, _, progress := x.run("wait", id, "--interval", "200ms")
	if code != ExitComplete || !strings.Contains(progress, id+": COMPLETE") {
		t.Fatalf("wait: exit %d\n%s", code, progress)
	}
	var full map[string]any
	if err := json.Unmarshal([]byte(x.ok("get", id, "--view", "FULL")), &full); err != nil || full["state"] != "COMPLETE" || full["name"] != "hello-tes" {
		t.Errorf("get --view FULL: %v %v", err, full)
	}
	if out := x.ok("logs", id, "--executor", "1"); out != "HELLO FROM TES\n" {
		t.Errorf("logs --executor 1: %q", out)
	}
	if out := x.ok("logs", id); !strings.Contains(out, "==> executor 0 (exit code 0) <==\nHELLO FROM TES\n==> executor 1 (exit code 0) <==\nHELLO FROM TES\n") {
		t.Errorf("logs: %q", out)
	}

	// A failing executor: wait exits 2 and says why.
	failing := strings.TrimSpace(x.ok("submit", "--image", "fate.tesk.test/fail:3", "--name", "failing", "--", "false"))
	if code, _, errs := x.run("wait", failing, "--interval", "200ms"); code != ExitExecutorError || !strings.Contains(errs, failing+": EXECUTOR_ERROR") || !strings.Contains(errs, failing+": executor 0 exited with code 3") {
		t.Errorf("wait of a failing task: exit %d\n%s", code, errs)
	}

	// A running task, followed and waited for while it is cancelled.
	forever := strings.TrimSpace(x.ok("submit", "--image", "fate.tesk.test/forever", "--name", "forever", "--", "sleep", "3600"))
	waitCmd := x.cmd("wait", forever, "--interval", "200ms")
	var waitErr bytes.Buffer
	waitCmd.Stderr = &waitErr
	followCmd := x.cmd("logs", forever, "--follow", "--interval", "200ms")
	var followOut, followErr bytes.Buffer
	followCmd.Stdout, followCmd.Stderr = &followOut, &followErr
	if err := waitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := followCmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(x.ok("get", forever, "--view", "MINIMAL"), `"RUNNING"`) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is not RUNNING after 60 s", forever)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := x.ok("cancel", forever); out != forever+": cancel requested\n" {
		t.Errorf("cancel: %q", out)
	}
	werr := waitCmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != ExitCanceled || !strings.Contains(waitErr.String(), forever+": RUNNING") || !strings.Contains(waitErr.String(), forever+": CANCELED") {
		t.Errorf("wait of the cancelled task: %v\n%s", werr, waitErr.String())
	}
	if err := followCmd.Wait(); err != nil || !strings.Contains(followErr.String(), "waiting for executor 0") || !strings.Contains(followErr.String(), "ended CANCELED before executor 0 ran") {
		t.Errorf("logs --follow of the cancelled task: %v\n%s%s", err, followOut.String(), followErr.String())
	}

	// The short form with --wait; an unknown task.
	code, out, errs := x.run("submit", "--wait", "--image", "alpine", "--tag", "project=cli", "--", "echo", "hello")
	if code != 0 || !strings.HasPrefix(out, "task-") || !strings.Contains(errs, "COMPLETE") {
		t.Errorf("submit --wait: exit %d %q %q", code, out, errs)
	}
	if code, _, errs := x.run("get", "task-00000000"); code != ExitFailed || !strings.Contains(errs, "404 Not Found") {
		t.Errorf("get of an unknown task: exit %d %q", code, errs)
	}

	// The list's filters and pages over the namespace's four tasks, newest
	// first: the short form's (COMPLETE, project=cli), forever (CANCELED),
	// failing (EXECUTOR_ERROR) and the README's (COMPLETE, hello-tes,
	// project=demo).
	short := strings.TrimSpace(out)
	for _, c := range []struct {
		args []string
		want []string
		more bool // a next page's token on stderr
	}{
		{nil, []string{short, forever, failing, id}, false},
		{[]string{"--name-prefix", "hello-tes", "--tag", "project=demo"}, []string{id}, false},
		{[]string{"--tag", "project=cli"}, []string{short}, false},
		{[]string{"--tag", "project"}, []string{short, id}, false},
		{[]string{"--state", "EXECUTOR_ERROR"}, []string{failing}, false},
		{[]string{"--state", "canceled"}, []string{forever}, false},
		{[]string{"--state", "COMPLETE", "--name-prefix", "hello-tes"}, []string{id}, false},
		{[]string{"--state", "RUNNING"}, nil, false},
		{[]string{"--page-size", "2"}, []string{short, forever}, true},
		{[]string{"--all", "--page-size", "1"}, []string{short, forever, failing, id}, false},
	} {
		args := append([]string{"list"}, c.args...)
		code, out, errs := x.run(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) == 0 || !strings.HasPrefix(lines[0], "ID") {
			t.Errorf("tesctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
			continue
		}
		var got []string
		for _, l := range lines[1:] {
			got = append(got, strings.Fields(l)[0])
		}
		if !slices.Equal(got, c.want) || strings.Contains(errs, "--page-token") != c.more {
			t.Errorf("tesctl %s: tasks %v (more: %q), want %v (more: %v)", strings.Join(args, " "), got, errs, c.want, c.more)
		}
	}
	var page struct {
		Tasks []struct {
			ID, State string
		}
	}
	if err := json.Unmarshal([]byte(x.ok("list", "--state", "COMPLETE", "-o", "json")), &page); err != nil || len(page.Tasks) != 2 || page.Tasks[0].ID != short || page.Tasks[1].ID != id {
		t.Errorf("list --state COMPLETE -o json: %v %+v", err, page.Tasks)
	}
	t.Logf("OpenAPI: answers validated: %s", checker.Summary())
	if n := len(checker.Counts()); n < 5 {
		t.Errorf("only %d kinds of answers validated", n)
	}
	fmt.Fprintln(logs, "done")
}
