package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
)

// The NATS option of the local cluster (with Knative): a durable channel
// for Knative Eventing. A single NATS server with JetStream, its store on a
// PersistentVolumeClaim of RealStorageClass, and the NATS JetStream channel
// of knative.dev/eventing-natss (NatsJetStreamChannel: its controller, the
// dispatcher the controller makes, and its webhook), all built from the
// module proxy by build-natss.sh. Knative's default channel stays the
// in-memory one; a Broker runs on JetStream when its spec.config names
// the ConfigMap NatsBrokerConfig.

// NatssVersion is the version of knative.dev/eventing-natss the option
// runs (built against Eventing KnativeVersion).
const NatssVersion = "v0.48.1"

// NatsServerVersion is the version of the NATS server the option runs.
const NatsServerVersion = "v2.12.15"

// NatsNamespace holds the NATS server: a StatefulSet of one, its Service
// nats (port 4222), where eventing-natss looks for it by default.
const NatsNamespace = "nats-io"

// NatsURL is the NATS server's address for the channel (config-nats).
const NatsURL = "nats://nats." + NatsNamespace + ".svc." + ClusterDomain + ":4222"

// NatsBrokerConfig is the ConfigMap, in knative-eventing, whose
// channel-template-spec is NatsJetStreamChannel: a Broker whose spec.config
// names it runs on JetStream.
const NatsBrokerConfig = "config-br-jetstream-channel"

// NatsDispatcher is the Deployment, in knative-eventing, that the channel's
// controller makes once a NatsJetStreamChannel exists: it takes the events
// the channel accepts from JetStream and delivers them to the subscribers.
const NatsDispatcher = "jetstream-ch-dispatcher"

// NatsChanges lists what the local cluster changes in eventing-natss's own
// YAML and what it adds, in one place:
var NatsChanges = []string{
	"eventing-natss patched before it is built (tools-natss/eventing-natss.patch): with Eventing's authentication-oidc on, the dispatcher sends each delivery with the token of the Subscription's ServiceAccount, and its ClusterRole may create serviceaccounts/token",
	"ko:// references become images built here (" + KnativeImageRegistry + "/natss-<command>:" + NatssVersion + ")",
	"CPU requests lowered to 10m and CPU limits removed, as for Knative",
	"added: the NATS server (" + NatsServerVersion + ", JetStream on) as a StatefulSet of one in " + NatsNamespace + " with a 1Gi PersistentVolumeClaim of " + RealStorageClass + ", so that its streams outlive its pod",
	"added: config-nats (knative-eventing) naming " + NatsURL + ", which the dispatcher mounts",
	"added: the ConfigMap " + NatsBrokerConfig + " (knative-eventing), a Broker config whose channel is NatsJetStreamChannel",
}

// natssCommand is one of the commands build-natss.sh builds, as an image.
type natssCommand struct {
	name string // the binary in bin/
	ko   string // its ko:// reference in the YAML ("" for the NATS server)
}

func (n natssCommand) image() string {
	if n.ko == "" {
		return KnativeImageRegistry + "/nats-server:" + NatsServerVersion
	}
	return KnativeImageRegistry + "/natss-" + n.name + ":" + NatssVersion
}

var natssCommands = []natssCommand{
	{"controller", "ko://knative.dev/eventing-natss/cmd/jetstream/controller"},
	{"dispatcher", "ko://knative.dev/eventing-natss/cmd/jetstream/dispatcher"},
	{"webhook", "ko://knative.dev/eventing-natss/cmd/webhook"},
	{"nats-server", ""},
}

// natssKeyFiles make up the cache key of build-natss.sh, in its order.
var natssKeyFiles = []string{
	"tools-natss/go.mod",
	"tools-natss/go.sum",
	"tools-natss/tools.go",
	"tools-natss/eventing-natss.patch",
	"build-natss.sh",
}

// NatsCacheDir is where build-natss.sh puts its binaries and YAML: the key
// hashes tools-natss (the patch of eventing-natss among it), the script and
// the Go version, as the script does.
func NatsCacheDir() (string, error) {
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	key, err := hashFiles(src, natssKeyFiles, "")
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tesk-knative", "natss", key), nil
}

// NatsImages makes (or reuses, under the cache's images/) an image of each
// command build-natss.sh built, as KnativeImages does: the binary at
// /ko-app/<name>, its entrypoint, user 65532.
func NatsImages(cacheDir string) ([]NodeImage, error) {
	out := filepath.Join(cacheDir, "images")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	base := ociimage.BaseTree(ociimage.HostCACertificates, "")
	var images []NodeImage
	for _, n := range natssCommands {
		bin := filepath.Join(cacheDir, "bin", n.name)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("natss: %w: run test/cluster/build-natss.sh (make natss-bins)", err)
		}
		tar := filepath.Join(out, n.name+".tar")
		if _, err := os.Stat(tar); err != nil {
			created := "ko: " + n.ko
			if n.ko == "" {
				created = "go build github.com/nats-io/nats-server/v2@" + NatsServerVersion
			}
			img, err := ociimage.NewImage(ociimage.Config{
				Entrypoint: []string{"/ko-app/" + n.name},
				User:       fmt.Sprintf("%d:%d", ociimage.NonrootUID, ociimage.NonrootUID),
				Env:        []string{ociimage.DefaultPath, "SSL_CERT_FILE=" + ociimage.CACertificates, "KO_DATA_PATH=/var/run/ko"},
			},
				ociimage.LayerSpec{Tree: base, CreatedBy: "distroless/static:nonroot equivalent"},
				ociimage.LayerSpec{Tree: ociimage.BinaryTree("ko-app/"+n.name, bin), CreatedBy: created})
			if err != nil {
				return nil, err
			}
			tmp := tar + ".tmp"
			if err := ociimage.WriteArchive(tmp, img, n.image()); err != nil {
				return nil, err
			}
			if err := os.Rename(tmp, tar); err != nil {
				return nil, err
			}
		}
		images = append(images, NodeImage{Ref: n.image(), Tar: tar})
	}
	return images, nil
}

// natsAdded are the objects NatsChanges adds: the NATS server, config-nats
// and the Broker config NatsBrokerConfig.
func natsAdded() string {
	var server string
	for _, n := range natssCommands {
		if n.ko == "" {
			server = n.image()
		}
	}
	y := `apiVersion: v1
kind: Namespace
metadata:
  name: NS
---
apiVersion: v1
kind: Service
metadata:
  name: nats
  namespace: NS
spec:
  selector: {app: nats}
  ports:
  - {name: client, port: 4222, targetPort: client}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: nats
  namespace: NS
spec:
  serviceName: nats
  replicas: 1
  selector:
    matchLabels: {app: nats}
  template:
    metadata:
      labels: {app: nats}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: nats
        image: IMAGE
        args: ["--jetstream", "--store_dir=/data", "--port=4222", "--http_port=8222", "--server_name=nats-0"]
        ports:
        - {name: client, containerPort: 4222}
        - {name: monitor, containerPort: 8222}
        readinessProbe:
          httpGet: {path: /healthz, port: monitor}
          periodSeconds: 2
        resources:
          requests: {cpu: 10m, memory: 64Mi}
        volumeMounts:
        - {name: data, mountPath: /data}
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: STORAGECLASS
      resources:
        requests: {storage: 1Gi}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: config-nats
  namespace: knative-eventing
data:
  eventing-nats: |
    url: URL
    connOpts:
      retryOnFailedConnect: true
      maxReconnects: -1
      reconnectWaitMilliseconds: 2000
      reconnectJitterMilliseconds: 100
      reconnectJitterTLSMilliseconds: 1000
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: BROKERCONFIG
  namespace: knative-eventing
data:
  channel-template-spec: |
    apiVersion: messaging.knative.dev/v1alpha1
    kind: NatsJetStreamChannel
`
	return strings.NewReplacer("NS", NatsNamespace, "IMAGE", server, "STORAGECLASS", RealStorageClass,
		"URL", NatsURL, "BROKERCONFIG", NatsBrokerConfig).Replace(y)
}

// NatsManifests reads eventing-natss's YAML from the cache, makes the
// changes of NatsChanges and adds its objects: the objects to apply,
// CustomResourceDefinitions first.
func NatsManifests(cacheDir string) ([]*unstructured.Unstructured, error) {
	refs := map[string]string{}
	for _, n := range natssCommands {
		if n.ko != "" {
			refs[n.ko] = n.image()
		}
	}
	var crds, rest []*unstructured.Unstructured
	for _, d := range []string{"jetstream", "webhook"} {
		root := filepath.Join(cacheDir, "config", d)
		var files []string
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.HasSuffix(p, ".yaml") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("natss YAML: %w (run test/cluster/build-natss.sh)", err)
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			for ko, img := range refs {
				b = bytes.ReplaceAll(b, []byte(ko), []byte(img))
			}
			if i := bytes.Index(b, []byte("ko://")); i >= 0 {
				end := bytes.IndexAny(b[i:], " \n\"'")
				return nil, fmt.Errorf("natss YAML %s: no image for %s", f, b[i:i+end])
			}
			objs, err := DecodeManifest(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, o := range objs {
				if err := adaptKnative(o); err != nil {
					return nil, fmt.Errorf("%s: %s %s: %w", f, o.GetKind(), o.GetName(), err)
				}
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				} else {
					rest = append(rest, o)
				}
			}
		}
	}
	objs, err := DecodeManifest([]byte(natsAdded()))
	if err != nil {
		return nil, fmt.Errorf("natss: the added objects: %w", err)
	}
	return append(append(crds, objs...), rest...), nil
}

// InstallNats applies NatsManifests once Knative runs, and waits until the
// NATS server is Ready and every Deployment of knative-eventing (the
// channel's controller and webhook among them) is Available.
func (c *Cluster) InstallNats(ctx context.Context, cacheDir string) error {
	objs, err := NatsManifests(cacheDir)
	if err != nil {
		return err
	}
	var crds, rest [][]byte
	var names []string
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, b)
			names = append(names, o.GetName())
		} else {
			rest = append(rest, b)
		}
	}
	if err := c.Apply(ctx, bytes.Join(crds, []byte("\n---\n"))); err != nil {
		return fmt.Errorf("natss CRDs: %w", err)
	}
	if err := c.waitCRDsEstablished(ctx, names...); err != nil {
		return err
	}
	if err := c.Apply(ctx, bytes.Join(rest, []byte("\n---\n"))); err != nil {
		return fmt.Errorf("natss: %w", err)
	}
	if err := c.WaitNatsReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	return c.waitDeploymentsAvailable(ctx, 5*time.Minute, "knative-eventing")
}

// WaitNatsReady waits until the NATS server's StatefulSet has its one pod
// Ready (of its current revision).
func (c *Cluster) WaitNatsReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		s, err := c.Client.AppsV1().StatefulSets(NatsNamespace).Get(ctx, "nats", metav1.GetOptions{})
		if err == nil && s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas >= 1 &&
			s.Status.UpdatedReplicas >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d of 1 Ready", s.Status.ReadyReplicas)
			}
			return fmt.Errorf("natss: the NATS server not Ready after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
