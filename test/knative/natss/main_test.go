//go:build knative

// Package natss tests a Broker on the NATS JetStream channel of the local
// cluster's NATS option: a cluster of its own with Knative and NATS, no
// config/knative. It runs only with TESK_KNATIVE_NATS=1 (make
// test-knative-nats), or on a running cluster with
// TESK_KNATIVE_CLUSTER=<dir of make cluster-up KNATIVE=1 NATS=1>, so that
// make test-knative starts no second cluster beside test/knative's.
package natss

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

// env reaches the cluster of this run (its Platform namespace unused).
var env *knative.Env

// TestMain starts a local cluster with Knative and NATS (or attaches to
// TESK_KNATIVE_CLUSTER's, and leaves it running), runs the tests and stops
// what it started.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "natss: "+format+"\n", a...)
	}
	var c *cluster.Cluster
	switch dir := os.Getenv("TESK_KNATIVE_CLUSTER"); {
	case os.Getenv("TESK_KNATIVE_NATS") == "":
		logf("skipped: set TESK_KNATIVE_NATS=1 (make test-knative-nats)")
		return 0
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
		t0 := time.Now()
		var err error
		c, err = cluster.Start(context.Background(), cluster.Options{
			RealNode: true, Services: true, Knative: true, NATS: true,
			Timeout: 15 * time.Minute,
			Logf:    logf,
		})
		if err != nil {
			logf("local cluster with Knative and NATS: %v", err)
			return 1
		}
		defer c.Stop()
		logf("local cluster with Knative and NATS up (%s)", time.Since(t0).Round(time.Second))
	}
	n := c.RealNode()
	if n == nil || n.Services == nil {
		logf("the cluster has no real node with Services")
		return 1
	}
	env = &knative.Env{C: c, Node: n, Logf: logf}
	return m.Run()
}
