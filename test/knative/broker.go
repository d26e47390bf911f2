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

// BrokerToken is a token for the Broker's audience of a ServiceAccount of
// the platform's namespace (the TES API's, tesk-tes): what a sender the
// Broker takes events from holds.
func (e *Env) BrokerToken(ctx context.Context) (string, error) {
	b, err := e.C.Dynamic.Resource(BrokerGVR).Namespace(e.Namespaces.Platform).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	aud, _, _ := unstructured.NestedString(b.Object, "status", "address", "audience")
	if aud == "" {
		return "", fmt.Errorf("the Broker announces no audience (is Eventing's authentication-oidc on?)")
	}
	tr, err := e.C.Client.CoreV1().ServiceAccounts(e.Namespaces.Platform).CreateToken(ctx, "tesk-tes",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{aud}}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
