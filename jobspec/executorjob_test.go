package jobspec

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestExecutorJob(t *testing.T) {
	t.Run("behaviour §1.4: name, labels, owner and pod template label as TESK's", func(t *testing.T) {
		task := taskWith(2)
		j := ExecutorJob(testAnchor, task, 1, DefaultConfig())
		if j.Name != testTask+"-ex-01" || j.Namespace != testNS {
			t.Errorf("job %s/%s", j.Namespace, j.Name)
		}
		for k, v := range map[string]string{taskmeta.LabelTask: testTask, taskmeta.LabelJobType: "executor", taskmeta.LabelExecutorNo: "1", taskmeta.LabelCreator: "user-1"} {
			if j.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, j.Labels[k], v)
			}
		}
		if j.Spec.Template.Labels[taskmeta.LabelTask] != testTask || j.Spec.Template.Labels[taskmeta.LabelCreator] != "user-1" {
			t.Errorf("pod template labels %v", j.Spec.Template.Labels)
		}
		if j.Annotations[taskmeta.AnnotationTaskName] != "hello" {
			t.Errorf("annotations %v: the TESK API's are kept", j.Annotations)
		}
		wantOwner(t, j.OwnerReferences)
		if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("restart policy %s", j.Spec.Template.Spec.RestartPolicy)
		}
		if task.Executors[1].Name != "api-given-name" || task.Executors[1].Labels[taskmeta.LabelTask] != "" {
			t.Error("building the job changed the task")
		}
	})

	t.Run("behaviour §1.2: requests become limits when there are no limits", func(t *testing.T) {
		task := taskWith(1)
		req := corev1.ResourceList{corev1.ResourceCPU: quantity("1"), corev1.ResourceMemory: quantity("1Gi")}
		task.Executors[0].Spec.Template.Spec.Containers[0].Resources.Requests = req
		c := ExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if !reflect.DeepEqual(c.Resources.Limits, req) || !reflect.DeepEqual(c.Resources.Requests, req) {
			t.Errorf("resources %+v, want the requests as limits", c.Resources)
		}
		if len(task.Executors[0].Spec.Template.Spec.Containers[0].Resources.Limits) != 0 {
			t.Error("building the job changed the task's resources")
		}
	})

	t.Run("behaviour §1.2: limits that are set are kept", func(t *testing.T) {
		task := taskWith(1)
		res := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("1"), corev1.ResourceMemory: quantity("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: quantity("2Gi")},
		}
		task.Executors[0].Spec.Template.Spec.Containers[0].Resources = res
		c := ExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if !reflect.DeepEqual(c.Resources, res) {
			t.Errorf("resources %+v, want %+v", c.Resources, res)
		}
	})

	t.Run("behaviour §1.2: no requests, no limits", func(t *testing.T) {
		c := ExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if c.Resources.Limits != nil || c.Resources.Requests != nil {
			t.Errorf("resources %+v, want none", c.Resources)
		}
	})

	backoff := []struct {
		name string
		env  *int32
		job  *int32
		want int32
	}{
		{"behaviour §1.17: EXECUTOR_BACKOFF_LIMIT sets the executors' backoffLimit", ptr(int32(2)), nil, 2},
		{"behaviour §1.17: EXECUTOR_BACKOFF_LIMIT overrides the job's own limit", ptr(int32(0)), ptr(int32(4)), 0},
		{"behaviour §1.17: without EXECUTOR_BACKOFF_LIMIT the job's own limit is kept", nil, ptr(int32(3)), 3},
		{"behaviour §1.17: without either, executors aren't retried (backoffLimit 0)", nil, nil, 0},
	}
	for _, c := range backoff {
		t.Run(c.name, func(t *testing.T) {
			task := taskWith(1)
			task.Executors[0].Spec.BackoffLimit = c.job
			cfg := DefaultConfig()
			cfg.ExecutorBackoffLimit = c.env
			j := ExecutorJob(testAnchor, task, 0, cfg)
			wantInt32(t, "backoffLimit", j.Spec.BackoffLimit, c.want)
		})
	}

	t.Run("behaviour §1.1: each volume and each input and output directory (a DIRECTORY's own path, a FILE's parent) is a subPath of the PVC at its path", func(t *testing.T) {
		task := taskWith(1, func(tk *taskspec.Task) {
			tk.Volumes = []string{"/scratch", "/data/in"}
			tk.Inputs = []taskspec.Input{
				{URL: "https://e.org/a", Path: "/data/in/a.txt"},
				{URL: "https://e.org/ref/", Path: "/ref/genome", Type: taskspec.TypeDirectory},
			}
			tk.Outputs = []taskspec.Output{
				{URL: "s3://b/o", Path: "/data/out/o.txt"},
				{URL: "s3://b/w/", Path: "/results/*/run-?.txt", PathPrefix: "/results"},
				{URL: "s3://b/d/", Path: "/work/sub/deep/*.bam", PathPrefix: "/work/sub"},
			}
		})
		j := ExecutorJob(testAnchor, task, 0, DefaultConfig())
		want := []corev1.VolumeMount{
			{Name: "task-volume", MountPath: "/data/in", SubPath: "data/in"},
			{Name: "task-volume", MountPath: "/data/out", SubPath: "data/out"},
			{Name: "task-volume", MountPath: "/ref/genome", SubPath: "ref/genome"},
			{Name: "task-volume", MountPath: "/results", SubPath: "results"},
			{Name: "task-volume", MountPath: "/scratch", SubPath: "scratch"},
			{Name: "task-volume", MountPath: "/work/sub/deep", SubPath: "work/sub/deep"},
		}
		if got := j.Spec.Template.Spec.Containers[0].VolumeMounts; !reflect.DeepEqual(got, want) {
			t.Errorf("mounts\n%+v\nwant\n%+v", got, want)
		}
		wantVol := []corev1.Volume{{Name: "task-volume", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: testTask + "-pvc"},
		}}}
		if got := j.Spec.Template.Spec.Volumes; !reflect.DeepEqual(got, wantVol) {
			t.Errorf("volumes %+v, want %+v", got, wantVol)
		}
	})

	t.Run("behaviour §1.1: a wildcard output is mounted at the pattern's deepest directory without wildcards", func(t *testing.T) {
		task := taskWith(1, func(tk *taskspec.Task) {
			tk.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/data/*/out.txt", PathPrefix: "/data"}}
		})
		mounts := ExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0].VolumeMounts
		want := []corev1.VolumeMount{{Name: "task-volume", MountPath: "/data", SubPath: "data"}}
		if !reflect.DeepEqual(mounts, want) {
			t.Errorf("mounts %+v, want %+v", mounts, want)
		}
	})

	t.Run("behaviour §1.1: without inputs, outputs or volumes nothing is mounted", func(t *testing.T) {
		ps := ExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec
		if len(ps.Volumes) != 0 || len(ps.Containers[0].VolumeMounts) != 0 {
			t.Errorf("volumes %+v, mounts %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
		}
	})
}

// Executor jobs run a pod the cluster took away again without spending
// their retries (a pod failure policy); a job whose pods restart in place
// cannot have one, and a job's own policy is kept.
func TestExecutorJobsIgnoreDisruptions(t *testing.T) {
	a := taskmeta.Anchor{Name: testTask, Namespace: testNS, UID: "u"}
	j := ExecutorJob(a, taskWith(1), 0, DefaultConfig())
	pfp := j.Spec.PodFailurePolicy
	if pfp == nil || len(pfp.Rules) != 1 || pfp.Rules[0].Action != batchv1.PodFailurePolicyActionIgnore ||
		len(pfp.Rules[0].OnPodConditions) != 1 || pfp.Rules[0].OnPodConditions[0].Type != corev1.DisruptionTarget {
		t.Fatalf("podFailurePolicy %+v, want Ignore on DisruptionTarget", pfp)
	}
	onFailure := taskWith(1)
	onFailure.Executors[0].Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	if j := ExecutorJob(a, onFailure, 0, DefaultConfig()); j.Spec.PodFailurePolicy != nil {
		t.Errorf("restartPolicy OnFailure with a pod failure policy %+v: the API server refuses it", j.Spec.PodFailurePolicy)
	}
	own := taskWith(1)
	own.Executors[0].Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}}}}
	if j := ExecutorJob(a, own, 0, DefaultConfig()); j.Spec.PodFailurePolicy.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob {
		t.Errorf("the job's own policy was replaced: %+v", j.Spec.PodFailurePolicy)
	}
}
