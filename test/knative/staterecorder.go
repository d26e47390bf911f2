//go:build knative

package knative

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elixir-cloud-aai/tesk-knative/events"
)

// StateRecorder is a subscriber of the tasks' state change events that is
// down (503) for a while from the first delivery, then takes them: what a
// notifier behind a Trigger sees across an outage of its own.
type StateRecorder struct {
	URL  string
	down time.Duration
	srv  *http.Server

	mu       sync.Mutex
	first    time.Time
	refused  int
	probes   int
	received []ReceivedState
}

// ProbeSource is the source of the events SubscribeStates posts to see its
// Trigger deliver: the recorder takes them at once, up or down, and
// neither records them nor starts its time down with them.
const ProbeSource = "test/knative/probe"

// ReceivedState is a state change the recorder took, when, at which path,
// and the event's extension attributes (its Ce- headers, by their names in
// lower case, but those of the attributes every event has).
type ReceivedState struct {
	events.StateChangedData
	At         time.Time
	Path       string
	Extensions map[string]string
}

// Marked reports whether the event carried the mark of the changes of a
// task that names an address of its own (events.ExtensionNotify), which
// the chart's Trigger tesk-state-notify takes.
func (r ReceivedState) Marked() bool {
	return r.Extensions[events.ExtensionNotify] == events.NotifyMarked
}

// Carries reports whether an extension attribute of the event holds s (a
// task's address, say).
func (r ReceivedState) Carries(s string) bool {
	for _, v := range r.Extensions {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// coreAttributes are the CloudEvents attributes that are no extension.
var coreAttributes = []string{"specversion", "id", "source", "type", "subject", "time", "dataschema", "datacontenttype"}

// extensionsOf are the extension attributes of an event in binary mode.
func extensionsOf(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		name, ok := strings.CutPrefix(strings.ToLower(k), "ce-")
		if ok && !slices.Contains(coreAttributes, name) && len(v) > 0 {
			out[name] = v[0]
		}
	}
	return out
}

// StartStateRecorder listens on host (an address the cluster's pods reach)
// and answers 503 for down from the first delivery.
func StartStateRecorder(host string, down time.Duration) (*StateRecorder, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	r := &StateRecorder{URL: "http://" + l.Addr().String() + "/", down: down}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(l)
	return r, nil
}

// ServeHTTP takes one event in binary mode.
func (r *StateRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Header.Get("Ce-Source") == ProbeSource {
		r.probes++
		w.WriteHeader(http.StatusAccepted)
		return
	}
	now := time.Now()
	if r.first.IsZero() {
		r.first = now
	}
	if now.Sub(r.first) < r.down {
		r.refused++
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var d events.StateChangedData
	if req.Header.Get("Ce-Type") != events.TypeTaskStateChanged || json.NewDecoder(req.Body).Decode(&d) != nil {
		http.Error(w, "not a state change", http.StatusBadRequest)
		return
	}
	r.received = append(r.received, ReceivedState{d, now, req.URL.Path, extensionsOf(req.Header)})
	w.WriteHeader(http.StatusAccepted)
}

// Seen is what the recorder refused and what it took so far.
func (r *StateRecorder) Seen() (refused int, received []ReceivedState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused, append([]ReceivedState(nil), r.received...)
}

// Probes is how many of SubscribeStates' probes it took.
func (r *StateRecorder) Probes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.probes
}

// Up is when the recorder began to take events (zero before any came).
func (r *StateRecorder) Up() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first.IsZero() {
		return time.Time{}
	}
	return r.first.Add(r.down)
}

// Close stops it.
func (r *StateRecorder) Close() { r.srv.Close() }

// RevisionGVR is Knative Serving's Revision.
var RevisionGVR = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "revisions"}

// SubscribeStates creates a Trigger of the platform's Broker that takes the
// tasks' state change events to the recorder, retrying for minutes (linear,
// from 0.1 s), and waits until it is Ready and has delivered: a Trigger is
// Ready before the Broker's channel fans events out to it, and an event
// the Broker takes in between never reaches it. It posts probes
// (ProbeSource) as the handler's state events do, with a token of the
// SinkBinding tesk-handler-state-events' identity, until one arrives.
func (e *Env) SubscribeStates(ctx context.Context, name string, r *StateRecorder) error {
	tr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
		"metadata": map[string]any{"name": name, "namespace": e.Namespaces.Platform},
		"spec": map[string]any{
			"broker":     "default",
			"filter":     map[string]any{"attributes": map[string]any{"type": events.TypeTaskStateChanged}},
			"subscriber": map[string]any{"uri": r.URL},
			// Linear from 0.1 s: the k-th retry k × 0.1 s after the one
			// before, 3 minutes in all; a minute on, 3.5 s apart.
			"delivery": map[string]any{"retry": int64(60), "backoffPolicy": "linear", "backoffDelay": "PT0.1S"},
		},
	}}
	triggers := e.C.Dynamic.Resource(TriggerGVR).Namespace(e.Namespaces.Platform)
	if _, err := triggers.Create(ctx, tr, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		o, err := triggers.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if ok, _ := ready(o); ok {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Trigger %s not Ready after 2m (%v)", name, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	sa, err := e.SinkBindingIdentity(ctx, "tesk-handler-state-events")
	if err != nil {
		return err
	}
	for i := 0; r.Probes() == 0; i++ {
		token, err := e.BrokerTokenOf(ctx, sa)
		if err != nil {
			return err
		}
		ev := BrokerEvent{ID: fmt.Sprintf("probe-%s-%d", name, i), Type: events.TypeTaskStateChanged, Source: ProbeSource,
			Subject: "task-probe000000", Data: []byte(`{"id":"task-probe000000","old_state":"QUEUED","new_state":"QUEUED"}`)}
		code, err := e.PostToBroker(ctx, token, ev)
		if err != nil {
			return err
		}
		if code/100 != 2 {
			return fmt.Errorf("the Broker answered %d to a probe of Trigger %s posted as %s", code, name, sa)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Trigger %s delivered none of %d probes by %s", name, i+1, deadline.Format(time.TimeOnly))
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// LatestReadyRevision is the Revision a Knative Service of the platform's
// namespace made Ready last.
func (e *Env) LatestReadyRevision(ctx context.Context, service string) (*unstructured.Unstructured, error) {
	svc, err := e.C.Dynamic.Resource(ServiceGVR).Namespace(e.Namespaces.Platform).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	name, _, _ := unstructured.NestedString(svc.Object, "status", "latestReadyRevisionName")
	if name == "" {
		return nil, fmt.Errorf("Service %s has no ready revision", service)
	}
	return e.C.Dynamic.Resource(RevisionGVR).Namespace(e.Namespaces.Platform).Get(ctx, name, metav1.GetOptions{})
}

// StateChain checks a task's state changes as a subscriber received them
// (in any order, redeliveries included) against the states GET showed: the
// changes link from QUEUED to GET's final state, each old state the new one
// before it, and every state GET showed is among them. It returns the
// chain and when the final change was received.
func StateChain(received []ReceivedState, id string, shown []string) ([]string, time.Time, error) {
	next := map[string]ReceivedState{}
	for _, r := range received {
		if r.ID != id {
			continue
		}
		if prev, ok := next[r.OldState]; ok && prev.NewState != r.NewState {
			return nil, time.Time{}, fmt.Errorf("task %s: %s changed to both %s and %s", id, r.OldState, prev.NewState, r.NewState)
		}
		if prev, ok := next[r.OldState]; !ok || r.At.Before(prev.At) {
			next[r.OldState] = r
		}
	}
	if len(shown) == 0 {
		return nil, time.Time{}, fmt.Errorf("task %s: GET showed no state", id)
	}
	final := shown[len(shown)-1]
	chain := []string{"QUEUED"}
	var at time.Time
	for state := "QUEUED"; state != final; {
		r, ok := next[state]
		if !ok || len(chain) > 10 {
			return chain, time.Time{}, fmt.Errorf("task %s: no change from %s received (chain %v, GET showed %v)", id, state, chain, shown)
		}
		state, at = r.NewState, r.At
		chain = append(chain, state)
	}
	for _, s := range shown {
		if !slices.Contains(chain, s) {
			return chain, at, fmt.Errorf("task %s: GET showed %s, which no received change names (chain %v)", id, s, chain)
		}
	}
	return chain, at, nil
}

// Restarts says which containers of namespace's pods restarted, when and
// why (the in-memory channel's dispatcher loses what it holds when it
// does); "none" where none did.
func (e *Env) Restarts(ctx context.Context, namespace string) string {
	pods, err := e.C.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount == 0 {
				continue
			}
			last := "?"
			if term := c.LastTerminationState.Terminated; term != nil {
				last = fmt.Sprintf("%s, exit %d at %s", term.Reason, term.ExitCode, term.FinishedAt.UTC().Format(time.TimeOnly))
			}
			out = append(out, fmt.Sprintf("%s/%s %d× (last: %s)", p.Name, c.Name, c.RestartCount, last))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
