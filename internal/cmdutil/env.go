package cmdutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Env reads a command's settings from its environment (a Knative Service
// sets env): a value of only spaces is unset.
type Env func(string) string

// String is the variable's value, or fallback when it is unset.
func (e Env) String(name, fallback string) string {
	if v := strings.TrimSpace(e(name)); v != "" {
		return v
	}
	return fallback
}

// Bool is the variable as a boolean (false when unset); a value that is not
// one is an error naming it.
func (e Env) Bool(name string) (bool, error) {
	v := e.String(name, "")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean", name, v)
	}
	return b, nil
}

// Port is the HTTP port of PORT (fallback when unset).
func (e Env) Port(fallback int) (int, error) {
	v := e.String("PORT", strconv.Itoa(fallback))
	port, err := strconv.Atoi(v)
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("PORT=%q is not a port number", v)
	}
	return port, nil
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the pod's own namespace, or fallback outside a pod.
func PodNamespace(fallback string) string {
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return fallback
}
