// Package cmdutil holds what the project's commands share: the Kubernetes
// client configuration and the JSON logging.
package cmdutil

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"knative.dev/pkg/logging"
)

// Client is how a command talks to the API server.
type Client struct {
	// QPS and Burst bound the client's request rate.
	QPS   float32
	Burst int
	// UserAgent names the command in the API server's audit log.
	UserAgent string
}

// RESTConfig is the client configuration: from a kubeconfig when one is
// given, else the pod's in-cluster configuration; requests time out after
// 30 s.
func RESTConfig(kubeconfig string, c Client) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.QPS, rc.Burst = c.QPS, c.Burst
	rc.Timeout = 30 * time.Second
	rc.UserAgent = c.UserAgent
	return rc, nil
}

// loggingConfig is the zap configuration (as in Knative's config-logging):
// JSON lines with an ISO 8601 time, no sampling.
const loggingConfig = `{
  "level": "info",
  "encoding": "json",
  "outputPaths": ["stdout"],
  "errorOutputPaths": ["stderr"],
  "encoderConfig": {
    "timeKey": "ts", "levelKey": "level", "nameKey": "logger", "callerKey": "caller",
    "messageKey": "msg", "stacktraceKey": "stacktrace", "lineEnding": "",
    "levelEncoder": "", "timeEncoder": "iso8601", "durationEncoder": "", "callerEncoder": ""
  }
}`

// NewLogger is the command's logger, named name; debug lowers its level to
// debug.
func NewLogger(name string, debug bool) *zap.SugaredLogger {
	level := ""
	if debug {
		level = "debug"
	}
	log, _ := logging.NewLogger(loggingConfig, level)
	return log.Named(name)
}
