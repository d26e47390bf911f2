//go:build knative

package natss

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

var jetStreamChannelGVR = schema.GroupVersionResource{Group: "messaging.knative.dev", Version: "v1alpha1", Resource: "natsjetstreamchannels"}

// The dispatchers' pods: the JetStream channel's (made by its controller)
// and the in-memory channel's (Eventing's imc-dispatcher).
const (
	jetStreamDispatcherPods = "messaging.knative.dev/channel=nats-jetstream-channel,messaging.knative.dev/role=dispatcher"
	inMemoryDispatcherPods  = "messaging.knative.dev/channel=in-memory-channel,messaging.knative.dev/role=dispatcher"
)

// restartEvents is how many events each experiment sends; the dispatcher's
// pods are deleted after restartAfter of them.
const (
	restartEvents  = 200
	restartAfter   = 40
	subscriberDown = 5 * time.Second
)

// TestBrokerOnJetStream: a Broker whose spec.config names
// cluster.NatsBrokerConfig runs on a NatsJetStreamChannel, takes an event
// and its Trigger delivers it; then the channel's dispatcher pods are
// deleted (no grace period) while events are being sent and the subscriber
// is down (restart), and every event the Broker's ingress accepted (2xx) is
// delivered at least once once the dispatcher is back.
func TestBrokerOnJetStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := newBroker(ctx, t, "natss-jetstream", map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "name": cluster.NatsBrokerConfig, "namespace": "knative-eventing",
	}, nil)
	ch, err := env.C.Dynamic.Resource(jetStreamChannelGVR).Namespace(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(ch.Items) != 1 {
		t.Fatalf("the Broker's channel: want one NatsJetStreamChannel in %s, got %v (%v)", b.ns, ch, err)
	}
	t.Logf("the Broker's channel: NatsJetStreamChannel %s", ch.Items[0].GetName())
	r := b.restart(ctx, t, jetStreamDispatcherPods, 3*time.Minute)
	if len(r.lost) > 0 {
		t.Errorf("%d of %d accepted events never delivered after the dispatcher's restart: %v", len(r.lost), r.accepted, r.lost)
	}
}

// TestInMemoryBrokerAcrossDispatcherRestart runs the same experiment on a
// Broker of Knative's default channel, the in-memory one, synchronous as
// the chart ships it (broker.asyncDelivery false): the ingress answers a
// sender only once every Trigger has the event, so an event its dispatcher
// held when it died was never accepted, and every accepted one is
// delivered (what values.yaml and docs/helm.md say).
func TestInMemoryBrokerAcrossDispatcherRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := newBroker(ctx, t, "natss-inmemory", nil, nil)
	r := b.restart(ctx, t, inMemoryDispatcherPods, time.Minute)
	t.Logf("in-memory channel: %d of %d accepted events never delivered after the dispatcher's restart", len(r.lost), r.accepted)
	if len(r.lost) > 0 {
		t.Errorf("the synchronous in-memory channel lost %d of %d accepted events across its dispatcher's restart: %v", len(r.lost), r.accepted, r.lost)
	}
}

// TestAsyncInMemoryBrokerAcrossDispatcherRestart runs it on an in-memory
// Broker annotated as the chart's broker.asyncDelivery annotates its own
// (messaging.knative.dev/async-handler: "true": the dispatcher answers as
// soon as it holds an event), and records what that loses.
func TestAsyncInMemoryBrokerAcrossDispatcherRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := newBroker(ctx, t, "natss-inmemory-async", nil, map[string]any{"messaging.knative.dev/async-handler": "true"})
	r := b.restart(ctx, t, inMemoryDispatcherPods, time.Minute)
	t.Logf("in-memory channel, asynchronous: %d of %d accepted events never delivered after the dispatcher's restart", len(r.lost), r.accepted)
}

// broker is a Broker with one Trigger to a recorder on the node's bridge,
// in a namespace of its own, and a sender's token for it
// (authentication-oidc is on: see oidcOn).
type broker struct {
	ns, url, token string
	rec            *recorder
}

// newBroker makes namespace ns with a Broker (spec.config config, nil:
// none; annotations, nil: none), a Trigger for every event to a recorder, and a ServiceAccount
// sender with a token for the Broker; it returns once an event sent is
// delivered.
func newBroker(ctx context.Context, t *testing.T, ns string, config, annotations map[string]any) *broker {
	t.Helper()
	c := env.C
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sender"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rec, err := startRecorder(env.Node.HostIP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.close)
	spec := map[string]any{}
	if config != nil {
		spec["config"] = config
	}
	meta := map[string]any{"name": "default", "namespace": ns}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	br := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
		"metadata": meta,
		"spec":     spec,
	}}
	if _, err := c.Dynamic.Resource(knative.BrokerGVR).Namespace(ns).Create(ctx, br, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
		"metadata": map[string]any{"name": "all", "namespace": ns},
		"spec": map[string]any{
			"broker":     "default",
			"subscriber": map[string]any{"uri": rec.url},
		},
	}}
	if _, err := c.Dynamic.Resource(knative.TriggerGVR).Namespace(ns).Create(ctx, tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	got, err := waitReady(ctx, knative.BrokerGVR, ns, "default", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitReady(ctx, knative.TriggerGVR, ns, "all", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("Broker and Trigger in %s Ready (%s)", ns, time.Since(t0).Round(time.Millisecond))
	b := &broker{ns: ns, rec: rec}
	b.url, _, _ = unstructured.NestedString(got.Object, "status", "address", "url")
	aud, _, _ := unstructured.NestedString(got.Object, "status", "address", "audience")
	if b.url == "" {
		t.Fatalf("the Broker announces no address: %v", got.Object["status"])
	}
	if aud == "" {
		t.Fatalf("the Broker announces no audience (authentication-oidc off?): %v", got.Object["status"])
	}
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "sender",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{aud}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.token = tok.Status.Token

	// The first event, sent until the ingress takes it, then delivered.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, err := b.send(ctx, "first")
		if err == nil && code/100 == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Broker's ingress did not take the first event: %d %v", code, err)
		}
		time.Sleep(time.Second)
	}
	if err := rec.wait(ctx, []string{"first"}, 2*time.Minute); err != nil {
		t.Fatalf("the first event: %v", err)
	}
	t.Logf("the first event delivered through the Trigger (%s)", time.Since(t0).Round(time.Millisecond))
	return b
}

// send posts one event to the Broker's ingress.
func (b *broker) send(ctx context.Context, id string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return (&knative.Env{C: env.C}).PostTo(ctx, b.url, b.token, knative.BrokerEvent{
		ID: id, Type: "test.natss", Source: "test/knative/natss", Data: []byte(`{}`),
	})
}

// restartResult is one experiment's outcome.
type restartResult struct {
	accepted int      // events the ingress took (2xx)
	lost     []string // accepted and never delivered
}

// restart sends restartEvents events one after the other, deletes the pods
// of selector in knative-eventing (no grace period) after restartAfter of
// them, and waits up to wait for every accepted event to be delivered. The
// subscriber answers 503 for subscriberDown from the first event and again
// from the deletion, so that the dispatcher holds events it has not
// delivered when it dies. (The in-memory channel's dispatcher answers the
// Broker's ingress only once the event is delivered, unless the channel
// asks for an asynchronous handler: a sender waits meanwhile.)
func (b *broker) restart(ctx context.Context, t *testing.T, selector string, wait time.Duration) restartResult {
	t.Helper()
	pods, err := env.C.Client.CoreV1().Pods("knative-eventing").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the dispatcher's pods (%s): %v %v", selector, pods, err)
	}
	var accepted []string
	refused := map[int]int{}
	var killedAt time.Time
	t0 := time.Now()
	b.rec.setDown(time.Now().Add(subscriberDown))
	for i := range restartEvents {
		if i == restartAfter {
			zero := int64(0)
			for _, p := range pods.Items {
				if err := env.C.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
					t.Fatalf("delete %s: %v", p.Name, err)
				}
			}
			killedAt = time.Now()
			b.rec.setDown(killedAt.Add(subscriberDown))
			t.Logf("deleted the dispatcher's pods %v after %d events", names(pods.Items), i)
		}
		id := fmt.Sprintf("ev-%03d", i)
		code, err := b.send(ctx, id)
		switch {
		case err != nil:
			refused[0]++
		case code/100 == 2:
			accepted = append(accepted, id)
		default:
			refused[code]++
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("sent %d events in %s: %d accepted, not accepted by status (0: no answer) %v", restartEvents,
		time.Since(t0).Round(time.Millisecond), len(accepted), refused)
	err = b.rec.wait(ctx, accepted, wait)
	missing := b.rec.missing(accepted)
	delivered, dups, refusedAt := b.rec.counts()
	t.Logf("%d events delivered (%d more than once, %d deliveries refused while the subscriber was down) %s after the dispatcher's pods were deleted; %d accepted not delivered (%v)",
		delivered, dups, refusedAt, time.Since(killedAt).Round(time.Millisecond), len(missing), err)
	return restartResult{accepted: len(accepted), lost: missing}
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// waitReady waits until the Knative object is Ready and returns it.
func waitReady(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(timeout)
	for {
		o, err := env.C.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		why := fmt.Sprint(err)
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			why = "no Ready condition"
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Ready" {
					if m["status"] == "True" {
						return o, nil
					}
					why = fmt.Sprintf("Ready %v: %v %v", m["status"], m["reason"], m["message"])
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s %s/%s not Ready after %s: %s", gvr.Resource, ns, name, timeout, why)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// recorder is a Trigger's subscriber on the node's bridge: it counts the
// events it takes by id.
type recorder struct {
	url string
	srv *http.Server

	mu      sync.Mutex
	seen    map[string]int
	until   time.Time // answers 503 before
	refused int
}

// setDown makes the recorder answer 503 until t.
func (r *recorder) setDown(t time.Time) {
	r.mu.Lock()
	r.until = t
	r.mu.Unlock()
}

func startRecorder(host string) (*recorder, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	r := &recorder{url: "http://" + l.Addr().String() + "/", seen: map[string]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(l)
	return r, nil
}

// ServeHTTP takes one event in binary or structured mode by its Ce-Id.
func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get("Ce-Id")
	if id == "" {
		http.Error(w, "no Ce-Id", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Now().Before(r.until) {
		r.refused++
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	r.seen[id]++
	w.WriteHeader(http.StatusAccepted)
}

func (r *recorder) close() { _ = r.srv.Close() }

// missing is the ids not delivered yet.
func (r *recorder) missing(ids []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range ids {
		if r.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// counts is how many ids were delivered, how many of them more than once,
// and how many deliveries the recorder refused.
func (r *recorder) counts() (delivered, dups, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.seen {
		delivered++
		if n > 1 {
			dups++
		}
	}
	return delivered, dups, r.refused
}

// wait waits until every id was delivered.
func (r *recorder) wait(ctx context.Context, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		m := r.missing(ids)
		if len(m) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d not delivered after %s", len(m), len(ids), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
