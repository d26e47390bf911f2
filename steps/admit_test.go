package steps

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// teskAPIExecutor is an executor's job as the TESK API writes it with every
// option it has (test/taskfixtures).
var teskAPIExecutor = taskfixtures.TESKAPIExecutor

func admitConfig() Config {
	cfg := DefaultConfig()
	cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: "tesk-creds", MountPath: "/secret"}
	return cfg
}

func TestAdmitRefusesEachForbiddenField(t *testing.T) {
	cfg := admitConfig()
	for _, c := range forbidden {
		t.Run(c.Name, func(t *testing.T) {
			j := teskAPIExecutor()
			c.Mod(&j)
			task := &taskspec.Task{Executors: []batchv1.Job{teskAPIExecutor(), j}}
			err := Admit(task, testNS, cfg)
			var refused *RefusedFieldError
			if !errors.As(err, &refused) {
				t.Fatalf("admitted, or %v", err)
			}
			if refused.Executor != 1 || !strings.Contains(refused.Field, c.Field) {
				t.Errorf("refused executors[%d] %s, want executors[1] %s", refused.Executor, refused.Field, c.Field)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "executors[1]: ") || !strings.Contains(msg, "is not allowed in an executor") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

func TestAdmitAcceptsWhatTheConvertersWrite(t *testing.T) {
	cases := []struct {
		name string
		job  func() batchv1.Job
		cfg  Config
	}{
		{"the TESK API's executor with its secret and security context", teskAPIExecutor, admitConfig()},
		{"the fixtures' executor", func() batchv1.Job { return executorSpec(0, "alpine") }, DefaultConfig()},
		{"a security context that takes rights away", func() batchv1.Job {
			j := executorSpec(0, "alpine")
			j.Spec.Template.Spec.Containers[0].SecurityContext = jobspec.DefaultFilerSecurityContext()
			j.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = ptr(int64(0))
			j.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptr(false)
			j.Spec.Template.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			return j
		}, DefaultConfig()},
		{"a backoff limit, one completion, the job's namespace", func() batchv1.Job {
			j := executorSpec(0, "alpine")
			j.Namespace = testNS
			j.Spec.BackoffLimit, j.Spec.Completions, j.Spec.Parallelism = ptr(int32(2)), ptr(int32(1)), ptr(int32(1))
			return j
		}, DefaultConfig()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := &taskspec.Task{Executors: []batchv1.Job{c.job()}}
			if err := Admit(task, testNS, c.cfg); err != nil {
				t.Fatal(err)
			}
			// And as JSON, as the anchor holds it.
			raw, _ := json.Marshal(task)
			decoded, err := taskspec.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := Admit(decoded, testNS, c.cfg); err != nil {
				t.Fatalf("after a JSON round trip: %v", err)
			}
		})
	}
	t.Run("EXECUTOR_POD_ANNOTATIONS: the keys and prefixes named, no other", func(t *testing.T) {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			return map[string]string{"EXECUTOR_POD_ANNOTATIONS": " cluster-autoscaler.kubernetes.io/safe-to-evict, fate.tesk.test/ ,"}[k]
		})
		if len(issues) > 0 {
			t.Fatal(issues)
		}
		j := executorSpec(0, "alpine")
		j.Spec.Template.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "fate.tesk.test/delay": "1s", "fate.tesk.test/result": "fail"}
		if err := Admit(&taskspec.Task{Executors: []batchv1.Job{j}}, testNS, cfg); err != nil {
			t.Errorf("allowed annotations refused: %v", err)
		}
		j.Spec.Template.Annotations["container.apparmor.security.beta.kubernetes.io/x"] = "unconfined"
		err := Admit(&taskspec.Task{Executors: []batchv1.Job{j}}, testNS, cfg)
		if err == nil || !strings.Contains(err.Error(), "spec.template.metadata.annotations.container.apparmor") || !strings.Contains(err.Error(), "EXECUTOR_POD_ANNOTATIONS") {
			t.Errorf("another annotation: %v, want a refusal naming it and EXECUTOR_POD_ANNOTATIONS", err)
		}
		if _, issues := LoadEnv(DefaultConfig(), func(k string) string { return map[string]string{"EXECUTOR_POD_ANNOTATIONS": "bad key!,ok/"}[k] }); len(issues) != 1 || issues[0].Name != "EXECUTOR_POD_ANNOTATIONS" {
			t.Errorf("issues %v, want one for the bad key", issues)
		}
	})
	t.Run("the executor secret without EXECUTOR_SECRET_NAME", func(t *testing.T) {
		err := Admit(&taskspec.Task{Executors: []batchv1.Job{teskAPIExecutor()}}, testNS, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), "EXECUTOR_SECRET_NAME is unset") {
			t.Errorf("%v, want a refusal naming EXECUTOR_SECRET_NAME", err)
		}
	})
}
