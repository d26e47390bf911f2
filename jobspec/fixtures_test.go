package jobspec

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Fixtures shared by the tests of the package: a task as the TESK API
// passes it and its anchor (as package steps' tests have them).

const (
	testTask = "task-1234abcd"
	testNS   = "tesk"
	testUID  = types.UID("0b5c2f7e-anchor")
)

var testAnchor = taskmeta.Anchor{Name: testTask, Namespace: testNS, UID: testUID}

// executorSpec is an executor's job as the TESK API converts it.
func executorSpec(i int, image string) batchv1.Job {
	return batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "api-given-name",
			Labels:      map[string]string{"job-type": "executor", "executor-no": "99", "creator-user-id": "user-1"},
			Annotations: map[string]string{"tes-task-name": "hello"},
		},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"creator-user-id": "user-1"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    "task-1234abcd-ex-" + string(rune('0'+i)),
						Image:   image,
						Command: []string{"sh", "-c", "echo hello"},
					}},
				},
			},
		},
	}
}

// taskWith returns a task with n executors, changed by mods.
func taskWith(n int, mods ...func(*taskspec.Task)) *taskspec.Task {
	t := &taskspec.Task{Resources: taskspec.Resources{DiskGB: 2}}
	for i := 0; i < n; i++ {
		t.Executors = append(t.Executors, executorSpec(i, "alpine:3"))
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

func withInput(t *taskspec.Task) {
	t.Inputs = append(t.Inputs, taskspec.Input{URL: "https://example.org/in.txt", Path: "/data/in/in.txt", Type: taskspec.TypeFile})
}

func withOutput(t *taskspec.Task) {
	t.Outputs = append(t.Outputs, taskspec.Output{URL: "s3://bucket/out.txt", Path: "/data/out/out.txt", Type: taskspec.TypeFile})
}

func withVolume(t *taskspec.Task) { t.Volumes = append(t.Volumes, "/scratch") }

// teskAPIExecutor is an executor's job as the TESK API writes it with every
// option it has: the pod template named after the job, the executor
// secret, the pod security context from its ConfigMap, requests and limits,
// environment values, a working directory.
func teskAPIExecutor() batchv1.Job {
	uid, gid := int64(1000), int64(1000)
	yes := true
	return batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "task-1234abcd-ex-00",
			Labels:      map[string]string{"job-type": "executor", "taskmaster-name": "task-1234abcd", "executor-no": "0", "creator-user-id": "alice"},
			Annotations: map[string]string{"tes-task-name": "align"},
		},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "task-1234abcd-ex-00"},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &gid, RunAsNonRoot: &yes},
				Containers: []corev1.Container{{
					Name:       "task-1234abcd-ex-00",
					Image:      "quay.io/biocontainers/bwa:0.7.17",
					Command:    []string{"/bin/sh", "-c", "bwa index /data/ref.fa > /data/out.txt"},
					Env:        []corev1.EnvVar{{Name: "THREADS", Value: "4"}},
					WorkingDir: "/data",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: "tesk-creds", MountPath: "/secret", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "tesk-creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tesk-creds"}}}},
			},
		}},
	}
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func ptr[T any](v T) *T { return &v }

func i64(v int64) *int64 { return &v }

func wantInt32(t *testing.T, name string, p *int32, want int32) {
	t.Helper()
	if p == nil || *p != want {
		t.Errorf("%s = %v, want %d", name, p, want)
	}
}

func wantOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: testTask, UID: testUID}}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("owner references %+v, want the anchor %+v", refs, want)
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func hasMount(c corev1.Container, name, at string, readOnly bool) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name && m.MountPath == at && m.ReadOnly == readOnly {
			return true
		}
	}
	return false
}

func hasSecretVolume(ps corev1.PodSpec, name, secret string, optional bool) bool {
	for _, v := range ps.Volumes {
		if v.Name == name && v.Secret != nil && v.Secret.SecretName == secret {
			return (v.Secret.Optional != nil && *v.Secret.Optional) == optional
		}
	}
	return false
}
