// Package backendparams is the operator's configuration of the TES
// backend_parameters a task may set (tesResources.backend_parameters), and
// what they make of the task's pods. The TES API checks a task's parameters
// with it, and lists the keys it enables in service-info; the handler checks
// them again with it when it reads the task, and places the task's pods by
// them. Both read the same document (BACKEND_PARAMETERS) with Parse.
package backendparams

import corev1 "k8s.io/api/core/v1"

// EnvVar is the environment variable that holds the configuration.
const EnvVar = "BACKEND_PARAMETERS"

// The keys a task may set, when the operator's configuration enables them.
const (
	// KeyNodePool names one of the operator's node pools: the executors
	// get its node selector and tolerations.
	KeyNodePool = "node_pool"
	// KeyPreemptible is "true" or "false": the executors get the node
	// selector and tolerations the operator gives for that value.
	KeyPreemptible = "preemptible"
	// KeyGPUCount is a whole number of GPUs for each executor's container,
	// as a limit and a request of the GPU type's extended resource.
	KeyGPUCount = "gpu_count"
	// KeyGPUType is the extended resource of the GPUs (e.g.
	// nvidia.com/gpu), one of the operator's; the operator's default
	// without it.
	KeyGPUType = "gpu_type"
	// KeyZones is a comma-separated list of zones: every pod of the task
	// (filers too, as the task's volume binds in the zone of its first
	// pod) must run in one of them.
	KeyZones = "zones"
	// KeyServiceAccount is the ServiceAccount the executor pods run as.
	KeyServiceAccount = "service_account"
	// KeyImagePullSecrets is a comma-separated list of secrets the
	// executor pods pull their images with.
	KeyImagePullSecrets = "image_pull_secrets"
)

// ZoneLabel is the node label the zones are matched against.
const ZoneLabel = corev1.LabelTopologyZone
