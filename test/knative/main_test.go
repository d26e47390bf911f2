//go:build knative

package knative

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
)

// env is config/knative on the cluster of this run.
var env *Env

// TestMain starts a local cluster with Knative (or, with
// TESK_KNATIVE_CLUSTER=<dir of cluster up -knative>, attaches to a running
// one and leaves it running), deploys config/knative, runs the tests and
// stops what it started.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "knative: "+format+"\n", a...)
	}
	var c *cluster.Cluster
	if dir := os.Getenv("TESK_KNATIVE_CLUSTER"); dir != "" {
		var err error
		if c, err = AttachTo(dir); err != nil {
			logf("TESK_KNATIVE_CLUSTER=%s: %v", dir, err)
			return 1
		}
	} else {
		root, err := RepoRoot()
		if err != nil {
			logf("%v", err)
			return 1
		}
		t0 := time.Now()
		c, err = cluster.Start(ctx, cluster.Options{
			RealNode: true, Services: true, Knative: true,
			BuildNodeImages: cluster.ProjectImages(root, devstack.FilerName+":"+devstack.FilerVersion),
			Timeout:         15 * time.Minute,
			Logf:            logf,
		})
		if err != nil {
			logf("local cluster with Knative: %v", err)
			return 1
		}
		defer c.Stop()
		logf("local cluster with Knative up (%s)", time.Since(t0).Round(time.Second))
	}
	var err error
	env, err = Setup(ctx, c, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer env.Close()
	return m.Run()
}
