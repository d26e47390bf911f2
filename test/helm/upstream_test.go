package helm

// The chart's Knative objects, its PodMonitor and its Kafka Broker option
// checked against the components' own Go types and validation, without a
// cluster: each rendered object is decoded strictly (a field its type does
// not know is an error, as Knative's webhooks and the API server decode it)
// and then defaulted and validated as the component's webhook does.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	eventingv1 "knative.dev/eventing/pkg/apis/eventing/v1"
	netcfg "knative.dev/networking/pkg/config"
	"knative.dev/pkg/apis"
	"knative.dev/pkg/logging"
	apiconfig "knative.dev/serving/pkg/apis/config"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	servingv1beta1 "knative.dev/serving/pkg/apis/serving/v1beta1"
	asconfig "knative.dev/serving/pkg/autoscaler/config"
	"knative.dev/serving/pkg/deployment"
	"knative.dev/serving/pkg/observability"
	cfgresources "knative.dev/serving/pkg/reconciler/configuration/resources"
	revconfig "knative.dev/serving/pkg/reconciler/revision/config"
	revresources "knative.dev/serving/pkg/reconciler/revision/resources"
	svcresources "knative.dev/serving/pkg/reconciler/service/resources"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// What eventing-kafka-broker reads, at knative-v1.23.0 (the release of
// Eventing v0.50.0; github.com/knative-extensions/eventing-kafka-broker):
//   - kafkaBrokerClass: kafka.BrokerClass, control-plane/pkg/kafka/broker_class.go;
//   - kafkaConfigMapKeys: kafka.BootstrapServersConfigMapKey,
//     DefaultTopicNumPartitionConfigMapKey and
//     DefaultTopicReplicationFactorConfigMapKey, control-plane/pkg/kafka/topic.go
//     (the Broker's reconciler refuses a ConfigMap without them);
//   - kafkaConfigMap: the ConfigMap its install ships,
//     control-plane/config/eventing-kafka-broker/100-broker/100-kafka-broker-configmap.yaml.
//
// The module is not served by the module proxy here, so they are pinned.
const kafkaBrokerClass = "Kafka"

var (
	kafkaConfigMapKeys = []string{"bootstrap.servers", "default.topic.partitions", "default.topic.replication.factor"}
	kafkaConfigMap     = [2]string{"knative-eventing", "kafka-broker-config"}
)

// webhookContext is the context Knative's webhooks give SetDefaults and
// Validate when an object is created (knative.dev/pkg's
// webhook/resourcesemantics: apis.WithinCreate and the requester), with
// the components' default configuration (no config ConfigMaps).
func webhookContext() context.Context {
	return apis.WithinCreate(apis.WithUserInfo(context.Background(), &authv1.UserInfo{Username: "system:admin"}))
}

// strictDecode decodes a rendered object into into as the API server does
// (sigs.k8s.io/json): a field the type does not know, a field in the wrong
// case or given twice is an error.
func strictDecode(obj map[string]any, into any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return fmt.Errorf("%v", strict)
	}
	return nil
}

// webhookable is what a Knative webhook calls.
type webhookable interface {
	SetDefaults(context.Context)
	Validate(context.Context) *apis.FieldError
}

// admit decodes obj strictly into into and defaults and validates it as
// the component's webhook does on create.
func admit(obj map[string]any, into webhookable) error {
	if err := strictDecode(obj, into); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	ctx := webhookContext()
	into.SetDefaults(ctx)
	if fe := into.Validate(ctx); fe != nil {
		return fmt.Errorf("validation: %w", fe)
	}
	return nil
}

// productionValues are docs/helm.md's production.yaml: the Kafka Broker
// and a DomainMapping with TLS.
func productionValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "docs", "helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n# production.yaml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/helm.md has no production.yaml block")
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(m[1], &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// upstreamRenderings are the renderings the checks run on, by name.
func upstreamRenderings(t *testing.T) map[string]map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]map[string]any{}
	for name, vals := range map[string]map[string]any{
		"production.yaml": productionValues(t),
		"defaults":        {"auth": none},
		"podMonitor":      {"auth": none, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}},
		"ingress":         {"auth": none, "expose": map[string]any{"via": "ingress", "host": "tes.example.org", "tlsSecret": "tes-tls"}},
	} {
		m, err := Render(vals)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = documents(t, m)
	}
	return out
}

func ofKind(docs map[string]map[string]any, apiVersion, kind string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, o := range docs {
		if o["apiVersion"] == apiVersion && o["kind"] == kind {
			out[k] = o
		}
	}
	return out
}

// checkDomainMapping is what Knative Serving's webhook takes of the
// DomainMapping, and that it maps to a Knative Service the chart renders.
func checkDomainMapping(dm map[string]any, docs map[string]map[string]any) error {
	var o servingv1beta1.DomainMapping
	if err := admit(dm, &o); err != nil {
		return err
	}
	ref := o.Spec.Ref
	if ks := docs["Service/"+ref.Name]; ref.APIVersion != "serving.knative.dev/v1" || ref.Kind != "Service" ||
		ks == nil || ks["apiVersion"] != "serving.knative.dev/v1" || dig(ks, "metadata", "namespace") != ref.Namespace {
		return fmt.Errorf("spec.ref %+v is not a Knative Service the chart renders", ref)
	}
	return nil
}

// checkService is what Knative Serving's webhook takes of a Knative
// Service (its defaulting and validation webhooks; not the dry-run of its
// pod, which needs a cluster).
func checkService(ks map[string]any) (*servingv1.Service, error) {
	var o servingv1.Service
	if err := admit(ks, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Every Knative Service and DomainMapping of each rendering is one
// Serving's webhooks admit; production.yaml has a DomainMapping with TLS.
func TestUpstreamServing(t *testing.T) {
	for name, docs := range upstreamRenderings(t) {
		services := ofKind(docs, "serving.knative.dev/v1", "Service")
		if services["Service/tesk-handler"] == nil || services["Service/tesk-tes"] == nil {
			t.Errorf("%s: Knative Services %v, want tesk-handler and tesk-tes among them", name, slices.Sorted(maps.Keys(services)))
		}
		for k, ks := range services {
			if _, err := checkService(ks); err != nil {
				t.Errorf("%s: %s: %v", name, k, err)
			}
		}
		for k, dm := range ofKind(docs, "serving.knative.dev/v1beta1", "DomainMapping") {
			if err := checkDomainMapping(dm, docs); err != nil {
				t.Errorf("%s: %s: %v", name, k, err)
			}
		}
	}
	docs := upstreamRenderings(t)["production.yaml"]
	dms := ofKind(docs, "serving.knative.dev/v1beta1", "DomainMapping")
	if len(dms) != 1 {
		t.Fatalf("production.yaml: %d DomainMappings, want 1", len(dms))
	}
	for _, dm := range dms {
		var o servingv1beta1.DomainMapping
		if err := strictDecode(dm, &o); err != nil || o.Spec.TLS == nil || o.Spec.TLS.SecretName != "tes-example-org-tls" {
			t.Errorf("production.yaml: the DomainMapping's TLS %+v (%v), want the Secret tes-example-org-tls", o.Spec.TLS, err)
		}
	}
}

// The checks refuse what Serving's webhooks refuse.
func TestUpstreamServingRefuses(t *testing.T) {
	docs := upstreamRenderings(t)["production.yaml"]
	var dm, ks map[string]any
	for _, o := range ofKind(docs, "serving.knative.dev/v1beta1", "DomainMapping") {
		dm = o
	}
	ks = docs["Service/tesk-tes"]
	for _, c := range []struct {
		name   string
		check  func(map[string]any) error
		obj    map[string]any
		change func(map[string]any)
		want   string
	}{
		{"tls secret misspelt", func(o map[string]any) error { return checkDomainMapping(o, docs) }, dm,
			func(o map[string]any) { dig(o, "spec", "tls").(map[string]any)["secret"] = "x" }, `unknown field "spec.tls.secret"`},
		{"field in the wrong case", func(o map[string]any) error { return checkDomainMapping(o, docs) }, dm,
			func(o map[string]any) {
				tls := dig(o, "spec", "tls").(map[string]any)
				tls["secretname"] = tls["secretName"]
				delete(tls, "secretName")
			}, `unknown field "spec.tls.secretname"`},
		{"ref in another namespace", func(o map[string]any) error { return checkDomainMapping(o, docs) }, dm,
			func(o map[string]any) { dig(o, "spec", "ref").(map[string]any)["namespace"] = "elsewhere" }, "spec.ref.namespace"},
		{"host not a domain name", func(o map[string]any) error { return checkDomainMapping(o, docs) }, dm,
			func(o map[string]any) { o["metadata"].(map[string]any)["name"] = "tes" }, "metadata.name"},
		{"ref to no rendered Service", func(o map[string]any) error { return checkDomainMapping(o, docs) }, dm,
			func(o map[string]any) { dig(o, "spec", "ref").(map[string]any)["name"] = "tes" }, "not a Knative Service the chart renders"},
		{"bad autoscaling annotation", func(o map[string]any) error { _, err := checkService(o); return err }, ks,
			func(o map[string]any) {
				dig(o, "spec", "template", "metadata", "annotations").(map[string]any)["autoscaling.knative.dev/min-scale"] = "one"
			}, "autoscaling.knative.dev/min-scale"},
		{"container field misspelt", func(o map[string]any) error { _, err := checkService(o); return err }, ks,
			func(o map[string]any) {
				dig(o, "spec", "template", "spec", "containers", 0).(map[string]any)["imagePullPolice"] = "Always"
			},
			`unknown field "spec.template.spec.containers[0].imagePullPolice"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.obj == nil {
				t.Fatal("nothing rendered to change")
			}
			if err := c.check(c.obj); err != nil {
				t.Fatalf("unchanged: %v", err)
			}
			o := clone(c.obj).(map[string]any)
			c.change(o)
			if err := c.check(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// knativePod is the pod Knative Serving makes of a Knative Service: its
// Configuration, the Revision of that and the Revision's Deployment
// (Serving's own reconcilers' resources, with the default config
// ConfigMaps): the user container's port is named user-port there,
// whatever the Service names it.
func knativePod(t *testing.T, ks *servingv1.Service) *corev1.PodTemplateSpec {
	t.Helper()
	ctx := webhookContext()
	cfg := svcresources.MakeConfiguration(ks)
	cfg.Generation = 1
	rev := cfgresources.MakeRevision(ctx, cfg, time.Unix(0, 0))
	rev.SetDefaults(ctx)
	defaults, err := apiconfig.NewDefaultsConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	features, err := apiconfig.NewFeaturesConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	autoscaler, err := asconfig.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	dep, err := deployment.NewConfigFromMap(map[string]string{"queue-sidecar-image": "queue-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	network, err := netcfg.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := logging.NewConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := revresources.MakeDeployment(rev, &revconfig.Config{
		Config:     &apiconfig.Config{Defaults: defaults, Features: features, Autoscaler: autoscaler},
		Deployment: dep, Network: network, Logging: logs, Observability: observability.DefaultConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &d.Spec.Template
}

// checkPodMonitor is what the Prometheus Operator takes of the PodMonitor,
// and that it finds a target in each of pods: its selector matches their
// labels, its namespace selector their namespace and each endpoint's port
// is a port their containers declare (Prometheus keeps only those).
func checkPodMonitor(obj map[string]any, pods map[string]*corev1.PodTemplateSpec, namespace string) error {
	var pm monv1.PodMonitor
	if err := strictDecode(obj, &pm); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	if sel.Empty() {
		return fmt.Errorf("spec.selector selects every pod")
	}
	ns := pm.Spec.NamespaceSelector
	if !ns.Any && !slices.Contains(ns.MatchNames, namespace) && !(len(ns.MatchNames) == 0 && pm.Namespace == namespace) {
		return fmt.Errorf("spec.namespaceSelector %+v (PodMonitor in %q) does not take the pods' namespace %q", ns, pm.Namespace, namespace)
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		return fmt.Errorf("no spec.podMetricsEndpoints")
	}
	for name, pod := range pods {
		if !sel.Matches(labels.Set(pod.Labels)) {
			return fmt.Errorf("spec.selector %s does not match the pods of %s (labels %v)", sel, name, pod.Labels)
		}
		var declared []string
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				declared = append(declared, c.Name+"/"+p.Name)
			}
		}
		for i, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port == nil || *ep.Port == "" {
				return fmt.Errorf("spec.podMetricsEndpoints[%d] names no port", i)
			}
			if !slices.ContainsFunc(declared, func(d string) bool { return strings.HasSuffix(d, "/"+*ep.Port) }) {
				return fmt.Errorf("spec.podMetricsEndpoints[%d].port %q: the pods of %s declare %v", i, *ep.Port, name, declared)
			}
		}
	}
	return nil
}

// The PodMonitor is one the Prometheus Operator's types take, and it finds
// a target in the pods Knative makes of the handler and the TES API.
func TestUpstreamPodMonitor(t *testing.T) {
	docs := upstreamRenderings(t)["podMonitor"]
	pm := docs["PodMonitor/tesk-knative"]
	if pm == nil || pm["apiVersion"] != monv1.SchemeGroupVersion.String() {
		t.Fatalf("no %s PodMonitor/tesk-knative in %v", monv1.SchemeGroupVersion, keys(docs))
	}
	pods := map[string]*corev1.PodTemplateSpec{}
	var namespace string
	for _, name := range []string{"tesk-handler", "tesk-tes"} {
		ks, err := checkService(docs["Service/"+name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pods[name] = knativePod(t, ks)
		namespace = ks.Namespace
	}
	if err := checkPodMonitor(pm, pods, namespace); err != nil {
		t.Fatal(err)
	}
	// The check refuses what does not find the targets.
	for _, c := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"field misspelt", func(o map[string]any) { dig(o, "spec").(map[string]any)["podMetricEndpoints"] = []any{} }, `unknown field "spec.podMetricEndpoints"`},
		{"the Service's port name, which Knative renames", func(o map[string]any) { dig(o, "spec", "podMetricsEndpoints", 0).(map[string]any)["port"] = "http1" }, `port "http1"`},
		{"one Service left out", func(o map[string]any) {
			dig(o, "spec", "selector", "matchExpressions", 0).(map[string]any)["values"] = []any{"tesk-handler"}
		}, "does not match the pods of tesk-tes"},
		{"another namespace", func(o map[string]any) { o["metadata"].(map[string]any)["namespace"] = "monitoring" }, "namespaceSelector"},
	} {
		o := clone(pm).(map[string]any)
		c.change(o)
		if err := checkPodMonitor(o, pods, namespace); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// checkKafkaBroker is what Eventing's webhook and the Kafka Broker's take
// of a Broker of class Kafka, and that its config is the ConfigMap the
// Kafka Broker's install ships.
func checkKafkaBroker(obj map[string]any) error {
	var b eventingv1.Broker
	if err := admit(obj, &b); err != nil {
		return err
	}
	if c := b.Annotations[eventingv1.BrokerClassAnnotationKey]; c != kafkaBrokerClass {
		return fmt.Errorf("class %q, want %q (eventing-kafka-broker's kafka.BrokerClass)", c, kafkaBrokerClass)
	}
	// eventing-kafka-broker's BrokerStub.Validate
	// (control-plane/pkg/apis/eventing/v1/broker_validation.go).
	cfg := b.Spec.Config
	if cfg == nil {
		return fmt.Errorf("spec.config: none, want the ConfigMap %s/%s", kafkaConfigMap[0], kafkaConfigMap[1])
	}
	if !strings.EqualFold(cfg.Kind, "ConfigMap") || cfg.APIVersion != "v1" {
		return fmt.Errorf("spec.config: %s %s, the Kafka Broker's webhook expects a v1 ConfigMap", cfg.APIVersion, cfg.Kind)
	}
	if cfg.Namespace != kafkaConfigMap[0] || cfg.Name != kafkaConfigMap[1] {
		return fmt.Errorf("spec.config: %s/%s, want the ConfigMap the Kafka Broker's install ships, %s/%s", cfg.Namespace, cfg.Name, kafkaConfigMap[0], kafkaConfigMap[1])
	}
	return nil
}

// production.yaml's Broker is a Kafka Broker that Eventing's webhook and
// the Kafka Broker's admit, on the Kafka Broker's own ConfigMap; every
// rendering's Broker is one Eventing's webhook admits; docs/helm.md names
// the keys the Kafka Broker reads of its ConfigMap.
func TestUpstreamKafkaBroker(t *testing.T) {
	renderings := upstreamRenderings(t)
	for name, docs := range renderings {
		var b eventingv1.Broker
		if err := admit(docs["Broker/default"], &b); err != nil {
			t.Errorf("%s: Broker/default: %v", name, err)
		}
	}
	br := renderings["production.yaml"]["Broker/default"]
	err := checkKafkaBroker(br)
	if err != nil {
		t.Error(err)
	}
	// The check refuses what the Kafka Broker does not take.
	for _, c := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"class misspelt", func(o map[string]any) {
			dig(o, "metadata", "annotations").(map[string]any)[eventingv1.BrokerClassAnnotationKey] = "kafka"
		}, `class "kafka"`},
		{"config not a ConfigMap", func(o map[string]any) { dig(o, "spec", "config").(map[string]any)["kind"] = "Secret" }, "expects a v1 ConfigMap"},
		{"config without a name", func(o map[string]any) { delete(dig(o, "spec", "config").(map[string]any), "name") }, "spec.config.name"},
		{"config misspelt", func(o map[string]any) { dig(o, "spec").(map[string]any)["configs"] = dig(o, "spec", "config") }, `unknown field "spec.configs"`},
		{"another ConfigMap", func(o map[string]any) { dig(o, "spec", "config").(map[string]any)["name"] = "config-kafka" }, "want the ConfigMap"},
	} {
		if err != nil {
			break
		}
		o := clone(br).(map[string]any)
		c.change(o)
		if err := checkKafkaBroker(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
	b, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "docs", "helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)## Broker class in production\n(.*?)\n## ").FindSubmatch(b)
	if section == nil {
		t.Fatal("docs/helm.md has no section Broker class in production")
	}
	for _, k := range kafkaConfigMapKeys {
		if !strings.Contains(string(section[1]), "`"+k+"`") {
			t.Errorf("docs/helm.md's Broker class in production does not name the Kafka Broker's ConfigMap key %s", k)
		}
	}
}
