package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// AdapterResource is one resource the ApiServerSource adapter watches.
type AdapterResource struct {
	// Group is empty for the core group.
	Group    string
	Version  string
	Resource string // plural, e.g. "jobs", "pods"
	// LabelSelector filters the watched objects, e.g. "taskmaster-name".
	LabelSelector string
}

// AdapterOptions configures StartAdapter.
type AdapterOptions struct {
	// Name of the source (default "tesk-events"); it is the CloudEvents
	// subject prefix and the NAME of the adapter.
	Name string
	// Namespace is the namespace the adapter runs for and watches
	// (default "default").
	Namespace string
	// Namespaces, if set, are the namespaces to watch instead of Namespace.
	Namespaces []string
	// Sink is the URL the events are POSTed to (K_SINK).
	Sink string
	// Resources to watch; at least one.
	Resources []AdapterResource
	// Mode is "Resource" (default: the event data is the whole object) or
	// "Reference".
	Mode string
	// Kubeconfig the adapter uses (default the admin kubeconfig); pass
	// ServiceAccountKubeconfig's result to run it with a Role's permissions.
	Kubeconfig string
	// Env holds extra environment variables (NAME=value).
	Env []string
	// Detach lets the adapter outlive the caller (as Options.Detach).
	Detach bool
	// Timeout bounds the wait for the adapter to start its watches
	// (default 30s).
	Timeout time.Duration
}

// Adapter is a running ApiServerSource receive adapter.
type Adapter struct {
	Process *Process
	// Config is the K_SOURCE_CONFIG JSON it runs with.
	Config string
}

// Stop stops the adapter.
func (a *Adapter) Stop() error { return a.Process.Stop(5 * time.Second) }

// StartAdapter starts the Knative ApiServerSource receive adapter
// (knative.dev/eventing) out of cluster, delivering CloudEvents for the given
// resources to opts.Sink, and returns once it has started its watches. The
// cluster stops it in Stop.
func (c *Cluster) StartAdapter(ctx context.Context, opts AdapterOptions) (*Adapter, error) {
	if opts.Sink == "" {
		return nil, fmt.Errorf("adapter: no sink URL")
	}
	if len(opts.Resources) == 0 {
		return nil, fmt.Errorf("adapter: no resources to watch")
	}
	if opts.Name == "" {
		opts.Name = "tesk-events"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Mode == "" {
		opts.Mode = "Resource"
	}
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = c.Kubeconfig
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	cfg, err := AdapterSourceConfig(opts)
	if err != nil {
		return nil, err
	}
	profiling, err := freePort()
	if err != nil {
		return nil, err
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(c.Dir, "home"),
		"K_SINK=" + opts.Sink,
		"K_SOURCE_CONFIG=" + cfg,
		"NAMESPACE=" + opts.Namespace,
		"NAME=" + opts.Name,
		"SYSTEM_NAMESPACE=" + opts.Namespace,
		"POD_NAME=" + opts.Name,
		"METRICS_DOMAIN=knative.dev/eventing",
		"K_LOGGING_CONFIG={}",
		"K_OBSERVABILITY_CONFIG={}",
		"PROFILING_PORT=" + strconv.Itoa(profiling),
		"KUBECONFIG=" + opts.Kubeconfig,
	}
	env = append(env, opts.Env...)

	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, fmt.Errorf("cluster stopped")
	}
	n := len(c.adapters)
	c.mu.Unlock()
	logPath := filepath.Join(c.Dir, "logs", fmt.Sprintf("adapter-%d-%s.log", n, opts.Name))
	p, err := startProcess("apiserver_receive_adapter", filepath.Join(c.CacheDir, "bin", binAdapter),
		[]string{"--kubeconfig=" + opts.Kubeconfig, "--disable-ha"}, env, logPath, opts.Detach)
	if err != nil {
		return nil, err
	}
	a := &Adapter{Process: p, Config: cfg}
	c.mu.Lock()
	c.adapters = append(c.adapters, a)
	c.mu.Unlock()

	deadline := time.Now().Add(opts.Timeout)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "Starting in resilient mode") || strings.Contains(string(b), "Starting in fail-fast mode") {
			// The reflectors start right after this line.
			return a, nil
		}
		if !p.Alive() {
			return nil, fmt.Errorf("adapter exited; last lines of %s:\n%s", logPath, p.logTail(25))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = a.Stop()
			return nil, fmt.Errorf("adapter did not start its watches in %s; last lines of %s:\n%s", opts.Timeout, logPath, p.logTail(25))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AdapterSourceConfig returns the K_SOURCE_CONFIG JSON for opts, as the
// ApiServerSource controller would compute it.
func AdapterSourceConfig(opts AdapterOptions) (string, error) {
	type gvr struct {
		Group    string `json:"Group"`
		Version  string `json:"Version"`
		Resource string `json:"Resource"`
	}
	type watch struct {
		GVR      gvr    `json:"gvr"`
		Selector string `json:"selector,omitempty"`
	}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		ns := opts.Namespace
		if ns == "" {
			ns = "default"
		}
		namespaces = []string{ns}
	}
	mode := opts.Mode
	if mode == "" {
		mode = "Resource"
	}
	cfg := struct {
		Namespaces    []string `json:"namespaces"`
		AllNamespaces bool     `json:"allNamespaces"`
		Resources     []watch  `json:"resources"`
		Mode          string   `json:"mode"`
	}{Namespaces: namespaces, Mode: mode}
	for _, r := range opts.Resources {
		if r.Version == "" || r.Resource == "" {
			return "", fmt.Errorf("adapter resource %+v: version and resource are required", r)
		}
		cfg.Resources = append(cfg.Resources, watch{GVR: gvr{r.Group, r.Version, r.Resource}, Selector: r.LabelSelector})
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

func freePort() (int, error) { return freePortOn("127.0.0.1") }

// freePortOn returns a port that is free on host now.
func freePortOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
