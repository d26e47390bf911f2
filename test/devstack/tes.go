package devstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// TESRole is the name of the TES API's ServiceAccount, Role and RoleBinding
// in config/knative/tes-rbac.yaml.
const TESRole = "tesk-tes"

// ApplyTESRBAC applies the TES API's ServiceAccount, Role and RoleBinding of
// config/knative/tes-rbac.yaml (at path) in the namespace.
func ApplyTESRBAC(ctx context.Context, c *cluster.Cluster, path, ns string) error {
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
		o.SetNamespace(ns)
		if subs, ok := o.Object["subjects"].([]any); ok {
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					m["namespace"] = ns
				}
			}
		}
		if o.GetKind() == "Role" && o.GetName() == TESRole {
			roles++
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	if roles != 1 {
		return fmt.Errorf("%s has %d Roles named %s, want 1", path, roles, TESRole)
	}
	return c.Apply(ctx, bytes.Join(docs, []byte("\n---\n")))
}

// startTES starts the TES API binary on 127.0.0.1:port with the Role of
// config/knative/tes-rbac.yaml, without access control, posting its events
// to the handler at sink.
func (s *Stack) startTES(ctx context.Context, c *cluster.Cluster, o Options, sink string, out, errw io.Writer) error {
	if err := portFree(o.TESPort); err != nil {
		return err
	}
	if err := ApplyTESRBAC(ctx, c, filepath.Join(o.Root, "config", "knative", "tes-rbac.yaml"), o.Namespace); err != nil {
		return err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, o.Namespace, TESRole)
	if err != nil {
		return err
	}
	s.TESURL = fmt.Sprintf("http://127.0.0.1:%d", o.TESPort)
	cmd := exec.Command(o.TES, "--kubeconfig", kubeconfig, "--namespace", o.Namespace, "--port", fmt.Sprint(o.TESPort), "--no-auth", "--sink", sink)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Stdout, cmd.Stderr = out, errw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the TES API (%s; run `make build`): %w", o.TES, err)
	}
	s.tes = cmd
	return waitReady(ctx, s.TESURL+"/healthz")
}

// portFree checks that nothing listens on a port: a process of someone else
// there would answer the readiness probe in place of the one started here.
func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return fmt.Errorf("port %d is in use (%v): stop what listens there, or choose other ports (test/dev -port, -tes-port)", port, err)
	}
	return l.Close()
}
