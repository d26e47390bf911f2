// Package steps holds the taskmaster's behaviour as pure decisions (the task,
// the objects observed on the cluster, the configuration and the time in;
// actions out): it calls no API. Package runner reads the cluster and
// applies the actions, creating the objects package jobspec builds.
package steps
