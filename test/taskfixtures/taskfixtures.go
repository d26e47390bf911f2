// Package taskfixtures holds the tasks the tests of the engine and of the
// job builders share: executors' jobs as the TESK API writes them, and tasks
// made of them. Tests only.
package taskfixtures

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// ExecutorSpec is an executor's job as the TESK API converts it.
func ExecutorSpec(i int, image string) batchv1.Job {
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

// TaskWith returns a task with n executors, changed by mods.
func TaskWith(n int, mods ...func(*taskspec.Task)) *taskspec.Task {
	t := &taskspec.Task{Resources: taskspec.Resources{DiskGB: 2}}
	for i := 0; i < n; i++ {
		t.Executors = append(t.Executors, ExecutorSpec(i, "alpine:3"))
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

// WithInput adds an https input file.
func WithInput(t *taskspec.Task) {
	t.Inputs = append(t.Inputs, taskspec.Input{URL: "https://example.org/in.txt", Path: "/data/in/in.txt", Type: taskspec.TypeFile})
}

// WithOutput adds an S3 output file.
func WithOutput(t *taskspec.Task) {
	t.Outputs = append(t.Outputs, taskspec.Output{URL: "s3://bucket/out.txt", Path: "/data/out/out.txt", Type: taskspec.TypeFile})
}

// WithVolume adds the volume /scratch.
func WithVolume(t *taskspec.Task) { t.Volumes = append(t.Volumes, "/scratch") }

// TESKAPIExecutor is an executor's job as the TESK API writes it with every
// option it has: the pod template named after the job, the executor
// secret, the pod security context from its ConfigMap, requests and limits,
// environment values, a working directory.
func TESKAPIExecutor() batchv1.Job {
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

// NoServiceAccountToken checks that a task's pod runs without a
// ServiceAccount token and without the Services' environment, as the
// ServiceAccount sa ("": the namespace's default).
func NoServiceAccountToken(t *testing.T, ps corev1.PodSpec, sa string) {
	t.Helper()
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v, want false", ps.AutomountServiceAccountToken)
	}
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		t.Errorf("enableServiceLinks %v, want false", ps.EnableServiceLinks)
	}
	if ps.ServiceAccountName != sa {
		t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, sa)
	}
}
