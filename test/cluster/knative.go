package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
)

// Knative on the local cluster: Eventing and Serving v0.50.0 (Knative 1.23),
// built from the module proxy by build-knative.sh into images that the real
// node loads, deployed from the YAML of the modules' own config/ folders
// with the changes KnativeChanges lists, and the KIngress stand-in
// (package kingress) in place of an ingress that cannot be built here.

// KnativeVersion is the version of Eventing and Serving the option runs.
const KnativeVersion = "v0.50.0"

// KnativeImageRegistry prefixes the Knative images the node holds: Serving
// resolves no tag of it (config-deployment's
// registries-skipping-tag-resolving), and nothing pulls it from elsewhere.
const KnativeImageRegistry = "ko.local"

// KnativeIngressImage is the KIngress stand-in's image.
const KnativeIngressImage = KnativeImageRegistry + "/kingress-standin:dev"

// KnativeChanges lists what the local cluster changes in Knative's own
// YAML, in one place:
var KnativeChanges = []string{
	"ko:// references become images built here (" + KnativeImageRegistry + "/knative-<repo>-<command>:" + KnativeVersion + ")",
	"CPU requests of Knative's containers lowered to 10m and their CPU limits removed, to fit the node's 2 cores",
	"probes of Knative's containers answered within " + strconv.FormatInt(probeTimeoutSeconds, 10) + " s, not 1 s: on the node's 2 shared cores, starting tasks' pods, a probe answered late restarted the in-memory channel's dispatcher, which loses the deliveries it holds (the Broker's asyncDelivery)",
	"the job sink, request-reply and the webhook's HorizontalPodAutoscaler left out (config/knative uses none of them)",
	"config-network: ingress-class is the KIngress stand-in's (" + "standin.ingress.tesk.test" + ")",
	"config-deployment: " + KnativeImageRegistry + " and dev.local skip tag resolution (already Serving's default), progress deadline 300s",
	"config-features (Eventing): authentication-oidc enabled, so that the Broker takes events only from senders with a token for it (the sources' own identities, the SinkBinding's), of its namespace (Eventing's default authorization mode)",
	"config-autoscaler: stable window and scale-to-zero grace period 6s (Knative's least; its defaults are 60s and 30s), so a test sees a revision go back to zero in seconds",
	"the ConfigMaps eventing-integrations-images and eventing-transformations-images, which Eventing's release adds from knative-extensions/eventing-integrations (Java images), name " + noImage + " for each key: config/knative makes no IntegrationSource, IntegrationSink or EventTransform",
	"knative.dev/networking's CRDs and config-network, and knative.dev/caching's Image CRD, which Serving's repository links into config/core, are taken from those modules (a module zip holds no links)",
}

// probeTimeoutSeconds is the least time a probe of Knative's containers
// waits for an answer (KnativeChanges).
const probeTimeoutSeconds int64 = 5

// noImage is the image the eventing-integrations ConfigMaps name: there is
// none here.
const noImage = "not-built-here.invalid/eventing-integrations:none"

// knativeAdded are objects the local cluster adds to Knative's YAML.
func knativeAdded() []*unstructured.Unstructured {
	cm := func(name string, keys ...string) *unstructured.Unstructured {
		data := map[string]any{}
		for _, k := range keys {
			data[k] = noImage
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "knative-eventing"},
			"data":     data,
		}}
	}
	return []*unstructured.Unstructured{
		cm("eventing-transformations-images", "transform-jsonata"),
		cm("eventing-integrations-images", "timer-source", "aws-s3-source", "aws-sqs-source", "aws-ddb-streams-source",
			"log-sink", "aws-s3-sink", "aws-sqs-sink", "aws-sns-sink"),
	}
}

// knativeDropped names the objects of Knative's YAML the local cluster does
// not deploy (kind/namespace/name; a kind * matches any kind, a name
// ending in * any name with that prefix).
var knativeDropped = []string{
	"*/knative-eventing/job-sink", "*/knative-eventing/request-reply",
	"HorizontalPodAutoscaler/knative-eventing/*", "PodDisruptionBudget/knative-eventing/*",
	"HorizontalPodAutoscaler/knative-serving/*", "PodDisruptionBudget/knative-serving/*",
}

// KnativeCacheDir is where build-knative.sh puts its binaries and YAML: the
// key hashes tools-platform, the script and the Go version, as the script
// does.
func KnativeCacheDir() (string, error) {
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	key, err := hashFiles(src, []string{"tools-platform/go.mod", "tools-platform/go.sum", "tools-platform/tools.go", "build-knative.sh"}, "")
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "tesk-knative", "knative", key), nil
}

// knativeCommand is one of Knative's commands as an image.
type knativeCommand struct {
	repo, path string // path below knative.dev/<repo>/cmd
}

func (k knativeCommand) name() string { return filepath.Base(k.path) }

func (k knativeCommand) ko() string { return "ko://knative.dev/" + k.repo + "/cmd/" + k.path }

func (k knativeCommand) image() string {
	return fmt.Sprintf("%s/knative-%s-%s:%s", KnativeImageRegistry, k.repo, strings.ReplaceAll(k.name(), "_", "-"), KnativeVersion)
}

var knativeCommands = []knativeCommand{
	{"eventing", "controller"}, {"eventing", "webhook"}, {"eventing", "mtchannel_broker"},
	{"eventing", "broker/ingress"}, {"eventing", "broker/filter"},
	{"eventing", "in_memory/channel_controller"}, {"eventing", "in_memory/channel_dispatcher"},
	{"eventing", "apiserver_receive_adapter"}, {"eventing", "mtping"}, {"eventing", "event_display"}, {"eventing", "auth_proxy"},
	{"serving", "controller"}, {"serving", "webhook"}, {"serving", "activator"}, {"serving", "autoscaler"}, {"serving", "queue"},
}

// KnativeImages makes (or reuses, under the cache's images/) an image of
// each of Knative's commands, as ko would: the binary at /ko-app/<name>,
// its entrypoint, on a distroless-like base, user 65532.
func KnativeImages(cacheDir string) ([]NodeImage, error) {
	out := filepath.Join(cacheDir, "images")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	base := ociimage.BaseTree(ociimage.HostCACertificates, "")
	var images []NodeImage
	for _, k := range knativeCommands {
		bin := filepath.Join(cacheDir, "bin", k.repo, k.name())
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("knative: %w: run test/cluster/build-knative.sh (make cluster-bins)", err)
		}
		tar := filepath.Join(out, k.repo+"-"+k.name()+".tar")
		if _, err := os.Stat(tar); err != nil {
			img, err := ociimage.NewImage(ociimage.Config{
				Entrypoint: []string{"/ko-app/" + k.name()},
				User:       fmt.Sprintf("%d:%d", ociimage.NonrootUID, ociimage.NonrootUID),
				Env:        []string{ociimage.DefaultPath, "SSL_CERT_FILE=" + ociimage.CACertificates, "KO_DATA_PATH=/var/run/ko"},
			},
				ociimage.LayerSpec{Tree: base, CreatedBy: "distroless/static:nonroot equivalent"},
				ociimage.LayerSpec{Tree: ociimage.BinaryTree("ko-app/"+k.name(), bin), CreatedBy: "ko: " + k.ko()})
			if err != nil {
				return nil, err
			}
			tmp := tar + ".tmp"
			if err := ociimage.WriteArchive(tmp, img, k.image()); err != nil {
				return nil, err
			}
			if err := os.Rename(tmp, tar); err != nil {
				return nil, err
			}
		}
		images = append(images, NodeImage{Ref: k.image(), Tar: tar})
	}
	return images, nil
}

// knativeYAMLDirs are the folders of build-knative.sh's config/, in the
// order they are applied.
var knativeYAMLDirs = []string{"eventing/core", "eventing/in-memory-channel", "eventing/mt-channel-broker", "serving/core"}

// KnativeManifests reads Knative's YAML from the cache and makes the
// changes of KnativeChanges: the objects to apply, CustomResourceDefinitions
// first.
func KnativeManifests(cacheDir string) ([]*unstructured.Unstructured, error) {
	refs := map[string]string{}
	for _, k := range knativeCommands {
		refs[k.ko()] = k.image()
	}
	var crds, rest []*unstructured.Unstructured
	for _, d := range knativeYAMLDirs {
		root := filepath.Join(cacheDir, "config", d)
		var files []string
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("knative YAML: %w (run test/cluster/build-knative.sh)", err)
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
			objs, err := DecodeManifest(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, o := range objs {
				if dropped(o) {
					continue
				}
				if y, _ := yaml.Marshal(o.Object); bytes.Contains(y, []byte("ko://")) {
					i := bytes.Index(y, []byte("ko://"))
					end := bytes.IndexAny(y[i:], " \n\"'")
					return nil, fmt.Errorf("knative YAML %s: %s %s: no image for %s", f, o.GetKind(), o.GetName(), y[i:i+end])
				}
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
	return append(append(crds, rest...), knativeAdded()...), nil
}

func dropped(o *unstructured.Unstructured) bool {
	id := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	for _, d := range knativeDropped {
		if rest, ok := strings.CutPrefix(d, "*/"); ok {
			d = o.GetKind() + "/" + rest
		}
		if d == id || strings.HasSuffix(d, "*") && strings.HasPrefix(id, strings.TrimSuffix(d, "*")) {
			return true
		}
	}
	return false
}

// adaptKnative makes one object's changes of KnativeChanges.
func adaptKnative(o *unstructured.Unstructured) error {
	switch {
	case o.GetKind() == "Deployment" || o.GetKind() == "DaemonSet" || o.GetKind() == "StatefulSet":
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m := c.(map[string]any)
			if _, ok, _ := unstructured.NestedString(m, "resources", "requests", "cpu"); ok {
				if err := unstructured.SetNestedField(m, "10m", "resources", "requests", "cpu"); err != nil {
					return err
				}
			}
			unstructured.RemoveNestedField(m, "resources", "limits", "cpu")
			for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
				p, ok := m[probe].(map[string]any)
				if !ok {
					continue
				}
				// Decoded from YAML through JSON: a number is a float64.
				if t, _ := p["timeoutSeconds"].(float64); int64(t) < probeTimeoutSeconds {
					p["timeoutSeconds"] = probeTimeoutSeconds
				}
			}
		}
		return unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	case o.GetKind() == "ConfigMap" && o.GetNamespace() == "knative-serving" && o.GetName() == "config-network":
		return unstructured.SetNestedField(o.Object, "standin.ingress.tesk.test", "data", "ingress-class")
	case o.GetKind() == "ConfigMap" && o.GetNamespace() == "knative-serving" && o.GetName() == "config-deployment":
		if err := unstructured.SetNestedField(o.Object, "kind.local,ko.local,dev.local", "data", "registries-skipping-tag-resolving"); err != nil {
			return err
		}
		return unstructured.SetNestedField(o.Object, "300s", "data", "progress-deadline")
	case o.GetKind() == "ConfigMap" && o.GetNamespace() == "knative-eventing" && o.GetName() == "config-features":
		return unstructured.SetNestedField(o.Object, "enabled", "data", "authentication-oidc")
	case o.GetKind() == "ConfigMap" && o.GetNamespace() == "knative-serving" && o.GetName() == "config-autoscaler":
		if err := unstructured.SetNestedField(o.Object, "6s", "data", "stable-window"); err != nil {
			return err
		}
		return unstructured.SetNestedField(o.Object, "6s", "data", "scale-to-zero-grace-period")
	}
	return nil
}

// InstallKnative applies Knative's YAML (KnativeManifests) and the KIngress
// stand-in, and waits until every Deployment of knative-eventing and
// knative-serving is Available.
func (c *Cluster) InstallKnative(ctx context.Context, cacheDir string) error {
	objs, err := KnativeManifests(cacheDir)
	if err != nil {
		return err
	}
	var crds, rest [][]byte
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, b)
		} else {
			rest = append(rest, b)
		}
	}
	if err := c.Apply(ctx, bytes.Join(crds, []byte("\n---\n"))); err != nil {
		return fmt.Errorf("knative CRDs: %w", err)
	}
	var names []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			names = append(names, o.GetName())
		}
	}
	if err := c.waitCRDsEstablished(ctx, names...); err != nil {
		return err
	}
	if err := c.Apply(ctx, bytes.Join(rest, []byte("\n---\n"))); err != nil {
		return fmt.Errorf("knative: %w", err)
	}
	ingress, err := embedded.ReadFile("manifests/kingress-standin.yaml")
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, bytes.ReplaceAll(ingress, []byte("KINGRESS_IMAGE"), []byte(KnativeIngressImage))); err != nil {
		return fmt.Errorf("the KIngress stand-in: %w", err)
	}
	return c.waitDeploymentsAvailable(ctx, 10*time.Minute, "knative-eventing", "knative-serving")
}

// waitDeploymentsAvailable waits until every Deployment of the namespaces
// is Available, naming those that are not when it gives up.
func (c *Cluster) waitDeploymentsAvailable(ctx context.Context, timeout time.Duration, namespaces ...string) error {
	deadline := time.Now().Add(timeout)
	for {
		var waiting []string
		for _, ns := range namespaces {
			ds, err := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				waiting = append(waiting, ns+": "+err.Error())
				continue
			}
			if len(ds.Items) == 0 {
				waiting = append(waiting, ns+": no Deployment yet")
			}
			for _, d := range ds.Items {
				if !available(&d) {
					waiting = append(waiting, ns+"/"+d.Name)
				}
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("knative: not Available after %s: %s", timeout, strings.Join(waiting, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
			return d.Status.ObservedGeneration >= d.Generation
		}
	}
	return false
}

// KingressImage builds the KIngress stand-in's image (cmd/kingress-standin)
// into dir.
func KingressImage(ctx context.Context, dir string) (NodeImage, error) {
	src, err := SourceDir()
	if err != nil {
		return NodeImage{}, err
	}
	root := filepath.Join(src, "..", "..")
	bin := filepath.Join(dir, "kingress-bin")
	if err := ociimage.GoBuild(ctx, "go", root, bin, nil, "./test/cluster/cmd/kingress-standin"); err != nil {
		return NodeImage{}, err
	}
	img, err := ociimage.NewImage(ociimage.Config{
		Entrypoint: []string{"/kingress-standin"},
		User:       fmt.Sprintf("%d:%d", ociimage.NonrootUID, ociimage.NonrootUID),
	}, ociimage.LayerSpec{Tree: ociimage.BinaryTree("kingress-standin", filepath.Join(bin, "kingress-standin")), CreatedBy: "COPY kingress-standin /kingress-standin"})
	if err != nil {
		return NodeImage{}, err
	}
	tar := filepath.Join(dir, "kingress-standin.tar")
	if err := ociimage.WriteArchive(tar, img, KnativeIngressImage); err != nil {
		return NodeImage{}, err
	}
	return NodeImage{Ref: KnativeIngressImage, Tar: tar}, nil
}
