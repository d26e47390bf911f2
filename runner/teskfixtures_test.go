package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The TESK API's own fixtures, as the ConfigMaps it writes for them, run
// through the handler's submission with the settings docs/from-tesk.md
// gives for the TESK API's (its section "Settings that change what a task
// holds").
//
// They follow elixir-cloud-aai/tesk-api at 751d482 (2025-02-28):
// src/test/resources/fromTesToK8s/taskmaster_param.json and
// fromTesToK8s_minimal/taskmaster_param.json, the task JSON its converter
// writes (TesKubernetesConverter.fromTesTaskToK8sConfigMap) for
// fromTesToK8s/task.json and fromTesToK8s_minimal/task.json with the
// settings of TesKubernetesConverterTest: the executor secret `mysecret`
// mounted at `/etc/secret` (TESK_API_TASKMASTER_EXECUTOR_SECRET_NAME,
// TESK_API_TASKMASTER_EXECUTOR_SECRET_MOUNT_PATH), and the pod security
// context read from its ConfigMap (CONFIGMAP, CONFIGMAPKEY: fsGroup 1000,
// runAsUser 1001, runAsGroup 1002, nonRoot). The executors below are built
// as its KubernetesObjectsSupplier.executorTemplate and
// fromTesExecutorToK8sJob build them.

// teskAPISettings are the TESK API's settings that change what it writes
// into a task's executors.
type teskAPISettings struct {
	secretName, secretMount string         // executor-secret.name, .mount-path
	podSecurity             map[string]any // from CONFIGMAP's key, or nil
}

// teskAPIExecutorJSON is executor i of task as the TESK API writes it.
func teskAPIExecutorJSON(s teskAPISettings, task, tesName string, i int, image string, command []string, env [][2]string, workdir string, resources map[string]any) map[string]any {
	name := fmt.Sprintf("%s-ex-%02d", task, i)
	container := map[string]any{"name": name, "image": image, "command": command, "resources": resources}
	if len(env) > 0 {
		var e []map[string]string
		for _, kv := range env {
			e = append(e, map[string]string{"name": kv[0], "value": kv[1]})
		}
		container["env"] = e
	}
	if workdir != "" {
		container["workingDir"] = workdir
	}
	pod := map[string]any{"containers": []any{container}, "restartPolicy": "Never"}
	if s.secretName != "" {
		container["volumeMounts"] = []any{map[string]any{"name": s.secretName, "mountPath": s.secretMount, "readOnly": true}}
		pod["volumes"] = []any{map[string]any{"name": s.secretName, "secret": map[string]any{"secretName": s.secretName}}}
	}
	if s.podSecurity != nil {
		pod["securityContext"] = s.podSecurity
	}
	annotations := map[string]string{}
	if tesName != "" {
		annotations["tes-task-name"] = tesName
	}
	return map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata": map[string]any{
			"name":        name,
			"annotations": annotations,
			"labels": map[string]string{
				"job-type": "executor", "taskmaster-name": task,
				"executor-no": fmt.Sprint(i), "creator-user-id": "test-user-id",
			},
		},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     pod,
		}},
	}
}

// teskAPIFullTask is fromTesToK8s's task as the TESK API writes it with s.
func teskAPIFullTask(s teskAPISettings) (string, []byte) {
	const task = "task-35605447"
	res := map[string]any{"requests": map[string]string{"cpu": "4", "memory": "16106127360"}, "limits": map[string]string{"cpu": "4"}}
	body := map[string]any{
		"outputs": []any{
			map[string]any{"url": "/path/to/output_file.txt", "path": "/tes/output.txt", "type": "FILE"},
			map[string]any{"url": "/path/to/output", "path": "/outputs/output", "type": "DIRECTORY"},
		},
		"inputs": []any{
			map[string]any{"name": "input1", "description": "Example", "url": "ftp://example.org/resource.txt", "path": "/some/volume/input.txt", "type": "FILE"},
			map[string]any{"url": "http://example.org/resources", "path": "/tes/volumes/input", "type": "DIRECTORY"},
			map[string]any{"content": "aaabbbcccddd", "path": "/container/input/other.txt", "type": "FILE"},
		},
		"volumes": []string{"/tmp/tmp1", "/tmp/tmp2"},
		"executors": []any{
			teskAPIExecutorJSON(s, task, "taskFull", 0, "ubuntu", []string{"/bin/sh", "-c", "echo 'hello world' > /tmp/stdout"}, nil, "", res),
			teskAPIExecutorJSON(s, task, "taskFull", 1, "alpine", []string{"/bin/sh", "-c", "sh -c 'md5sum $src' > /tes/output.txt 2> /tes/err.txt"},
				[][2]string{{"src", "/container/input/other.txt"}, {"sth", "sthElse"}}, "/starthere", res),
		},
		"resources": map[string]any{"disk_gb": 100},
	}
	raw, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return task, raw
}

// teskAPIMinimalTask is fromTesToK8s_minimal's task as the TESK API writes
// it with s.
func teskAPIMinimalTask(s teskAPISettings) (string, []byte) {
	const task = "task-98605447"
	body := map[string]any{
		"outputs": []any{}, "inputs": []any{}, "volumes": []any{},
		"executors": []any{teskAPIExecutorJSON(s, task, "", 0, "ubuntu", []string{"echo", "hello world"}, nil, "", map[string]any{})},
		"resources": map[string]any{"disk_gb": 0.1},
	}
	raw, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return task, raw
}

// teskAPIConfigMap is the ConfigMap the TESK API writes for a task: named
// as the task, annotated with the TES name, labelled with its creator and
// group, the task JSON gzipped under JSON_INPUT.gz; not labelled
// taskmaster-name.
func teskAPIConfigMap(task string, raw []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: task, Namespace: taskfixtures.Namespace,
			Annotations: map[string]string{"tes-task-name": "taskFull"},
			Labels:      map[string]string{"creator-user-id": "test-user-id", "creator-group-name": "ABC"},
		},
		BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)},
	}
}

// teskTESKAPIDeployment is the TESK API of TesKubernetesConverterTest: an
// executor secret and a pod security context.
var teskTESKAPIDeployment = teskAPISettings{
	secretName: "mysecret", secretMount: "/etc/secret",
	podSecurity: map[string]any{"fsGroup": 1000, "runAsGroup": 1002, "runAsNonRoot": true, "runAsUser": 1001},
}

// handlerConfig is the handler's configuration from environment variables,
// as the handler reads them at start.
func handlerConfig(t *testing.T, env map[string]string) steps.Config {
	t.Helper()
	cfg, issues := steps.LoadEnv(steps.DefaultConfig(), func(k string) string { return env[k] })
	if len(issues) > 0 {
		t.Fatalf("settings %v: %v", env, issues)
	}
	return cfg
}

// deployedRunner is a runner as deployed: the task read from its ConfigMap,
// events taken as hints.
func deployedRunner(api *fakeAPI, cfg steps.Config) *Runner {
	r := testRunner(api, cfg)
	r.Config.TrustEvents = false
	return r
}

// finish marks a job of the task complete and steps the task as its
// job.finished event does.
func finish(t *testing.T, api *fakeAPI, r *Runner, task, part, event string) {
	t.Helper()
	ctx := testCtx(t)
	j := api.jobNamed(t, taskfixtures.Namespace, taskmeta.ObjectName(task, part))
	j.Status.Conditions = append(j.Status.Conditions, taskfixtures.Cond("Complete", taskfixtures.Now))
	if _, err := api.BatchV1().Jobs(taskfixtures.Namespace).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, task, Options{Event: event, Job: j.Name}); err != nil {
		t.Fatalf("%s finished: %v", part, err)
	}
}

// secretMounted says whether a job's pod mounts the secret, read-only at
// mount, in each of its containers.
func secretMounted(api *fakeAPI, t *testing.T, task, part, secret, mount string) error {
	j := api.jobNamed(t, taskfixtures.Namespace, taskmeta.ObjectName(task, part))
	ps := j.Spec.Template.Spec
	found := false
	for _, v := range ps.Volumes {
		if v.Name == secret && v.Secret != nil && v.Secret.SecretName == secret {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%s: no volume of the secret %q in %+v", part, secret, ps.Volumes)
	}
	for _, c := range ps.Containers {
		n := 0
		for _, m := range c.VolumeMounts {
			if m.Name == secret {
				n++
				if m.MountPath != mount || !m.ReadOnly {
					return fmt.Errorf("%s: the secret is mounted %+v, want read-only at %s", part, m, mount)
				}
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: container %s mounts the secret %d times, want once: %+v", part, c.Name, n, c.VolumeMounts)
		}
	}
	return nil
}

// TestTESKAPIFixturesRun: the TESK API's tasks start with the settings
// docs/from-tesk.md maps its settings to, and one it wrote with its
// executor secret is refused, naming the setting, without them.
func TestTESKAPIFixturesRun(t *testing.T) {
	ctx := testCtx(t)
	// docs/from-tesk.md: TESK_API_TASKMASTER_EXECUTOR_SECRET_NAME and
	// _MOUNT_PATH → EXECUTOR_SECRET_NAME and EXECUTOR_SECRET_MOUNT_PATH, the
	// same name and path.
	mapped := map[string]string{"EXECUTOR_SECRET_NAME": "mysecret", "EXECUTOR_SECRET_MOUNT_PATH": "/etc/secret"}

	t.Run("fromTesToK8s with its executor secret, the handler's set the same: it runs, the secret in every executor", func(t *testing.T) {
		task, raw := teskAPIFullTask(teskTESKAPIDeployment)
		api := newFakeAPI(t, teskAPIConfigMap(task, raw))
		r := deployedRunner(api, handlerConfig(t, mapped))
		res, err := r.Submit(ctx, taskfixtures.Namespace, task, nil, "ev-1")
		if err != nil || res.Ended != "" {
			t.Fatalf("submission: %+v %v, want the task started", res, err)
		}
		if api.jobNamed(t, taskfixtures.Namespace, taskmeta.ObjectName(task, taskmeta.PartInputsFiler)) == nil {
			t.Fatal("no inputs filer")
		}
		finish(t, api, r, task, taskmeta.PartInputsFiler, "ev-2")
		finish(t, api, r, task, "ex-00", "ev-3")
		for _, part := range []string{"ex-00", "ex-01"} {
			if err := secretMounted(api, t, task, part, "mysecret", "/etc/secret"); err != nil {
				t.Error(err)
			}
			// The pod security context the TESK API read from its
			// ConfigMap is the executor's: no setting of the handler's.
			sc := api.jobNamed(t, taskfixtures.Namespace, taskmeta.ObjectName(task, part)).Spec.Template.Spec.SecurityContext
			if sc == nil || sc.FSGroup == nil || *sc.FSGroup != 1000 || sc.RunAsUser == nil || *sc.RunAsUser != 1001 ||
				sc.RunAsGroup == nil || *sc.RunAsGroup != 1002 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s: pod security context %+v, want the TESK API's (fsGroup 1000, user 1001, group 1002, non-root)", part, sc)
			}
		}
		finish(t, api, r, task, "ex-01", "ev-4")
		finish(t, api, r, task, taskmeta.PartOutputsFiler, "ev-5")
		if st := api.configMap(t, task).Labels[taskmeta.LabelState]; st != tesv1.StateComplete {
			t.Errorf("the task ended %q, want %s", st, tesv1.StateComplete)
		}
	})

	t.Run("fromTesToK8s with its executor secret, the handler's at another path: the TESK API's tasks keep the TESK API's path", func(t *testing.T) {
		task, raw := teskAPIFullTask(teskTESKAPIDeployment)
		api := newFakeAPI(t, teskAPIConfigMap(task, raw))
		r := deployedRunner(api, handlerConfig(t, map[string]string{"EXECUTOR_SECRET_NAME": "mysecret", "EXECUTOR_SECRET_MOUNT_PATH": "/secret"}))
		if res, err := r.Submit(ctx, taskfixtures.Namespace, task, nil, "ev-1"); err != nil || res.Ended != "" {
			t.Fatalf("submission: %+v %v, want the task started", res, err)
		}
		finish(t, api, r, task, taskmeta.PartInputsFiler, "ev-2")
		if err := secretMounted(api, t, task, "ex-00", "mysecret", "/etc/secret"); err != nil {
			t.Error(err)
		}
	})

	refusals := []struct {
		name string
		env  map[string]string
		want []string // in the error and in the reason on the anchor
	}{
		{"unset", nil, []string{"EXECUTOR_SECRET_NAME is unset", `volumeMounts[0]`, `"/etc/secret"`, `asks for secret "mysecret": EXECUTOR_SECRET_NAME=mysecret allows it`}},
		{"another secret", map[string]string{"EXECUTOR_SECRET_NAME": "other", "EXECUTOR_SECRET_MOUNT_PATH": "/etc/secret"}, []string{`executor secret "other"`, "(EXECUTOR_SECRET_NAME)", `asks for secret "mysecret"`}},
	}
	for _, c := range refusals {
		t.Run("fromTesToK8s with its executor secret, EXECUTOR_SECRET_NAME "+c.name+": SYSTEM_ERROR naming the setting, nothing created", func(t *testing.T) {
			task, raw := teskAPIFullTask(teskTESKAPIDeployment)
			api := newFakeAPI(t, teskAPIConfigMap(task, raw))
			r := deployedRunner(api, handlerConfig(t, c.env))
			res, err := r.Submit(ctx, taskfixtures.Namespace, task, nil, "ev-1")
			if !invalid.Is(err) {
				t.Fatalf("submission: %+v %v, want a refusal (400)", res, err)
			}
			if res.Ended != tesv1.StateSystemError {
				t.Errorf("the step ended the task %q, want %s", res.Ended, tesv1.StateSystemError)
			}
			cm := api.configMap(t, task)
			reason := cm.Annotations[taskmeta.AnnotationReason]
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(reason, w) {
					t.Errorf("error %q, reason %q: want both to name %q", err, reason, w)
				}
			}
			if st := cm.Labels[taskmeta.LabelState]; st != tesv1.StateSystemError {
				t.Errorf("the anchor's state %q, want %s", st, tesv1.StateSystemError)
			}
			if n := api.count("create", "jobs", "") + api.count("create", "persistentvolumeclaims", ""); n != 0 {
				t.Errorf("%d jobs or PVCs created, want none", n)
			}
		})
	}

	t.Run("fromTesToK8s written without an executor secret: it runs with the handler's unset, and with it set gets the handler's", func(t *testing.T) {
		for _, env := range []map[string]string{nil, mapped} {
			task, raw := teskAPIFullTask(teskAPISettings{})
			api := newFakeAPI(t, teskAPIConfigMap(task, raw))
			r := deployedRunner(api, handlerConfig(t, env))
			if res, err := r.Submit(ctx, taskfixtures.Namespace, task, nil, "ev-1"); err != nil || res.Ended != "" {
				t.Fatalf("settings %v: %+v %v, want the task started", env, res, err)
			}
			finish(t, api, r, task, taskmeta.PartInputsFiler, "ev-2")
			err := secretMounted(api, t, task, "ex-00", "mysecret", "/etc/secret")
			if env == nil && err == nil {
				t.Error("settings unset: the executor mounts a secret")
			}
			if env != nil && err != nil {
				t.Errorf("settings %v: %v", env, err)
			}
		}
	})

	t.Run("fromTesToK8s_minimal: it runs with the settings and without", func(t *testing.T) {
		for _, env := range []map[string]string{nil, mapped} {
			task, raw := teskAPIMinimalTask(teskAPISettings{})
			api := newFakeAPI(t, teskAPIConfigMap(task, raw))
			r := deployedRunner(api, handlerConfig(t, env))
			if res, err := r.Submit(ctx, taskfixtures.Namespace, task, nil, "ev-1"); err != nil || res.Ended != "" {
				t.Fatalf("settings %v: %+v %v, want the task started", env, res, err)
			}
			if api.jobNamed(t, taskfixtures.Namespace, taskmeta.ObjectName(task, "ex-00")) == nil {
				t.Fatalf("settings %v: no executor job", env)
			}
		}
	})
}
