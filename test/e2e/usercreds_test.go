//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
)

// bearerIsSubject authenticates a request as the subject its bearer token
// names (a stand-in for an issuer's verified token).
type bearerIsSubject struct{}

func (bearerIsSubject) Authenticate(r *http.Request) (tes.Caller, error) {
	sub, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || sub == "" {
		return tes.Caller{}, errors.New("no token")
	}
	return tes.Caller{Subject: sub, Label: tes.LabelSafe(sub)}, nil
}

// With credentials per user (FILER_USER_SECRET_PREFIX), on the real node
// against a real S3 server: alice's task moves its data with the keys of
// her own secret; bob, whose secret names the server but holds no keys,
// gets anonymous requests, which the server refuses, although the shared
// aws-secret and the pod's environment could lend him some; a user's
// task with a file:// URL is refused (behaviour §3.14).
func TestRealNodeCredentialsPerUser(t *testing.T) {
	ctx := context.Background()
	const prefix = "tesk-user-"
	e := newRealEnv(t, 60*time.Second, func(c *steps.Config) {
		c.UserSecretPrefix = prefix
		once := int32(0) // a refused filer is not tried again
		c.FilerBackoffLimit = &once
	})
	srv, err := s3server.StartOn(e.c.RealNode().HostIP)
	if err != nil {
		t.Fatalf("S3 server: %v", err)
	}
	defer srv.Stop()
	if err := srv.CreateBucket(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(ctx, "users", "in.txt", "shared input\n"); err != nil {
		t.Fatal(err)
	}
	e.awsSecret(srv) // the shared credentials: never used for a user's task
	config, credentials := srv.AWSConfig()
	alice := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: jobspec.UserSecretName(prefix, "alice"), Namespace: e.ns},
		StringData: map[string]string{"config": config, "credentials": credentials},
	}
	// Bob's secret names the server but holds no keys.
	bob := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: jobspec.UserSecretName(prefix, "bob"), Namespace: e.ns},
		StringData: map[string]string{"config": config},
	}
	for _, s := range []*corev1.Secret{alice, bob} {
		if _, err := e.c.Client.CoreV1().Secrets(e.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{
		Auth: bearerIsSubject{}, Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 16,
		Steps:   func(c *steps.Config) { c.UserSecretPrefix = prefix },
		Storage: []string{"s3://", "file:///transfer"},
	})
	task := func(out string) map[string]any {
		return map[string]any{
			"inputs":    []any{map[string]any{"url": "s3://users/in.txt", "path": "/data/in.txt"}},
			"outputs":   []any{map[string]any{"url": "s3://users/" + out, "path": "/data/out.txt"}},
			"executors": []any{map[string]any{"image": "busybox", "command": []any{"sh", "-c", "tr a-z A-Z < /data/in.txt > /data/out.txt"}}},
		}
	}

	api.token = "alice"
	aliceTask := api.create(task("alice.txt"))
	api.token = "bob"
	bobTask := api.create(task("bob.txt"))

	api.token = "alice"
	api.waitState(aliceTask, "COMPLETE", 3*time.Minute)
	if got, err := srv.Get(ctx, "users", "alice.txt"); err != nil || got != "SHARED INPUT\n" {
		t.Errorf("alice's output: %q, %v", got, err)
	}

	api.token = "bob"
	v := api.waitState(bobTask, "SYSTEM_ERROR", 3*time.Minute)
	full := api.get(bobTask, "FULL")
	logs, _ := full["logs"].([]any)
	var sys []string
	if len(logs) > 0 {
		for _, l := range logs[0].(map[string]any)["system_logs"].([]any) {
			sys = append(sys, l.(string))
		}
	}
	if msg := strings.Join(sys, "\n"); !strings.Contains(msg, bobTask+"-inputs-filer' failed") {
		t.Errorf("bob's task %v: system_logs %q, want its inputs filer's failure", v, msg)
	}
	if log := e.jobLog(bobTask + "-inputs-filer"); !strings.Contains(log, "AccessDenied") && !strings.Contains(log, "403") {
		t.Errorf("bob's inputs filer did not fail for want of credentials:\n%s", log)
	}
	if _, err := srv.Get(ctx, "users", "bob.txt"); err == nil {
		t.Error("bob's task uploaded an output")
	}

	api.token = "alice"
	withFile := task("never.txt")
	withFile["inputs"] = []any{map[string]any{"url": "file:///transfer/in.txt", "path": "/data/in.txt"}}
	if code, body := api.do(http.MethodPost, "/tasks", withFile); code != http.StatusBadRequest || !strings.Contains(string(body), "FILER_USER_SECRET_PREFIX") {
		t.Errorf("a user's task with a file:// URL: %d %s, want 400 naming FILER_USER_SECRET_PREFIX", code, body)
	}
}
