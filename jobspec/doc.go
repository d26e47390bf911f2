// Package jobspec builds the Kubernetes objects a task runs as: its
// volume claim (pvc.go), the inputs and outputs filer's Job (filerjob.go),
// each executor's Job (executorjob.go), and the identity and security
// contexts of their pods (security.go), from the task, the anchor that owns
// them and the settings the builders read (Config). It decides nothing
// about when they are made: that is package steps, which imports it.
package jobspec
