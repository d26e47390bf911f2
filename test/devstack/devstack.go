// Package devstack runs the service on a local cluster as it runs on
// Knative: the handler binary with the Role of config/knative, fed by the
// ApiServerSource receive adapter, and swept periodically as a PingSource
// would. make dev, make demo and the README's tests use it.
package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// The filer image of the stack's handler (FILER_NAME:FILER_VERSION): on a
// real node, the image cmd/cluster up builds from the checkout.
const (
	FilerName    = "tesk-filer"
	FilerVersion = "dev"
)

// Options of a stack.
type Options struct {
	// Root is the repository (config/knative/rbac.yaml is read from it).
	Root string
	// Namespace of the tasks.
	Namespace string
	// Port of the handler on 127.0.0.1.
	Port int
	// Handler is the handler binary.
	Handler string
	// Sweep is how often to send the sweep (0: never).
	Sweep time.Duration
	// TES is the TES API binary, served on TESPort (0: no TES API).
	TES     string
	TESPort int
	// Env is extra environment of the handler and the TES API (NAME=value).
	Env []string
	// Stdout and Stderr receive the handler's logs (default: os.Stderr).
	Stdout, Stderr io.Writer
}

// Stack is a running handler and adapter.
type Stack struct {
	URL string
	// TESURL is the TES API's, if it runs.
	TESURL  string
	tes     *exec.Cmd
	handler *exec.Cmd
	adapter *cluster.Adapter
	cancel  context.CancelFunc
}

// Start starts the stack on the cluster.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (*Stack, error) {
	if err := ensureNamespace(ctx, c, o.Namespace); err != nil {
		return nil, err
	}
	if err := ApplyRBAC(ctx, c, filepath.Join(o.Root, "config", "knative", "rbac.yaml"), o.Namespace, nil); err != nil {
		return nil, err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, o.Namespace, HandlerRole)
	if err != nil {
		return nil, err
	}
	out, errw := o.Stdout, o.Stderr
	if out == nil {
		out = os.Stderr
	}
	if errw == nil {
		errw = os.Stderr
	}
	if err := portFree(o.Port); err != nil {
		return nil, err
	}
	s := &Stack{URL: fmt.Sprintf("http://127.0.0.1:%d", o.Port)}
	h := exec.Command(o.Handler, "--kubeconfig", kubeconfig, "--namespace", o.Namespace, "--port", fmt.Sprint(o.Port))
	// A local stack takes the task JSON in the events (the README's curl
	// examples, the demo), a deployment does not (behaviour §5.2); and its
	// executors may choose their fates on kwok nodes (test/cluster/stages).
	h.Env = append(append(os.Environ(), "FILER_NAME="+FilerName, "FILER_VERSION="+FilerVersion,
		"TRUST_EVENTS=true", "EXECUTOR_POD_ANNOTATIONS="+cluster.FateAnnotationPrefix), o.Env...)
	h.Stdout, h.Stderr = out, errw
	h.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := h.Start(); err != nil {
		return nil, fmt.Errorf("start the handler (%s; run `make build`): %w", o.Handler, err)
	}
	s.handler = h
	if err := waitReady(ctx, s.URL+"/readyz"); err != nil {
		s.Stop()
		return nil, err
	}
	s.adapter, err = c.StartAdapter(ctx, cluster.AdapterOptions{
		Name:      "tesk-events",
		Namespace: o.Namespace,
		Sink:      s.URL,
		Resources: AdapterResources(),
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	if o.TESPort != 0 {
		if err := s.startTES(ctx, c, o, s.URL, out, errw); err != nil {
			s.Stop()
			return nil, err
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if o.Sweep > 0 {
		go func() {
			t := time.NewTicker(o.Sweep)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
					_, _ = Post(s.URL, events.TypePing, []byte(`{}`))
				}
			}
		}()
	}
	return s, nil
}

// Stop stops the adapter and the handler (SIGTERM: it finishes what is in
// flight).
func (s *Stack) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.tes != nil && s.tes.Process != nil {
		_ = s.tes.Process.Signal(syscall.SIGTERM)
		_ = s.tes.Wait()
	}
	if s.adapter != nil {
		_ = s.adapter.Stop()
	}
	if s.handler != nil && s.handler.Process != nil {
		_ = s.handler.Process.Signal(syscall.SIGTERM)
		_ = s.handler.Wait()
	}
}

func ensureNamespace(ctx context.Context, c *cluster.Cluster, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// AdapterResources are what the ApiServerSource of config/knative watches:
// the tasks' jobs and pods, and anchors labelled cancelled.
func AdapterResources() []cluster.AdapterResource {
	return []cluster.AdapterResource{
		{Group: "batch", Version: "v1", Resource: "jobs", LabelSelector: taskmeta.LabelTask},
		{Version: "v1", Resource: "pods", LabelSelector: taskmeta.LabelTask},
		{Version: "v1", Resource: "configmaps", LabelSelector: taskmeta.LabelTask + "," + taskmeta.LabelStatus + "=" + taskmeta.StatusCancelled},
	}
}

// HandlerRole is the name of the handler's ServiceAccount, Role and
// RoleBinding in config/knative/rbac.yaml.
const HandlerRole = "tesk-handler"

// ApplyRBAC applies the handler's ServiceAccount, Role and RoleBinding of
// config/knative/rbac.yaml (at path) in the namespace; change, if set, edits
// the Role first.
func ApplyRBAC(ctx context.Context, c *cluster.Cluster, path, ns string, change func(role map[string]any)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := cluster.DecodeManifest(data)
	if err != nil {
		return err
	}
	var docs [][]byte
	roles := 0
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		o.SetNamespace(ns)
		if subs, ok := o.Object["subjects"].([]any); ok {
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					m["namespace"] = ns
				}
			}
		}
		if o.GetKind() == "Role" && o.GetName() == HandlerRole {
			roles++
			if change != nil {
				change(o.Object)
			}
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	if roles != 1 {
		return fmt.Errorf("%s has %d Roles named %s, want 1", path, roles, HandlerRole)
	}
	return c.Apply(ctx, bytes.Join(docs, []byte("\n---\n")))
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the handler did not get ready within 30 s")
}

// Post sends a binary-mode CloudEvent and returns the answer's body; a non-2xx
// answer is an error.
func Post(url, typ string, data []byte) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(data))
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", fmt.Sprintf("dev-%d", time.Now().UnixNano()))
	req.Header.Set("Ce-Source", "dev")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("%s: %s: %s", typ, resp.Status, b)
	}
	return string(b), nil
}
