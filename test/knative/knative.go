// Package knative runs config/knative on the local cluster's real Knative
// (test/cluster's Knative option: Eventing and Serving v0.50.0 on the real
// node) and drives it as an operator and a TES client would: the project's
// images built and loaded into the node, hack/deploy.sh applying the
// shipped manifests with only the images and the issuer changed, an S3
// server and an OIDC issuer on the node's bridge, and requests through the
// KIngress stand-in (the one component here that is not Knative's own; see
// test/cluster's README). Its tests (build tag knative, make test-knative),
// the demo (make demo KNATIVE=1) and the benchmark (make bench-knative) use
// it.
package knative

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
)

// The namespaces config/knative uses: the platform's and the tasks'.
const (
	Platform = "tesk"
	Tasks    = "tesk-tasks"
)

// The images of the project as the node holds them: dev.local is one of
// the registries whose tags Knative Serving does not resolve, so the
// revisions run these very images.
const (
	HandlerImage = "dev.local/tesk-knative-handler:dev"
	TESImage     = "dev.local/tesk-knative-tes:dev"
	FilerImage   = "dev.local/tesk-knative-filer:dev"
	// HandlerImageNext is the handler's image under a second tag: what
	// an upgrade to a new version changes.
	HandlerImageNext = "dev.local/tesk-knative-handler:next"
	// ProbeImage is cmd/probe: a container that tries to reach addresses
	// and reports what answered (the trust boundaries' test).
	ProbeImage = "dev.local/tesk-knative-probe:dev"
)

// EventDisplayImage is Eventing's event_display as the Knative option
// builds it: the dead-letter sink's image in place of the one
// config/knative names on gcr.io, which this machine cannot pull.
var EventDisplayImage = cluster.KnativeImageRegistry + "/knative-eventing-event-display:" + cluster.KnativeVersion

// Bucket is the bucket the tests' and the demo's outputs go to.
const Bucket = "tes-results"

// GVRs of the Knative objects the tests read.
var (
	ServiceGVR        = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	BrokerGVR         = schema.GroupVersionResource{Group: "eventing.knative.dev", Version: "v1", Resource: "brokers"}
	TriggerGVR        = schema.GroupVersionResource{Group: "eventing.knative.dev", Version: "v1", Resource: "triggers"}
	APIServerSrcGVR   = schema.GroupVersionResource{Group: "sources.knative.dev", Version: "v1", Resource: "apiserversources"}
	PingSourceGVR     = schema.GroupVersionResource{Group: "sources.knative.dev", Version: "v1", Resource: "pingsources"}
	SinkBindingGVR    = schema.GroupVersionResource{Group: "sources.knative.dev", Version: "v1", Resource: "sinkbindings"}
	knativeObjectGVRs = []schema.GroupVersionResource{ServiceGVR, BrokerGVR, TriggerGVR, APIServerSrcGVR, PingSourceGVR, SinkBindingGVR}
)

// Env is config/knative deployed on a local cluster with Knative.
type Env struct {
	// Namespaces are the platform's and the tasks' namespaces of the
	// deployment the methods act on: Platform and Tasks (config/knative's),
	// or the chart's in an Env of In.
	Namespaces struct{ Platform, Tasks string }

	C      *cluster.Cluster
	Node   *cluster.RealNode
	Store  *s3server.Server
	Issuer *Issuer
	// Logf receives progress messages.
	Logf func(format string, args ...any)
}

// AttachTo attaches to the cluster that cluster up -knative (make
// cluster-up KNATIVE=1) runs with its state in dir.
func AttachTo(dir string) (*cluster.Cluster, error) {
	st, err := cluster.ReadState(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("%v (start the cluster with make cluster-up KNATIVE=1)", err)
	}
	return cluster.Attach(st)
}

// RepoRoot is the module's root, found from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "config", "knative")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the tesk-knative checkout (no go.mod beside config/knative above the working directory)")
		}
		dir = parent
	}
}

// BuildImages builds the handler's, the TES API's, the filer's and the
// probe's images into dir, named as above.
func BuildImages(ctx context.Context, root, dir string) ([]cluster.NodeImage, error) {
	built, err := ociimage.BuildAll(ctx, ociimage.Options{
		RepoRoot:     root,
		OutDir:       dir,
		HandlerImage: HandlerImage,
		TESImage:     TESImage,
		FilerImage:   FilerImage,
		Only:         []string{ociimage.Handler, ociimage.TES, ociimage.Filer},
	})
	if err != nil {
		return nil, err
	}
	var out []cluster.NodeImage
	for _, b := range built {
		for _, ref := range b.Refs {
			out = append(out, cluster.NodeImage{Ref: ref, Tar: b.Path})
			if ref == HandlerImage {
				out = append(out, cluster.NodeImage{Ref: HandlerImageNext, Tar: b.Path})
			}
		}
	}
	probe, err := probeImage(ctx, root, dir)
	if err != nil {
		return nil, err
	}
	return append(out, probe), nil
}

func probeImage(ctx context.Context, root, dir string) (cluster.NodeImage, error) {
	bin := filepath.Join(dir, "probe-bin")
	if err := ociimage.GoBuild(ctx, "go", root, bin, nil, "./test/knative/cmd/probe"); err != nil {
		return cluster.NodeImage{}, err
	}
	img, err := ociimage.NewImage(ociimage.Config{
		Entrypoint: []string{"/probe"},
		User:       fmt.Sprintf("%d:%d", ociimage.NonrootUID, ociimage.NonrootUID),
	}, ociimage.LayerSpec{Tree: ociimage.BinaryTree("probe", filepath.Join(bin, "probe")), CreatedBy: "COPY probe /probe"})
	if err != nil {
		return cluster.NodeImage{}, err
	}
	tar := filepath.Join(dir, "probe.tar")
	if err := ociimage.WriteArchive(tar, img, ProbeImage); err != nil {
		return cluster.NodeImage{}, err
	}
	return cluster.NodeImage{Ref: ProbeImage, Tar: tar}, nil
}

// Setup readies a running cluster with Knative for config/knative: the
// project's images loaded into the node, an S3 server with Bucket and an
// OIDC issuer on the node's bridge, config/knative deployed by
// hack/deploy.sh (the images and OIDC_ISSUER set, nothing else changed),
// the filers' aws-secret, and a NetworkPolicy that opens the tasks' egress
// to the S3 server (config/knative's tasks.yaml says to add one for a
// server on a private address). It returns once every Knative object of
// config/knative is Ready and the handler has scaled to zero.
func Setup(ctx context.Context, c *cluster.Cluster, logf func(string, ...any)) (*Env, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	n := c.RealNode()
	if n == nil || n.Services == nil {
		return nil, errors.New("knative: the cluster has no real node with Services (start it with cluster up -knative)")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{C: c, Node: n, Logf: logf}
	e.Namespaces.Platform, e.Namespaces.Tasks = Platform, Tasks
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "tesk-knative-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	images, err := BuildImages(ctx, root, dir)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	if err := c.LoadImages(ctx, images...); err != nil {
		return nil, err
	}
	logf("images of the handler, the TES API, the filer and the probe on the node (%s)", time.Since(t0).Round(time.Millisecond))

	if e.Store, err = s3server.StartOn(n.HostIP); err != nil {
		return nil, fmt.Errorf("S3 server on the node's bridge: %w", err)
	}
	if err := e.Store.CreateBucket(ctx, Bucket); err != nil {
		e.Close()
		return nil, err
	}
	if e.Issuer, err = StartIssuer(n.HostIP); err != nil {
		e.Close()
		return nil, err
	}
	t0 = time.Now()
	if err := e.Deploy(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.StoreAccess(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.WaitReady(ctx, 5*time.Minute); err != nil {
		e.Close()
		return nil, err
	}
	logf("config/knative deployed and Ready (%s)", time.Since(t0).Round(time.Millisecond))
	if err := e.WaitZero(ctx, "tesk-handler", 3*time.Minute); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close stops the S3 server and the issuer (the cluster is the caller's).
func (e *Env) Close() {
	if e.Store != nil {
		e.Store.Stop()
	}
	if e.Issuer != nil {
		e.Issuer.Close()
	}
}

// Kubectl is the kubectl the local cluster's build holds.
func (e *Env) Kubectl() string { return filepath.Join(e.C.CacheDir, "bin", "kubectl") }

// Deploy runs hack/deploy.sh against the cluster, as the README tells an
// operator to: the images and OIDC_ISSUER (the issuer on the node's
// bridge) set, the shipped manifests otherwise unchanged.
func (e *Env) Deploy(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "deploy.sh"))
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+e.C.Kubeconfig, "KUBECTL="+e.Kubectl(), "KO_DOCKER_REPO=",
		"HANDLER_IMAGE="+HandlerImage, "TES_IMAGE="+TESImage, "FILER_IMAGE="+FilerImage,
		"EVENT_DISPLAY_IMAGE="+EventDisplayImage, "OIDC_ISSUER="+e.Issuer.URL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/deploy.sh: %v\n%s", err, out.String())
	}
	return nil
}

// In is the Env of another deployment on the same cluster: its platform's
// and its tasks' namespaces.
func (e *Env) In(platform, tasks string) *Env {
	other := *e
	other.Namespaces.Platform, other.Namespaces.Tasks = platform, tasks
	return &other
}

// StoreAccess gives the filers the S3 server: the aws-secret in the tasks'
// namespace and a NetworkPolicy that lets the tasks' pods reach its port.
func (e *Env) StoreAccess(ctx context.Context) error {
	config, credentials := e.Store.AWSConfig()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: steps.AWSSecretName, Namespace: e.Namespaces.Tasks},
		StringData: map[string]string{"config": config, "credentials": credentials},
	}
	secrets := e.C.Client.CoreV1().Secrets(e.Namespaces.Tasks)
	_, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // from an earlier run, with another server's address
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("secret %s: %w", steps.AWSSecretName, err)
	}
	port := e.Store.Endpoint[strings.LastIndex(e.Store.Endpoint, ":")+1:]
	return e.AllowEgress(ctx, "tesk-test-s3", e.Node.HostIP, port)
}

// AllowEgress adds a NetworkPolicy to the tasks' namespace that lets its
// pods reach ip:port (TCP), as tasks.yaml says an operator adds one for a
// server on a private address.
func (e *Env) AllowEgress(ctx context.Context, name, ip, port string) error {
	tcp := corev1.ProtocolTCP
	p := intstr.Parse(port)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespaces.Tasks},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: ip + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
			}},
		},
	}
	policies := e.C.Client.NetworkingV1().NetworkPolicies(e.Namespaces.Tasks)
	_, err := policies.Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = policies.Update(ctx, np, metav1.UpdateOptions{})
	}
	return err
}
