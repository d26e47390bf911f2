package jobspec

import (
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// ExecutorJob is the i-th executor's job: the TESK API's job spec (admitted
// by steps.Admit), named and labelled as TESK's, owned by the anchor, with
// the task volume and the executor secret mounted, requests as limits where
// limits are missing, the executor backoff limit, the executors'
// ServiceAccount without its token, the executors' security context, and
// the placement, GPUs and identity its backend parameters ask for, and a
// pod failure policy that runs a pod the cluster took away again.
func ExecutorJob(a taskmeta.Anchor, t *taskspec.Task, i int, cfg Config) *batchv1.Job {
	j := t.Executors[i].DeepCopy()
	j.TypeMeta = metav1.TypeMeta{}
	j.Name = taskmeta.ObjectName(a.Name, taskmeta.ExecutorPart(i))
	j.Namespace = a.Namespace
	j.ResourceVersion, j.UID, j.GenerateName = "", "", ""
	j.OwnerReferences = a.OwnerRefs()
	j.Labels = withLabels(j.Labels, map[string]string{
		taskmeta.LabelTask: a.Name, taskmeta.LabelJobType: taskmeta.JobTypeExecutor, taskmeta.LabelExecutorNo: strconv.Itoa(i),
	})
	j.Spec.Template.Labels = withLabels(j.Spec.Template.Labels, map[string]string{taskmeta.LabelTask: a.Name})
	if cfg.ExecutorBackoffLimit != nil {
		v := *cfg.ExecutorBackoffLimit
		j.Spec.BackoffLimit = &v
	} else if j.Spec.BackoffLimit == nil {
		zero := int32(0)
		j.Spec.BackoffLimit = &zero
	}
	ps := &j.Spec.Template.Spec
	if ps.RestartPolicy == "" {
		ps.RestartPolicy = corev1.RestartPolicyNever
	}
	if ps.RestartPolicy == corev1.RestartPolicyNever && j.Spec.PodFailurePolicy == nil {
		// A pod the cluster takes away is run again without spending the
		// executor's retries; the service counts them (MaxPreemptions).
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
	}
	taskPodIdentity(ps, cfg)
	for k := range ps.Containers {
		c := &ps.Containers[k]
		if len(c.Resources.Limits) == 0 && len(c.Resources.Requests) > 0 {
			c.Resources.Limits = c.Resources.Requests.DeepCopy()
		}
		c.SecurityContext = ExecutorSecurity(cfg.ExecutorSecurityContext, c.SecurityContext)
	}
	if s := cfg.ExecutorSecret; s.Name != "" && !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == s.Name }) {
		// The TESK API mounts it itself; the TES API leaves it to here.
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: s.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Name}}})
		for k := range ps.Containers {
			ps.Containers[k].VolumeMounts = append(ps.Containers[k].VolumeMounts, corev1.VolumeMount{Name: s.Name, MountPath: s.MountPath, ReadOnly: true})
		}
	}
	if t.NeedsVolume() {
		ps.Volumes = append(ps.Volumes, pvcVolume(a.Name))
		var mounts []corev1.VolumeMount
		for _, d := range t.MountDirs() {
			mounts = append(mounts, corev1.VolumeMount{
				Name: taskVolumeName, MountPath: d, SubPath: strings.TrimPrefix(d, "/"),
			})
		}
		for k := range ps.Containers {
			ps.Containers[k].VolumeMounts = append(ps.Containers[k].VolumeMounts, mounts...)
		}
	}
	if t.NeedsVolume() {
		shareTaskVolume(ps, cfg)
	}
	taskPods(t, cfg).ApplyExecutor(ps)
	return j
}
