//go:build tools

// Package tools pins the NATS JetStream channel of Knative Eventing
// (knative.dev/eventing-natss: its controller, dispatcher and webhook) and
// the NATS server that the local cluster's NATS option runs as images
// (build-natss.sh). Eventing and knative.dev/pkg are raised to the versions
// of tools-platform, so that the channel speaks the cluster's Eventing.
package tools

import (
	_ "github.com/nats-io/nats-server/v2"
	_ "knative.dev/eventing-natss/cmd/jetstream/controller"
	_ "knative.dev/eventing-natss/cmd/jetstream/dispatcher"
	_ "knative.dev/eventing-natss/cmd/webhook"
)
