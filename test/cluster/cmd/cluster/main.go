// Command cluster starts and stops the local Kubernetes control plane of
// package test/cluster outside of tests.
//
//	cluster up      start it in the background; admin kubeconfig in <dir>/kubeconfig
//	cluster down    stop every process it started and remove its state
//	cluster status  show whether it runs (exit status 1 when it does not)
//	cluster adapter run the ApiServerSource receive adapter against it, in the
//	                foreground until interrupted
//
// <dir> is .cluster by default (-dir); it holds state.json and kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
)

// nodeImages builds the real node's images from the checkout in the working
// directory, the filer as the image that make dev's handler runs.
func nodeImages(ctx context.Context, dir string) ([]cluster.NodeImage, error) {
	return cluster.ProjectImages(".", devstack.FilerName+":"+devstack.FilerVersion)(ctx, dir)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	case "adapter":
		err = adapter(os.Args[2:])
	case "-h", "--help", "help":
		usage()
		return
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: cluster up|down|status|adapter [flags]
  up       start the local control plane in the background (-dir, -nodes, -cpu, -memory, -pods, -port,
           -real: a real node too; -services: and what in-cluster Services need, with -real implied)
  down     stop it and remove its state (-dir)
  status   show its processes (-dir)
  adapter  run the ApiServerSource receive adapter against it until interrupted
           (-dir, -sink, -namespace, -resource group/version/resource[:selector], ...)`)
}

func files(dir string) (state, kubeconfig string) {
	return filepath.Join(dir, "state.json"), filepath.Join(dir, "kubeconfig")
}

func up(args []string) error {
	fl := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fl.String("dir", ".cluster", "directory for state.json and the admin kubeconfig")
	nodes := fl.Int("nodes", -1, "number of fake nodes (default 1, or 0 with -real)")
	real := fl.Bool("real", false, "also start a real node: kubelet, containerd and runc on this machine (needs root and make cluster-bins)")
	services := fl.Bool("services", false, "give the real node (implies -real) kube-proxy, cluster DNS, the API server at the kubernetes Service, the Deployment and endpoint controllers and NetworkPolicy enforcement")
	knative := fl.Bool("knative", false, "run Knative Eventing and Serving on the real node (implies -services; make cluster-bins builds them)")
	nats := fl.Bool("nats", false, "with -knative, also run a NATS server with JetStream and the NatsJetStreamChannel of eventing-natss (make natss-bins builds them)")
	cpu := fl.String("cpu", "32", "CPU capacity of each node")
	memory := fl.String("memory", "256Gi", "memory capacity of each node")
	pods := fl.String("pods", "1000", "pod capacity of each node")
	port := fl.Int("port", 0, "kube-apiserver port on 127.0.0.1 (0: a free one)")
	timeout := fl.Duration("timeout", 2*time.Minute, "give up when not ready within this time")
	kubeletGates := fl.String("kubelet-feature-gates", "", "with -real, feature gates the kubelet also sets, as its --feature-gates takes them (EventedPLEG=true)")
	auditUsers := fl.String("audit-users", "", "comma-separated users whose requests the API server writes to <dir>/audit.log, one line per request (the benches count requests by them)")
	_ = fl.Parse(args)

	stateFile, kubeconfig := files(*dir)
	if err := clearOld(*dir); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	if *nats && !*knative {
		return errors.New("-nats needs -knative")
	}
	if *knative {
		*services = true
		if *timeout == 2*time.Minute {
			*timeout = 15 * time.Minute
		}
	}
	if *services {
		*real = true
	}
	if *nodes < 0 {
		*nodes = 0
		if !*real {
			*nodes = 1
		}
	}
	opts := cluster.Options{
		Nodes:         *nodes,
		NodeCPU:       *cpu,
		NodeMemory:    *memory,
		NodePods:      *pods,
		APIServerPort: *port,
		Detach:        true,
		Timeout:       *timeout,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		},
	}
	if *auditUsers != "" {
		flags, err := auditFlags(*dir, strings.Split(*auditUsers, ","))
		if err != nil {
			return err
		}
		opts.APIServerFlags = append(opts.APIServerFlags, flags...)
	}
	if *kubeletGates != "" {
		if !*real {
			return errors.New("-kubelet-feature-gates needs -real")
		}
		gates, err := cluster.ParseFeatureGates(*kubeletGates)
		if err != nil {
			return err
		}
		opts.KubeletFeatureGates = gates
	}
	if *real {
		opts.RealNode = true
		opts.BuildNodeImages = nodeImages
		opts.Services = *services
		opts.Knative = *knative
		opts.NATS = *nats
	}
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(kubeconfig)
	err = errors.Join(
		os.MkdirAll(*dir, 0o755),
		// The directory ignores itself, so that no checkout needs a rule for it.
		os.WriteFile(filepath.Join(*dir, ".gitignore"), []byte("*\n"), 0o644),
		c.WriteKubeconfig(kubeconfig),
		cluster.WriteState(stateFile, c.State(abs)),
	)
	if err != nil {
		stopErr := c.Stop()
		os.Remove(stateFile)
		os.Remove(kubeconfig)
		return errors.Join(fmt.Errorf("record cluster state: %w", err), stopErr)
	}
	fmt.Printf("cluster up in %.1fs: API server %s, %d node(s)\n", time.Since(begin).Seconds(), c.Server, len(c.Nodes))
	if n := c.RealNode(); n != nil {
		fmt.Printf("  real node %s: pods on %s; servers for pods listen on %s; images from %s\n", n.Name, n.Subnet, n.HostIP, n.Registry)
		if n.Services != nil {
			fmt.Printf("  services: Service range %s routed to %s, cluster DNS %s (%s), kube-proxy, kube-network-policies\n", cluster.ServiceCIDR, n.Bridge, n.Services.DNS, cluster.ClusterDomain)
		}
	}
	fmt.Printf("  export KUBECONFIG=%s\n", abs)
	fmt.Printf("  state %s, component logs in %s\n", stateFile, filepath.Join(c.Dir, "logs"))
	return nil
}

// auditFlags writes an audit policy for users into dir and returns the
// API server's flags that log their requests to dir/audit.log.
func auditFlags(dir string, users []string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	policy := filepath.Join(abs, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(benchkit.AuditPolicy(users)), 0o600); err != nil {
		return nil, err
	}
	log := filepath.Join(abs, "audit.log")
	os.Remove(log) // an earlier cluster's
	return benchkit.AuditFlags(policy, log), nil
}

// clearOld deals with the state of an earlier cluster: a running one is an
// error; a half-started one is stopped (an error too, so that the caller
// notices); a dead one is cleaned up.
func clearOld(dir string) error {
	stateFile, kubeconfig := files(dir)
	s, err := cluster.ReadState(stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: remove %s and the processes it lists by hand", err, stateFile)
	}
	alive := s.Alive()
	switch {
	case len(alive) > 0 && len(alive) == len(s.Processes):
		return fmt.Errorf("a cluster is already running (API server %s, kubeconfig %s); run `make cluster-down` first", s.Server, kubeconfig)
	case len(alive) > 0:
		stopErr := s.Stop()
		if stopErr == nil {
			os.Remove(stateFile)
			os.Remove(kubeconfig)
		}
		return errors.Join(fmt.Errorf("found a half-started cluster in %s (%d of %d processes alive: %s); stopped it and removed its state, run `make cluster-up` again",
			dir, len(alive), len(s.Processes), cluster.Names(alive)), stopErr)
	default:
		fmt.Fprintf(os.Stderr, "removing the stale state of a cluster that no longer runs (%s)\n", s.Dir)
		if err := s.Stop(); err != nil {
			return err
		}
		os.Remove(stateFile)
		os.Remove(kubeconfig)
		return nil
	}
}

func down(args []string) error {
	fl := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fl.String("dir", ".cluster", "directory of state.json")
	_ = fl.Parse(args)
	stateFile, kubeconfig := files(*dir)
	s, err := cluster.ReadState(stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("no cluster state in %s: nothing to stop\n", *dir)
		return nil
	}
	if err != nil {
		return err
	}
	alive := s.Alive()
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stopping the cluster: %w (state kept in %s)", err, stateFile)
	}
	os.Remove(stateFile)
	os.Remove(kubeconfig)
	fmt.Printf("cluster down: stopped %d process(es)", len(alive))
	if len(alive) > 0 {
		fmt.Printf(" (%s)", cluster.Names(alive))
	}
	fmt.Printf(", removed %s\n", s.Dir)
	return nil
}

func status(args []string) error {
	fl := flag.NewFlagSet("status", flag.ExitOnError)
	dir := fl.String("dir", ".cluster", "directory of state.json")
	_ = fl.Parse(args)
	stateFile, _ := files(*dir)
	s, err := cluster.ReadState(stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no cluster (no %s)", stateFile)
	}
	if err != nil {
		return err
	}
	fmt.Printf("API server %s, kubeconfig %s, state %s\n", s.Server, s.Kubeconfig, s.Dir)
	dead := 0
	for i := range s.Processes {
		p := &s.Processes[i]
		st := "running"
		if !p.Alive() {
			st = "dead"
			dead++
		}
		fmt.Printf("  %-24s pid %-7d %s\n", p.Name, p.Pid, st)
	}
	if dead > 0 {
		return fmt.Errorf("%d of %d processes dead: run `make cluster-down`", dead, len(s.Processes))
	}
	return nil
}

type resourceFlags []cluster.AdapterResource

func (r *resourceFlags) String() string { return fmt.Sprint(*r) }

func (r *resourceFlags) Set(v string) error {
	spec, selector, _ := strings.Cut(v, ":")
	parts := strings.Split(spec, "/")
	var res cluster.AdapterResource
	switch len(parts) {
	case 2:
		res = cluster.AdapterResource{Version: parts[0], Resource: parts[1]}
	case 3:
		res = cluster.AdapterResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
	default:
		return fmt.Errorf("resource %q: want [group/]version/resource[:selector]", v)
	}
	res.LabelSelector = selector
	*r = append(*r, res)
	return nil
}

func adapter(args []string) error {
	fl := flag.NewFlagSet("adapter", flag.ExitOnError)
	dir := fl.String("dir", ".cluster", "directory of state.json")
	sink := fl.String("sink", "http://127.0.0.1:8080/", "URL the events are sent to")
	namespace := fl.String("namespace", "default", "namespace to watch")
	name := fl.String("name", "tesk-events", "source name")
	kubeconfig := fl.String("kubeconfig", "", "kubeconfig of the adapter (default: admin)")
	var resources resourceFlags
	fl.Var(&resources, "resource", "[group/]version/resource[:label selector] to watch; repeatable (default: batch/v1/jobs, v1/pods and v1/configmaps with selector taskmaster-name)")
	_ = fl.Parse(args)
	if len(resources) == 0 {
		resources = resourceFlags{
			{Group: "batch", Version: "v1", Resource: "jobs", LabelSelector: "taskmaster-name"},
			{Version: "v1", Resource: "pods", LabelSelector: "taskmaster-name"},
			{Version: "v1", Resource: "configmaps", LabelSelector: "taskmaster-name"},
		}
	}
	stateFile, _ := files(*dir)
	s, err := cluster.ReadState(stateFile)
	if err != nil {
		return fmt.Errorf("%w (is the cluster up? run `make cluster-up`)", err)
	}
	c, err := cluster.Attach(s)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := c.StartAdapter(ctx, cluster.AdapterOptions{
		Name:       *name,
		Namespace:  *namespace,
		Sink:       *sink,
		Resources:  resources,
		Kubeconfig: *kubeconfig,
	})
	if err != nil {
		return err
	}
	fmt.Printf("adapter running (pid %d), delivering to %s; log %s\n", a.Process.Pid, *sink, a.Process.Log)
	select {
	case <-ctx.Done():
	case <-waitDead(a.Process):
		return fmt.Errorf("adapter exited, see %s", a.Process.Log)
	}
	return c.Stop()
}

func waitDead(p *cluster.Process) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for p.Alive() {
			time.Sleep(200 * time.Millisecond)
		}
		close(ch)
	}()
	return ch
}
