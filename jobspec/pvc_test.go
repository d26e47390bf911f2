package jobspec

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// The cases cite docs/behaviour.md, with its sections 2 (options) and 3
// (environment variables).

func TestPVC(t *testing.T) {
	cases := []struct {
		name    string
		diskGB  float64
		deflt   float64
		class   string
		size    string
		classOK func(*string) bool
	}{
		{"behaviour §1.1: the PVC has the task's disk size", 2, 0, "", "2Gi", func(s *string) bool { return s == nil }},
		{"behaviour §1.1: a fractional disk size", 1.5, 0, "", "1536Mi", func(s *string) bool { return s == nil }},
		{"behaviour §1.1: no disk size: 1 GiB", 0, 0, "", "1Gi", func(s *string) bool { return s == nil }},
		{"DEFAULT_DISK_GB sizes a task without disk size", 0, 0.5, "", "512Mi", func(s *string) bool { return s == nil }},
		{"a fraction of a GiB is whole bytes, rounded up (0.1 GiB, the TESK API's default)", 0.1, 0, "", "107374183", func(s *string) bool { return s == nil }},
		{"DEFAULT_DISK_GB leaves the task's own disk size", 3, 0.5, "", "3Gi", func(s *string) bool { return s == nil }},
		{"STORAGE_CLASS_NAME sets the PVC's storage class", 3, 0, "fast", "3Gi", func(s *string) bool { return s != nil && *s == "fast" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.StorageClassName = c.class
			cfg.DefaultDiskGB = c.deflt
			pvc := PVC(testAnchor, taskWith(1, func(tk *taskspec.Task) { tk.Resources.DiskGB = c.diskGB }), cfg)
			if pvc.Name != testTask+"-pvc" || pvc.Namespace != testNS {
				t.Errorf("PVC %s/%s", pvc.Namespace, pvc.Name)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(quantity(c.size)) != 0 || got.MilliValue()%1000 != 0 {
				t.Errorf("size %s, want %s", got.String(), c.size)
			}
			if !c.classOK(pvc.Spec.StorageClassName) {
				t.Errorf("storage class %v", pvc.Spec.StorageClassName)
			}
			if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
				t.Errorf("access modes %v", pvc.Spec.AccessModes)
			}
			if pvc.Labels[taskmeta.LabelTask] != testTask {
				t.Errorf("labels %v", pvc.Labels)
			}
			wantOwner(t, pvc.OwnerReferences)
		})
	}
}
