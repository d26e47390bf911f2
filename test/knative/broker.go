//go:build knative

package knative

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BrokerEvent is a CloudEvent posted to the Broker in binary mode.
type BrokerEvent struct {
	ID, Type, Source, Subject string
	Data                      []byte
}

// PostToBroker posts an event to the Broker's ingress with the bearer
// token given (none: unauthenticated) and returns the status code.
func (e *Env) PostToBroker(ctx context.Context, token string, ev BrokerEvent) (int, error) {
	broker, err := e.URL(ctx, BrokerGVR.Resource, "default")
	if err != nil {
		return 0, err
	}
	return e.PostTo(ctx, broker, token, ev)
}

// PostTo posts an event in binary mode to url with the bearer token given
// (none: unauthenticated) and returns the status code.
func (e *Env) PostTo(ctx context.Context, url, token string, ev BrokerEvent) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(ev.Data)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", ev.ID)
	req.Header.Set("Ce-Source", ev.Source)
	req.Header.Set("Ce-Type", ev.Type)
	if ev.Subject != "" {
		req.Header.Set("Ce-Subject", ev.Subject)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.HTTPClient().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// BrokerToken is a token for the Broker's audience of the TES API's OIDC
// identity (the ServiceAccount Eventing made for its SinkBinding
// tesk-tes): what the TES API posts task.submitted and task.cancelled
// with, the only types config/knative's EventPolicies let it post.
func (e *Env) BrokerToken(ctx context.Context) (string, error) {
	sa, err := e.SinkBindingIdentity(ctx, "tesk-tes")
	if err != nil {
		return "", err
	}
	return e.BrokerTokenOf(ctx, sa)
}

// TokenFor is a token of the ServiceAccount sa of namespace ns for
// audience.
func (e *Env) TokenFor(ctx context.Context, ns, sa, audience string) (string, error) {
	tr, err := e.C.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// BrokerTokenOf is a token for the Broker's audience of the ServiceAccount
// sa of the platform's namespace.
func (e *Env) BrokerTokenOf(ctx context.Context, sa string) (string, error) {
	b, err := e.C.Dynamic.Resource(BrokerGVR).Namespace(e.Namespaces.Platform).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	aud, _, _ := unstructured.NestedString(b.Object, "status", "address", "audience")
	if aud == "" {
		return "", fmt.Errorf("the Broker announces no audience (is Eventing's authentication-oidc on?)")
	}
	return e.TokenFor(ctx, e.Namespaces.Platform, sa, aud)
}

// SinkBindingIdentity is the ServiceAccount Eventing made the OIDC identity
// of a SinkBinding of the platform's namespace: whose token it mounts into
// its subject's pods.
func (e *Env) SinkBindingIdentity(ctx context.Context, name string) (string, error) {
	sb, err := e.C.Dynamic.Resource(SinkBindingGVR).Namespace(e.Namespaces.Platform).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	sa, _, _ := unstructured.NestedString(sb.Object, "status", "auth", "serviceAccountName")
	if sa == "" {
		return "", fmt.Errorf("SinkBinding %s has no OIDC identity in its status (status.auth.serviceAccountName)", name)
	}
	return sa, nil
}
