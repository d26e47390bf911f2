package main

import (
	"context"
	"fmt"
	"strings"

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
	{name: "jetstream", what: "NatsJetStreamChannel (JetStream; cluster up -nats)", config: knative.JetStreamConfig},
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

// usePath puts config/knative's Broker on path p and waits until it is
// Ready on it (knative.Env.UseChannel).
func usePath(ctx context.Context, env *knative.Env, p eventPath) error {
	kind, err := env.UseChannel(ctx, p.config, p.async)
	if err != nil {
		return fmt.Errorf("event path %s: %w", p.name, err)
	}
	logf("event path %s: the Broker on a %s, async-handler %v", p.name, kind, p.async)
	return nil
}
