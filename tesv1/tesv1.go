// Package tesv1 is the GA4GH TES 1.1 task model as clients send and read it
// (ga4gh/task-execution-schemas, tag v1.1): the types with exactly the
// specification's fields, the states and the views. The TES API decodes
// requests into them, and the handler's view builds them, so a task has one
// shape wherever it is shown.
package tesv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
)

// The TES 1.1 types, with exactly the specification's fields. Optional fields
// are left out of answers when empty, except where the specification
// requires them (tesTaskLog.logs and outputs, tesExecutorLog.exit_code).

// Task is tesTask.
type Task struct {
	ID           string     `json:"id,omitempty"`
	State        string     `json:"state,omitempty"`
	Name         string     `json:"name,omitempty"`
	Description  string     `json:"description,omitempty"`
	Inputs       []Input    `json:"inputs,omitempty"`
	Outputs      []Output   `json:"outputs,omitempty"`
	Resources    *Resources `json:"resources,omitempty"`
	Executors    []Executor `json:"executors,omitempty"`
	Volumes      []string   `json:"volumes,omitempty"`
	Tags         TagMap     `json:"tags,omitempty"`
	Logs         []TaskLog  `json:"logs,omitempty"`
	CreationTime string     `json:"creation_time,omitempty"`
}

// TagMap is tesTask.tags.
type TagMap map[string]string

// Executor is tesExecutor.
type Executor struct {
	Image       string            `json:"image"`
	Command     []string          `json:"command"`
	Workdir     string            `json:"workdir,omitempty"`
	Stdin       string            `json:"stdin,omitempty"`
	Stdout      string            `json:"stdout,omitempty"`
	Stderr      string            `json:"stderr,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	IgnoreError bool              `json:"ignore_error,omitempty"`
}

// Input is tesInput.
type Input struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
	Path        string `json:"path"`
	Type        string `json:"type,omitempty"`
	Content     string `json:"content,omitempty"`
	Streamable  bool   `json:"streamable,omitempty"`
}

// Output is tesOutput.
type Output struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url"`
	Path        string `json:"path"`
	PathPrefix  string `json:"path_prefix,omitempty"`
	Type        string `json:"type,omitempty"`
}

// Resources is tesResources.
type Resources struct {
	CPUCores                int32             `json:"cpu_cores,omitempty"`
	Preemptible             bool              `json:"preemptible,omitempty"`
	RAMGB                   float64           `json:"ram_gb,omitempty"`
	DiskGB                  float64           `json:"disk_gb,omitempty"`
	Zones                   []string          `json:"zones,omitempty"`
	BackendParameters       map[string]string `json:"backend_parameters,omitempty"`
	BackendParametersStrict bool              `json:"backend_parameters_strict,omitempty"`
}

// UnmarshalJSON reads tesResources as the specification's JSON mapping
// allows: cpu_cores, an integer, may be written as a whole number with a
// fraction part (2.0), as protojson and other TES servers read it.
// Unknown fields are refused, as everywhere in a task.
func (r *Resources) UnmarshalJSON(b []byte) error {
	type plain Resources
	var aux struct {
		plain
		CPUCores json.RawMessage `json:"cpu_cores,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Field = strings.TrimPrefix(te.Field, "plain.") // the decoder above names the embedded struct
		}
		return err
	}
	*r = Resources(aux.plain)
	r.CPUCores = 0
	raw := string(bytes.TrimSpace(aux.CPUCores))
	if raw == "" || raw == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || !json.Valid(aux.CPUCores) || raw[0] == '"' {
		return invalid.Errorf("resources.cpu_cores: %s is not a number of cores", raw)
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return invalid.Errorf("resources.cpu_cores: %s is not a whole number of cores", raw)
	}
	r.CPUCores = int32(f)
	return nil
}

// TaskLog is tesTaskLog.
type TaskLog struct {
	Logs       []ExecutorLog     `json:"logs"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	StartTime  string            `json:"start_time,omitempty"`
	EndTime    string            `json:"end_time,omitempty"`
	Outputs    []OutputFileLog   `json:"outputs"`
	SystemLogs []string          `json:"system_logs,omitempty"`
}

// ExecutorLog is tesExecutorLog.
type ExecutorLog struct {
	StartTime string `json:"start_time,omitempty"`
	EndTime   string `json:"end_time,omitempty"`
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	ExitCode  int32  `json:"exit_code"`
}

// OutputFileLog is tesOutputFileLog.
type OutputFileLog struct {
	URL       string `json:"url"`
	Path      string `json:"path"`
	SizeBytes string `json:"size_bytes"`
}

// CreateTaskResponse is tesCreateTaskResponse.
type CreateTaskResponse struct {
	ID string `json:"id"`
}

// ListTasksResponse is tesListTasksResponse.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"next_page_token,omitempty"`
}

// ServiceInfo is tesServiceInfo: GA4GH service-info's Service with the TES
// fields.
type ServiceInfo struct {
	ID                            string       `json:"id"`
	Name                          string       `json:"name"`
	Type                          ServiceType  `json:"type"`
	Description                   string       `json:"description,omitempty"`
	Organization                  Organization `json:"organization"`
	ContactURL                    string       `json:"contactUrl,omitempty"`
	DocumentationURL              string       `json:"documentationUrl,omitempty"`
	CreatedAt                     string       `json:"createdAt,omitempty"`
	UpdatedAt                     string       `json:"updatedAt,omitempty"`
	Environment                   string       `json:"environment,omitempty"`
	Version                       string       `json:"version"`
	Storage                       []string     `json:"storage,omitempty"`
	TesResourcesBackendParameters []string     `json:"tesResources_backend_parameters"`
}

// ServiceType is service-info's ServiceType (artifact tes).
type ServiceType struct {
	Group    string `json:"group"`
	Artifact string `json:"artifact"`
	Version  string `json:"version"`
}

// Organization is service-info's organization.
type Organization struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Views of a task (the view query parameter).
const (
	ViewMinimal = "MINIMAL"
	ViewBasic   = "BASIC"
	ViewFull    = "FULL"
)

// States is every tesState, for the state filter.
var States = []string{"UNKNOWN", "QUEUED", "INITIALIZING", "RUNNING", "PAUSED", "COMPLETE",
	"EXECUTOR_ERROR", "SYSTEM_ERROR", "CANCELED", "PREEMPTED", "CANCELING"}

// The states of a task (tesState) that this service sets. A task is never
// UNKNOWN or PAUSED here.
const (
	StateQueued        = "QUEUED"
	StateInitializing  = "INITIALIZING"
	StateRunning       = "RUNNING"
	StateComplete      = "COMPLETE"
	StateExecutorError = "EXECUTOR_ERROR"
	StateSystemError   = "SYSTEM_ERROR"
	StateCanceling     = "CANCELING"
	StateCanceled      = "CANCELED"
	// StatePreempted: the cluster took the executor's pod away (evicted,
	// preempted, lost with its node) more often than the service runs it
	// again.
	StatePreempted = "PREEMPTED"
)

// IsFinal reports whether a state is one a task never leaves: COMPLETE,
// EXECUTOR_ERROR, SYSTEM_ERROR, CANCELED and PREEMPTED.
func IsFinal(state string) bool {
	switch state {
	case StateComplete, StateExecutorError, StateSystemError, StateCanceled, StatePreempted:
		return true
	}
	return false
}
