// Command kube-network-policies is sigs.k8s.io/kube-network-policies v0.8.0
// run on the host beside the real node's kubelet: upstream's cmd/main.go with
// a kubeconfig instead of the in-cluster configuration, NRI off (the node's
// containerd runs without it), SIGTERM handled like SIGINT (so that its
// nftables table is removed on the way out), a /readyz endpoint and a
// -cleanup mode. build-services.sh builds it against upstream's package with
// kube-network-policies.patch applied (see that file: the xtables NFQUEUE
// target instead of nft_queue, and pods' connections to this host policed
// too).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		kubeconfig  = flag.String("kubeconfig", "", "kubeconfig of the API server (required)")
		nodeName    = flag.String("hostname-override", "", "the name of the Node whose pods are policed (required)")
		queueID     = flag.Int("nfqueue-id", 100, "number of the nfqueue used")
		table       = flag.String("table", "kube-network-policies", "name of the nftables table (family inet)")
		metricsAddr = flag.String("metrics-bind-address", "127.0.0.1:9080", "address of /metrics and /readyz")
		failOpen    = flag.Bool("fail-open", false, "let packets through while the controller is not running")
		dnsFix      = flag.Bool("netfilter-bug-1766-fix", false, "process DNS packets in the PREROUTING hook (kernels before 6.12)")
		cleanup     = flag.Bool("cleanup", false, "remove the nftables table and exit")
		exists      = flag.Bool("exists", false, "print whether the nftables table is present and exit (status 0 when present, 1 when absent)")
	)
	c := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(c, flag.CommandLine)
	flag.Parse()
	logs.InitLogs()
	if err := logsapi.ValidateAndApply(c, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *cleanup {
		if err := deleteTable(*table); err != nil {
			fmt.Fprintf(os.Stderr, "kube-network-policies: remove nftables table inet %s: %v\n", *table, err)
			return 1
		}
		return 0
	}
	if *exists {
		present, err := tableExists(*table)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "kube-network-policies: list nftables tables: %v\n", err)
			return 2
		case present:
			fmt.Printf("nftables table inet %s: present\n", *table)
			return 0
		default:
			fmt.Printf("nftables table inet %s: absent\n", *table)
			return 1
		}
	}
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "kube-network-policies: -kubeconfig and -hostname-override are required")
		return 2
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "reading the kubeconfig", "path", *kubeconfig)
		return 1
	}
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "creating the client")
		return 1
	}
	informersFactory := informers.NewSharedInformerFactory(clientset, 0)

	ln, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		logger.Error(err, "listening for metrics", "address", *metricsAddr)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	// Ready once the table with its chains is in the kernel.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := tableReady(*table); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	go func() {
		if err := http.Serve(ln, mux); err != nil && !errors.Is(err, net.ErrClosed) {
			utilruntime.HandleError(err)
		}
	}()

	controller, err := networkpolicy.NewController(
		clientset,
		informersFactory.Networking().V1().NetworkPolicies(),
		informersFactory.Core().V1().Namespaces(),
		informersFactory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			FailOpen:            *failOpen,
			QueueID:             *queueID,
			NodeName:            *nodeName,
			NetfilterBug1766Fix: *dnsFix,
			NFTableName:         *table,
			NRIdisabled:         true,
		},
	)
	if err != nil {
		logger.Error(err, "cannot start the network policy controller")
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	informersFactory.Start(ctx.Done())

	select {
	case <-ctx.Done():
		// Run removes the table on its way out.
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		return 0
	case err := <-done:
		// Run returns early only when the nfqueue cannot be opened.
		logger.Error(err, "the network policy controller stopped (is nfnetlink_queue in the kernel?)")
		_ = deleteTable(*table)
		return 1
	}
}

// tableReady reports whether the table and its chains exist.
func tableReady(name string) error {
	nft, err := nftables.New()
	if err != nil {
		return err
	}
	chains, err := nft.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, ch := range chains {
		if ch.Table.Name == name {
			have[ch.Name] = true
		}
	}
	for _, want := range []string{"postrouting", "input"} {
		if !have[want] {
			return fmt.Errorf("chain inet %s %s not installed yet (see the log for the kernel's answer)", name, want)
		}
	}
	return nil
}

// tableExists reports whether the table is in the kernel.
func tableExists(name string) (bool, error) {
	nft, err := nftables.New()
	if err != nil {
		return false, err
	}
	tables, err := nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// deleteTable removes the table if it exists.
func deleteTable(name string) error {
	nft, err := nftables.New()
	if err != nil {
		return err
	}
	tables, err := nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if t.Name == name {
			nft.DelTable(t)
			return nft.Flush()
		}
	}
	return nil
}
