package knative

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// JetStreamConfig is the Broker's spec.config that puts it on a
// NatsJetStreamChannel (a cluster started with NATS).
var JetStreamConfig = map[string]any{
	"apiVersion": "v1", "kind": "ConfigMap", "name": cluster.NatsBrokerConfig, "namespace": "knative-eventing",
}

// UseChannel puts config/knative's Broker on the channel config names
// (its spec.config; nil: none, the cluster's default, the in-memory
// channel), answering senders before its subscribers did if async (the
// in-memory channel's messaging.knative.dev/async-handler). The
// annotation changes in place (the Broker passes it to its channel); a
// different config deletes the Broker and creates it again, as its
// spec.config cannot change. It waits until config/knative is Ready and
// the Broker's channel is of the kind config names, and returns that kind.
func (e *Env) UseChannel(ctx context.Context, config map[string]any, async bool) (string, error) {
	brokers := e.C.Dynamic.Resource(BrokerGVR).Namespace(e.Namespaces.Platform)
	b, err := brokers.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	have, _, _ := unstructured.NestedMap(b.Object, "spec", "config")
	if reflect.DeepEqual(have, config) || (len(have) == 0 && config == nil) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"messaging.knative.dev/async-handler":"%v"}}}`, async)
		if _, err := brokers.Patch(ctx, "default", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			return "", err
		}
	} else {
		if err := brokers.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
			return "", err
		}
		for {
			if _, err := brokers.Get(ctx, "default", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			if err := sleep(ctx, time.Second); err != nil {
				return "", err
			}
		}
		nb := &unstructured.Unstructured{Object: map[string]any{"apiVersion": b.GetAPIVersion(), "kind": b.GetKind()}}
		nb.SetName("default")
		nb.SetNamespace(e.Namespaces.Platform)
		nb.SetLabels(b.GetLabels())
		ann := b.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["messaging.knative.dev/async-handler"] = fmt.Sprint(async)
		nb.SetAnnotations(ann)
		if config != nil {
			nb.Object["spec"] = map[string]any{"config": config}
		}
		if _, err := brokers.Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		if err := e.resolveSinkBindingsAgain(ctx); err != nil {
			return "", err
		}
	}
	if err := e.WaitReady(ctx, 5*time.Minute); err != nil {
		return "", err
	}
	kind, err := e.ChannelKind(ctx)
	if err != nil {
		return "", err
	}
	want := "InMemoryChannel"
	if config != nil {
		want = "NatsJetStreamChannel"
	}
	if kind != want {
		return "", fmt.Errorf("the Broker's channel is a %s, want a %s", kind, want)
	}
	return kind, nil
}

// ChannelKind is the kind of the Broker's channel, as an
// MTChannelBasedBroker records it in its status's annotations.
func (e *Env) ChannelKind(ctx context.Context) (string, error) {
	b, err := e.C.Dynamic.Resource(BrokerGVR).Namespace(e.Namespaces.Platform).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	k, _, _ := unstructured.NestedString(b.Object, "status", "annotations", "knative.dev/channelKind")
	if k == "" {
		return "", fmt.Errorf("the Broker names no channel in its status: %v", b.Object["status"])
	}
	return k, nil
}

// resolveSinkBindingsAgain waits until the Broker announces its address
// and then touches the platform's SinkBindings (an annotation), so that
// they resolve their sink again: one that resolved it while the Broker was
// gone was seen to stay NoAddressable (address not set for Kind = Broker)
// for minutes after the new Broker had its address, until changed.
func (e *Env) resolveSinkBindingsAgain(ctx context.Context) error {
	brokers := e.C.Dynamic.Resource(BrokerGVR).Namespace(e.Namespaces.Platform)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		b, err := brokers.Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			if u, _, _ := unstructured.NestedString(b.Object, "status", "address", "url"); u != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Broker announces no address 5m after it was created again (%v)", err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	bindings := e.C.Dynamic.Resource(SinkBindingGVR).Namespace(e.Namespaces.Platform)
	list, err := bindings.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"tesk.test/broker-created":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	for _, sb := range list.Items {
		if _, err := bindings.Patch(ctx, sb.GetName(), "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("SinkBinding %s: %w", sb.GetName(), err)
		}
	}
	return nil
}
