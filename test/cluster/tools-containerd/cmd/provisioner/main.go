// Command provisioner is the real node's volume provisioner: each claim of
// its storage class becomes a directory under -base on this machine and a
// hostPath PersistentVolume bound to the claim, removed again when the claim
// is deleted (reclaim policy Delete). Directories are world-writable, as a
// local-path provisioner makes them, because hostPath volumes ignore the
// pod's fsGroup: the filer runs as a non-root user and must write the task's
// inputs there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

type localPath struct {
	base string
	node string
}

func (p *localPath) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claim selectors are not supported")
	}
	dir := filepath.Join(p.base, o.PVName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// MkdirAll's mode is reduced by the umask.
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	hostPathType := corev1.HostPathDirectory
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{p.node},
				}}}},
			}},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p *localPath) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a hostPath volume"}
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	if filepath.Dir(dir) != filepath.Clean(p.base) || !strings.HasPrefix(filepath.Base(dir), "pvc-") {
		return &controller.IgnoredError{Reason: fmt.Sprintf("%s is not a directory of this provisioner", dir)}
	}
	return os.RemoveAll(dir)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the provisioner")
	name := flag.String("name", "tesk.ga4gh.org/local-path", "provisioner name (the storage class's provisioner)")
	base := flag.String("base", "", "directory holding the volumes")
	node := flag.String("node", "", "the node whose directories these are")
	klog.InitFlags(nil)
	flag.Parse()
	if *base == "" || *node == "" || !filepath.IsAbs(*base) {
		klog.Exit("-base (an absolute path) and -node are required")
	}
	if err := os.MkdirAll(*base, 0o755); err != nil {
		klog.Exit(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Exit(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Exit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc := controller.NewProvisionController(ctx, client, *name, &localPath{base: *base, node: *node},
		controller.LeaderElection(false))
	klog.Infof("provisioning %s volumes under %s", *name, *base)
	pc.Run(ctx)
}
