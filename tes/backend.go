package tes

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// CheckBackendParameters checks a task's backend parameters against the
// operator's configuration (c; nil enables none), with the function the
// handler checks them with again when it starts the task. It keeps in the
// task the parameters the service acts on, in their lower-case keys, and
// returns the keys it dropped: those the configuration does not enable,
// which the specification says are neither stored nor returned. With
// backend_parameters_strict such a key refuses the task; a value the
// configuration does not allow always does. The error names the key and
// what is allowed.
func CheckBackendParameters(t *tesv1.Task, c *backendparams.Config) (ignored []string, err error) {
	r := t.Resources
	if r == nil || len(r.BackendParameters) == 0 {
		return nil, nil
	}
	accepted, ignored, err := c.Check(r.BackendParameters, r.BackendParametersStrict)
	if err != nil {
		return nil, bad("%v", err)
	}
	r.BackendParameters = accepted
	return ignored, nil
}

// IgnoredParametersLog is the system log line of a task whose backend
// parameters were dropped.
func IgnoredParametersLog(keys []string) string {
	return "resources.backend_parameters: " + strings.Join(keys, ", ") + " ignored: not supported by this service (service-info lists the supported keys)"
}

// noteIgnored records the dropped keys on the task's anchor: the task's
// view shows them in its system_logs.
func noteIgnored(cm *corev1.ConfigMap, ignored []string) {
	if len(ignored) > 0 {
		cm.Annotations[taskmeta.AnnotationSystemLog] = IgnoredParametersLog(ignored)
	}
}
