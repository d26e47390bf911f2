//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
)

// On the real node, with the default executor context (executors may run
// as root), the outputs filer runs as root with exactly DAC_OVERRIDE,
// SETUID and SETGID, reads what a root executor wrote with mode 0600, and
// writes the shared file:// transfer volume only as the filer's user
// 65532 (behaviour §3.13): a task whose output names another user's file
// there (uid 1000, mode 0644), or a DIRECTORY or wildcard output into
// that user's directory, ends SYSTEM_ERROR naming its outputs filer's
// failure, the filer's log says why, and nothing of that user's changes;
// a task whose FILE, DIRECTORY and wildcard outputs are new files of its
// own there completes, its files the filer's user's.
func TestRealNodeOutputsFilerWritesAsTheFilersUser(t *testing.T) {
	const other = 1000
	dir := transferDir(t)
	settings := func(c *steps.Config) {
		c.TransferPVCName, c.HostBasePath, c.ContainerBasePath = transferPVC, dir, dir
		once := int32(0) // a refused upload is not tried again
		c.FilerBackoffLimit = &once
	}
	e := newRealEnv(t, 60*time.Second, settings)
	bindTransfer(t, e, dir)

	// Another user's directory and file on the transfer volume.
	theirs := filepath.Join(dir, "alice")
	victim := filepath.Join(theirs, "results.txt")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("alice's results\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{theirs, victim} {
		if err := os.Chown(p, other, other); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(p string) string {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return fmt.Sprintf("%d:%d %v", st.Uid, st.Gid, fi.Mode())
	}
	victimBefore := stat(victim)

	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{
		Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 16, Steps: settings,
		Storage: []string{"file://" + dir},
	})
	// A root executor whose files only their owner may read.
	const script = "umask 077 && mkdir -p /data/out/tree/sub /data/out/tree/empty /data/out/parts && " +
		"echo overwritten > /data/out/file.txt && echo a > /data/out/tree/a.txt && echo b > /data/out/tree/sub/b.txt && " +
		"echo x > /data/out/parts/x.log && echo y > /data/out/parts/y.log"
	task := func(name string, outputs ...any) map[string]any {
		return map[string]any{
			"name":      name,
			"volumes":   []any{"/data/out"},
			"outputs":   outputs,
			"executors": []any{map[string]any{"image": "busybox", "command": []any{"sh", "-c", script}}},
		}
	}
	file := func(url string) any {
		return map[string]any{"url": "file://" + url, "path": "/data/out/file.txt", "type": "FILE"}
	}
	tree := func(url string) any {
		return map[string]any{"url": "file://" + url, "path": "/data/out/tree", "type": "DIRECTORY"}
	}
	parts := func(url string) any {
		return map[string]any{"url": "file://" + url, "path": "/data/out/parts/*.log", "path_prefix": "/data/out/parts", "type": "FILE"}
	}
	// The TES API's helpers fail the test itself, so these are not subtests.
	refused := []struct{ name, id string }{
		{"over another user's file", api.create(task("over another user's file", file(victim)))},
		{"a DIRECTORY into another user's directory", api.create(task("a DIRECTORY into another user's directory", tree(theirs+"/tree")))},
		{"a wildcard into another user's directory", api.create(task("a wildcard into another user's directory", parts(theirs+"/parts")))},
		{"a new file in another user's directory", api.create(task("a new file in another user's directory", file(theirs+"/new.txt")))},
	}
	mine := filepath.Join(dir, "bob")
	own := api.create(task("new files of its own", file(mine+"/file.txt"), tree(mine+"/tree"), parts(mine+"/parts")))

	api.waitState(own, "COMPLETE", 4*time.Minute)
	filer := fmt.Sprintf("%d:%d", 65532, 65532)
	for p, want := range map[string]string{
		"file.txt": "overwritten\n", "tree/a.txt": "a\n", "tree/sub/b.txt": "b\n", "parts/x.log": "x\n", "parts/y.log": "y\n",
	} {
		got, err := os.ReadFile(filepath.Join(mine, p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
			continue
		}
		if s := stat(filepath.Join(mine, p)); !strings.HasPrefix(s, filer+" ") {
			t.Errorf("%s is %s, want the filer's user's (%s)", p, s, filer)
		}
	}
	if s := stat(filepath.Join(mine, "tree", "empty")); !strings.HasPrefix(s, filer+" d") {
		t.Errorf("the DIRECTORY output's empty directory is %s, want the filer's user's", s)
	}
	pods := e.podsOf(own + "-outputs-filer")
	if len(pods) == 0 {
		t.Fatal("the outputs filer has no pod")
	}
	wantCaps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_OVERRIDE", "SETGID", "SETUID"}}
	if sc := pods[0].Spec.Containers[0].SecurityContext; sc == nil || !reflect.DeepEqual(sc.Capabilities, wantCaps) {
		t.Errorf("the outputs filer's container context %+v, want capabilities %+v", sc, wantCaps)
	}

	for _, r := range refused {
		api.waitState(r.id, "SYSTEM_ERROR", 4*time.Minute)
		full := api.get(r.id, "FULL")
		var sys []string
		if logs, _ := full["logs"].([]any); len(logs) > 0 {
			for _, l := range logs[0].(map[string]any)["system_logs"].([]any) {
				sys = append(sys, l.(string))
			}
		}
		if msg := strings.Join(sys, "\n"); !strings.Contains(msg, r.id+"-outputs-filer' failed") {
			t.Errorf("%s: system_logs %q, want the outputs filer's failure", r.name, msg)
		}
		log := e.jobLog(r.id + "-outputs-filer")
		if !strings.Contains(log, "permission denied (file:// outputs are written as the filer's user 65532, group 65532)") {
			t.Errorf("%s: the outputs filer's log does not say why:\n%s", r.name, log)
		}
	}
	if got, err := os.ReadFile(victim); err != nil || string(got) != "alice's results\n" {
		t.Errorf("another user's file holds %q, %v", got, err)
	}
	if s := stat(victim); s != victimBefore {
		t.Errorf("another user's file is %s, was %s", s, victimBefore)
	}
	entries, err := os.ReadDir(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("another user's directory holds %v, want results.txt alone", entries)
	}
}
