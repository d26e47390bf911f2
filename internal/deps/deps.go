// Package deps keeps the module's direct dependencies resolved while the
// packages that use them are being written.
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/cloudevents/sdk-go/v2"
	_ "github.com/cloudevents/sdk-go/v2/binding"
	_ "github.com/cloudevents/sdk-go/v2/protocol/http"
	_ "github.com/jlaffaye/ftp"
	_ "github.com/labstack/echo/v4"
	_ "go.uber.org/zap"
	_ "k8s.io/api/batch/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/errors"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "knative.dev/pkg/logging"
	_ "knative.dev/pkg/signals"
	_ "sigs.k8s.io/json"
	_ "sigs.k8s.io/yaml"
)
