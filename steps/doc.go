// Package steps holds the taskmaster's behaviour as pure decisions (the task,
// the objects observed on the cluster, the configuration and the time in;
// actions out), the builders of the objects those actions create, and the thin
// layer that reads the cluster and applies the actions.
package steps
