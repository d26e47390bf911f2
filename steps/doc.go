// Package steps holds the taskmaster's behaviour as pure decisions (the task,
// the objects observed on the cluster, the configuration and the time in;
// actions out) and the thin layer that reads the cluster and applies the
// actions, creating the objects package jobspec builds.
package steps
