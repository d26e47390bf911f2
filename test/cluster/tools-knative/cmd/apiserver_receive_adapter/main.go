// Command apiserver_receive_adapter is the Knative Eventing ApiServerSource
// receive adapter (knative.dev/eventing/cmd/apiserver_receive_adapter), run out
// of cluster by the local test cluster. It is the upstream main with one
// change: the health probe server, which upstream binds to :8080 on every
// interface, is off, so that the adapter can run next to a handler that
// listens on :8080.
package main

import (
	filteredFactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/signals"

	"knative.dev/eventing/pkg/adapter/apiserver"
	"knative.dev/eventing/pkg/adapter/v2"
	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/eventingtls"
)

const component = "apiserversource"

func main() {
	ctx := signals.NewContext()
	ctx = adapter.WithInjectorEnabled(ctx)
	ctx = adapter.WithHealthProbesDisabled(ctx)

	ctx = filteredFactory.WithSelectors(ctx,
		auth.OIDCLabelSelector,
		eventingtls.TrustBundleLabelSelector,
	)

	adapter.MainWithContext(ctx, component, apiserver.NewEnvConfig, apiserver.NewAdapter)
}
