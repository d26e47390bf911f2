// Package runner is the cluster I/O of the steps: it reads a task's objects
// from the API server, decides with steps.Decide, and applies the plan,
// creating the objects package jobspec builds; it sweeps a namespace, keeps
// the users' share ledgers, tells the tasks' state changes, and reads the
// executors' logs.
package runner
