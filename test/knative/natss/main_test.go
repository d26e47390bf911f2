//go:build knative

// Package natss tests a Broker on the NATS JetStream channel of the local
// cluster's NATS option: a cluster of its own with Knative and NATS, two
// fake nodes beside the real one, config/knative deployed, and Eventing's
// authentication-oidc on, as the product ships it (see oidcOn). The
// restart experiments make Brokers of their own in namespaces of their
// own; TestDurableOnJetStream puts config/knative's on JetStream.
// make test-knative-nats runs it (a cluster of its own), or go test on a
// running cluster with TESK_KNATIVE_CLUSTER=<dir of make cluster-up
// KNATIVE=1 NATS=1>. make test-knative names its packages and leaves this
// one out, so that it starts no second cluster beside test/knative's.
package natss

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

// env is config/knative on the cluster of this run.
var env *knative.Env

// TestMain starts a local cluster with Knative and NATS and two fake nodes
// (or attaches to TESK_KNATIVE_CLUSTER's, and leaves it running), deploys
// config/knative (knative.Setup), runs the tests and stops what it
// started.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "natss: "+format+"\n", a...)
	}
	var c *cluster.Cluster
	switch dir := os.Getenv("TESK_KNATIVE_CLUSTER"); {
	case dir != "":
		var err error
		if c, err = knative.AttachTo(dir); err != nil {
			logf("TESK_KNATIVE_CLUSTER=%s: %v", dir, err)
			return 1
		}
		if _, err := c.Client.AppsV1().StatefulSets(cluster.NatsNamespace).Get(context.Background(), "nats", metav1.GetOptions{}); err != nil {
			logf("TESK_KNATIVE_CLUSTER=%s has no NATS server (make cluster-up KNATIVE=1 NATS=1): %v", dir, err)
			return 1
		}
	default:
		root, err := knative.RepoRoot()
		if err != nil {
			logf("%v", err)
			return 1
		}
		t0 := time.Now()
		c, err = cluster.Start(context.Background(), cluster.Options{
			RealNode: true, Services: true, Knative: true, NATS: true,
			// The fake nodes play the pods of TestDurableOnJetStream's
			// tasks (cluster.PlayPods), so that they do not load the
			// real node.
			Nodes:           2,
			BuildNodeImages: cluster.ProjectImages(root, devstack.FilerName+":"+devstack.FilerVersion),
			Timeout:         15 * time.Minute,
			Logf:            logf,
		})
		if err != nil {
			logf("local cluster with Knative and NATS: %v", err)
			return 1
		}
		defer c.Stop()
		logf("local cluster with Knative and NATS up (%s)", time.Since(t0).Round(time.Second))
	}
	if err := oidcOn(context.Background(), c); err != nil {
		logf("%v", err)
		return 1
	}
	var err error
	if env, err = knative.Setup(context.Background(), c, logf); err != nil {
		logf("%v", err)
		return 1
	}
	defer env.Close()
	return m.Run()
}

// oidcOn turns Eventing's authentication-oidc on (config-features), as
// the local cluster's Knative and the product have it, also on an attached
// cluster where an earlier run turned it off: the Broker then takes events
// only with a token for it, and its filter takes the JetStream channel's
// deliveries only with the token of the Trigger's Subscription, which the
// dispatcher sends as build-natss.sh patches it
// (test/cluster/tools-natss/eventing-natss.patch).
func oidcOn(ctx context.Context, c *cluster.Cluster) error {
	_, err := c.Client.CoreV1().ConfigMaps("knative-eventing").Patch(ctx, "config-features", types.MergePatchType,
		[]byte(`{"data":{"authentication-oidc":"enabled"}}`), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("config-features: authentication-oidc on: %w", err)
	}
	return nil
}
