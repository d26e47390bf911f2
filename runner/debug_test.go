package runner

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/logging"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// behaviour §2: with --debug each job created is logged as a manifest, with
// URLs shown without queries and user info, and the FTP credentials hidden.
func TestDebugLogsJobManifests(t *testing.T) {
	spec := taskfixtures.TaskWith(1, taskfixtures.WithInput)
	spec.Executors[0].Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "curl -fsS 'https://alice:pa55@data.example.org/in.txt?X-Amz-Signature=abc123' > /data/in.txt"}
	spec.Executors[0].Spec.Template.Spec.Containers[0].Args = []string{"ftp://bob:secret@ftp.example.org/x"}
	raw, _ := json.Marshal(spec)

	cfg := steps.DefaultConfig()
	cfg.Debug = true
	cfg.FTPUsername, cfg.FTPPassword = "ftp-user-1", "ftp-password-1"
	core, logs := observer.New(zapcore.DebugLevel)
	ctx := logging.WithLogger(context.Background(), zap.New(core).Sugar())

	api := newFakeAPI(t)
	r := testRunner(api, cfg)
	if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
		t.Fatal(err)
	}
	// The inputs filer has passed: the executor's job comes next.
	filer := api.job(taskmeta.PartInputsFiler)
	filer.Status.Conditions = append(filer.Status.Conditions, taskfixtures.Cond("Complete", taskfixtures.Now))
	if _, err := api.BatchV1().Jobs(taskfixtures.Namespace).UpdateStatus(ctx, filer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", Job: filer.Name}); err != nil {
		t.Fatal(err)
	}

	manifests := map[string]string{}
	for _, e := range logs.FilterMessage("Created job").All() {
		if e.Level != zapcore.DebugLevel {
			t.Errorf("a job created with --debug is logged at %s", e.Level)
		}
		m := e.ContextMap()
		manifests[m["job"].(string)], _ = m["manifest"].(string)
	}
	exec, filerManifest := manifests[taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")], manifests[taskmeta.ObjectName(taskfixtures.TaskName, taskmeta.PartInputsFiler)]
	if exec == "" || filerManifest == "" {
		t.Fatalf("manifests logged for %v, want the filer's and the executor's", manifests)
	}
	for _, secret := range []string{"pa55", "alice", "X-Amz-Signature", "abc123", "bob", "secret@", "ftp-user-1", "ftp-password-1"} {
		for name, m := range manifests {
			if strings.Contains(m, secret) {
				t.Errorf("the manifest of %s shows %q:\n%s", name, secret, m)
			}
		}
	}
	for _, want := range []string{"https://data.example.org/in.txt", "ftp://ftp.example.org/x", "image: alpine:3"} {
		if !strings.Contains(exec, want) {
			t.Errorf("the executor's manifest lacks %q:\n%s", want, exec)
		}
	}
	if !strings.Contains(filerManifest, "name: TESK_FTP_PASSWORD\n          value: <hidden>") {
		t.Errorf("the filer's manifest does not show the FTP password as hidden:\n%s", filerManifest)
	}
	// The job itself is created as it is.
	if c := api.job("ex-00").Spec.Template.Spec.Containers[0]; !strings.Contains(c.Command[2], "pa55") {
		t.Errorf("the created job's command was changed: %q", c.Command)
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"curl 'https://u:p@h.org/a?sig=1' -o x":       "curl 'https://h.org/a' -o x",
		"s3://bucket/key?versionId=3 and ftp://a@b/c": "s3://bucket/key and ftp://b/c",
		"no url here": "no url here",
	} {
		if got := taskspec.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
