package backendparams

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Pods is what a task's backend parameters make of its pods.
type Pods struct {
	// NodeSelector and Tolerations place the executor pods (node_pool,
	// preemptible, the GPU type's placement).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Zones, if any, are required of the node of every pod of the task.
	Zones []string
	// GPUs of the resource GPU for each executor container (0: none).
	GPU      corev1.ResourceName
	GPUCount int64
	// ServiceAccount runs the executor pods ("": the operator's default).
	ServiceAccount string
	// ImagePullSecrets of the executor pods.
	ImagePullSecrets []string
}

// ApplyExecutor places an executor's pod: the node selector, tolerations
// and zones, the GPUs as a limit and a request of every container, the
// ServiceAccount and the image pull secrets. What the pod holds already
// stays, unless a parameter sets it (the ServiceAccount).
func (p Pods) ApplyExecutor(ps *corev1.PodSpec) {
	p.ApplyTask(ps)
	if len(p.NodeSelector) > 0 {
		if ps.NodeSelector == nil {
			ps.NodeSelector = map[string]string{}
		}
		maps.Copy(ps.NodeSelector, p.NodeSelector)
	}
	ps.Tolerations = append(ps.Tolerations, p.Tolerations...)
	if p.GPUCount > 0 {
		q := *resource.NewQuantity(p.GPUCount, resource.DecimalSI)
		for i := range ps.Containers {
			r := &ps.Containers[i].Resources
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Limits[p.GPU] = q.DeepCopy()
			r.Requests[p.GPU] = q.DeepCopy()
		}
	}
	if p.ServiceAccount != "" {
		ps.ServiceAccountName = p.ServiceAccount
	}
	for _, s := range p.ImagePullSecrets {
		if !slices.ContainsFunc(ps.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == s }) {
			ps.ImagePullSecrets = append(ps.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
	}
}

// ApplyTask places any pod of the task (the filers too): the zones, as a
// required node affinity on ZoneLabel, added to each of the pod's own
// terms.
func (p Pods) ApplyTask(ps *corev1.PodSpec) {
	if len(p.Zones) == 0 {
		return
	}
	req := corev1.NodeSelectorRequirement{Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(p.Zones)}
	if ps.Affinity == nil {
		ps.Affinity = &corev1.Affinity{}
	}
	if ps.Affinity.NodeAffinity == nil {
		ps.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := ps.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range *terms {
		(*terms)[i].MatchExpressions = append((*terms)[i].MatchExpressions, req)
	}
}
