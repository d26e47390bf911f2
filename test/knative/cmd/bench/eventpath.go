package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

// eventPath is one way the events reach the handler that the scale run
// measures: the channel under config/knative's Broker and how it answers
// senders.
type eventPath struct {
	name, what string
	// async is the Broker's messaging.knative.dev/async-handler: the
	// in-memory channel answers a sender before its subscribers answered.
	async bool
	// config is the Broker's spec.config (nil: none, the cluster's default
	// channel, the in-memory one).
	config map[string]any
}

// eventPaths are the paths -paths names, in the order it may name them.
var eventPaths = []eventPath{
	{name: "imc", what: "in-memory channel, synchronous (config/knative's)"},
	{name: "imc-async", what: "in-memory channel, asynchronous", async: true},
	{name: "jetstream", what: "NatsJetStreamChannel (JetStream; cluster up -nats)", config: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "name": cluster.NatsBrokerConfig, "namespace": "knative-eventing",
	}},
}

// parsePaths reads -paths: names of eventPaths, comma-separated, each at
// most once.
func parsePaths(s string) ([]eventPath, error) {
	var out []eventPath
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := -1
		for j, p := range eventPaths {
			if p.name == name {
				i = j
			}
		}
		if i < 0 || seen[name] {
			names := make([]string, len(eventPaths))
			for j, p := range eventPaths {
				names[j] = p.name
			}
			return nil, fmt.Errorf("-paths %q: want some of %s, comma-separated, each once", s, strings.Join(names, ", "))
		}
		seen[name] = true
		out = append(out, eventPaths[i])
	}
	return out, nil
}

// usePath puts config/knative's Broker on path p: the async annotation
// changed in place (the Broker passes it to its channel), a different
// channel by deleting the Broker and creating it again (its spec.config
// cannot change); then it waits until config/knative is Ready and the
// Broker's channel is of p's kind.
func usePath(ctx context.Context, env *knative.Env, p eventPath) error {
	brokers := env.C.Dynamic.Resource(knative.BrokerGVR).Namespace(knative.Platform)
	b, err := brokers.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("event path %s: %w", p.name, err)
	}
	config, _, _ := unstructured.NestedMap(b.Object, "spec", "config")
	async := fmt.Sprint(p.async)
	if reflect.DeepEqual(config, p.config) || (len(config) == 0 && p.config == nil) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"messaging.knative.dev/async-handler":%q}}}`, async)
		if _, err := brokers.Patch(ctx, "default", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("event path %s: %w", p.name, err)
		}
	} else {
		if err := brokers.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("event path %s: %w", p.name, err)
		}
		for {
			if _, err := brokers.Get(ctx, "default", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
		}
		nb := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": b.GetAPIVersion(), "kind": b.GetKind(),
			"metadata": map[string]any{"name": "default", "namespace": knative.Platform, "labels": toAny(b.GetLabels())},
		}}
		ann := b.GetAnnotations()
		ann["messaging.knative.dev/async-handler"] = async
		nb.SetAnnotations(ann)
		if p.config != nil {
			nb.Object["spec"] = map[string]any{"config": p.config}
		}
		if _, err := brokers.Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("event path %s: %w", p.name, err)
		}
	}
	if err := env.WaitReady(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("event path %s: %w", p.name, err)
	}
	kind, err := channelKind(ctx, env)
	if err != nil {
		return fmt.Errorf("event path %s: %w", p.name, err)
	}
	want := "InMemoryChannel"
	if p.config != nil {
		want = "NatsJetStreamChannel"
	}
	if kind != want {
		return fmt.Errorf("event path %s: the Broker's channel is a %s, want a %s", p.name, kind, want)
	}
	logf("event path %s: the Broker on a %s, async-handler %s", p.name, kind, async)
	return nil
}

// channelKind is the kind of the Broker's channel, as its status names it.
func channelKind(ctx context.Context, env *knative.Env) (string, error) {
	b, err := env.C.Dynamic.Resource(knative.BrokerGVR).Namespace(knative.Platform).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	// MTChannelBasedBroker records its channel in its status's annotations.
	k, _, _ := unstructured.NestedString(b.Object, "status", "annotations", "knative.dev/channelKind")
	if k == "" {
		return "", fmt.Errorf("the Broker names no channel in its status: %v", b.Object["status"])
	}
	return k, nil
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
