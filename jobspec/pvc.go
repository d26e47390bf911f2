package jobspec

import (
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// diskSize is gb GiB as a whole number of bytes, rounded up: the API server
// warns that a fractional byte count (0.1 GiB is 107374182.4 bytes) is
// invalid. A whole number of GiB keeps its Gi form.
func diskSize(gb float64) resource.Quantity {
	if gb == math.Trunc(gb) {
		return resource.MustParse(strconv.FormatFloat(gb, 'f', -1, 64) + "Gi")
	}
	return *resource.NewQuantity(int64(math.Ceil(gb*(1<<30))), resource.BinarySI)
}

// PVC is the task's volume claim: disk_gb gigabytes (DEFAULT_DISK_GB,
// else 1, if unset), the storage class STORAGE_CLASS_NAME or the cluster's
// default.
func PVC(a taskmeta.Anchor, t *taskspec.Task, cfg Config) *corev1.PersistentVolumeClaim {
	gb := t.Resources.DiskGB
	if gb <= 0 {
		gb = cfg.DiskGB()
	}
	size := diskSize(gb)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.PVCName(a.Name),
			Namespace:       a.Namespace,
			Labels:          map[string]string{taskmeta.LabelTask: a.Name},
			OwnerReferences: a.OwnerRefs(),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
	if cfg.StorageClassName != "" {
		sc := cfg.StorageClassName
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}
