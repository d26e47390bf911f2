package jobspec

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// What the executors' and the filers' pods share: the backend
// parameters' placement, the task volume, labels.

// taskPods is what a task's backend parameters make of its pods. The task
// was admitted (steps.Admit) with the same configuration, so its parameters
// resolve; nothing is placed for a task that was not.
func taskPods(t *taskspec.Task, cfg Config) backendparams.Pods {
	if t == nil {
		return backendparams.Pods{}
	}
	p, err := cfg.BackendParameters.Resolve(t.Resources.BackendParameters)
	if err != nil {
		return backendparams.Pods{}
	}
	return p
}

func pvcVolume(task string) corev1.Volume {
	return corev1.Volume{Name: taskVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: taskmeta.PVCName(task)},
	}}
}

func withLabels(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
