package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountTokenSeconds is the lifetime of the tokens handed out by
// ServiceAccountKubeconfig.
const ServiceAccountTokenSeconds = 24 * 60 * 60

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// service account namespace/serviceAccount with a token from the
// TokenRequest API, and returns its path. The namespace and the service
// account are created when missing; the account has only the permissions
// that Roles and ClusterRoles bound to it give.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, serviceAccount string) (string, error) {
	if err := c.ensureNamespace(ctx, namespace); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: namespace}}
	if _, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", namespace, serviceAccount, err)
	}
	exp := int64(ServiceAccountTokenSeconds)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, serviceAccount, err)
	}
	ca, err := os.ReadFile(c.pki().path("ca.crt"))
	if err != nil {
		return "", err
	}
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["tesk-local"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["tesk-local"] = &clientcmdapi.Context{Cluster: "tesk-local", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "tesk-local"
	path := filepath.Join(c.Dir, "kubeconfigs", namespace+"."+serviceAccount+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// WriteKubeconfig writes a copy of the admin kubeconfig to path.
func (c *Cluster) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return c.writeAdminKubeconfig(path)
}

func (c *Cluster) ensureNamespace(ctx context.Context, namespace string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}
