// Command kingress-standin is the local cluster's stand-in for a Knative
// ingress (see package kingress): run in the cluster as the Deployment of
// test/cluster/manifests/kingress-standin.yaml, it proxies on :8080 and
// marks the KIngresses of its class ready; :8081 answers its probes.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster/kingress"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("kingress-standin", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	lb := os.Getenv("LOAD_BALANCER")
	if lb == "" {
		return errors.New("LOAD_BALANCER (the host name of the stand-in's Service) is not set")
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	table := kingress.NewTable()
	ctl := &kingress.Controller{Client: dc, Table: table, LoadBalancer: lb, Log: log}
	errc := make(chan error, 2)
	go func() { errc <- ctl.Run(ctx) }()
	proxy := &http.Server{Addr: ":8080", Handler: &kingress.Proxy{Table: table, Log: log}, ReadHeaderTimeout: 30 * time.Second}
	health := &http.Server{Addr: ":8081", ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})}
	for _, srv := range []*http.Server{proxy, health} {
		go func() { errc <- srv.ListenAndServe() }()
	}
	log.Info("ready", "loadBalancer", lb)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = health.Shutdown(sctx)
	return proxy.Shutdown(sctx)
}
