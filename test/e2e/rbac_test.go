//go:build e2e

package e2e

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The handler's token, bound by the Role of config/knative, runs the whole
// task flow (the other tests) and is denied what the service must not do.
func TestHandlerRoleDeniesTheRest(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	ctx := context.Background()
	kubeconfig, err := shared.ServiceAccountKubeconfig(ctx, e.ns, HandlerServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as := kubernetes.NewForConfigOrDie(rc)
	other := "kube-system"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
	}}}}
	denied := map[string]func() error{
		"read secrets": func() error {
			_, err := as.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"create a secret": func() error {
			_, err := as.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
			return err
		},
		"delete its namespace": func() error {
			return as.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{})
		},
		"list nodes": func() error {
			_, err := as.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		},
		"create a job in another namespace": func() error {
			_, err := as.BatchV1().Jobs(other).Create(ctx, job, metav1.CreateOptions{})
			return err
		},
		"read ConfigMaps of another namespace": func() error {
			_, err := as.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{})
			return err
		},
		"create pods directly": func() error {
			_, err := as.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: job.Spec.Template.Spec}, metav1.CreateOptions{})
			return err
		},
		"watch jobs": func() error {
			w, err := as.BatchV1().Jobs(e.ns).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		},
		"change its own Role": func() error {
			_, err := as.RbacV1().Roles(e.ns).Get(ctx, HandlerServiceAccount, metav1.GetOptions{})
			return err
		},
	}
	for what, try := range denied {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	// And what the flow needs is allowed (the other tests run the flow with it).
	if _, err := as.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list jobs: %v", err)
	}
}
