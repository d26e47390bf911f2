// Command dev runs the service on the local cluster as it runs on Knative:
// the handler binary with the Role of config/knative, fed by the
// ApiServerSource receive adapter, and swept every minute as a PingSource
// would.
//
//	dev            run until interrupted (make dev)
//	dev -demo      run, submit examples/task.submitted.json, print the task's
//	               progress until it ends, then stop (make demo)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", ".cluster", "the local cluster's state directory (make cluster-up)")
	ns := flag.String("namespace", "default", "namespace of the tasks")
	port := flag.Int("port", 8080, "the handler's port")
	handlerBin := flag.String("handler", "bin/handler", "the handler binary")
	sweepEvery := flag.Duration("sweep", time.Minute, "how often to send the sweep, as a PingSource would (0: never)")
	demo := flag.Bool("demo", false, "submit examples/task.submitted.json and follow it until it ends")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	state, err := cluster.ReadState(filepath.Join(*dir, "state.json"))
	if err != nil {
		return fmt.Errorf("no local cluster (%v): run `make cluster-up` first", err)
	}
	c, err := cluster.Attach(state)
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	opts := devstack.Options{Root: ".", Namespace: *ns, Port: *port, Handler: *handlerBin, Sweep: *sweepEvery}
	if *demo {
		// The demo prints the task's progress; the handler's logs go to a file.
		logPath := filepath.Join(*dir, "handler.log")
		f, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.Stdout, opts.Stderr = f, f
		fmt.Fprintf(os.Stderr, "dev: the handler's logs are in %s\n", logPath)
	}
	s, err := devstack.Start(ctx, c, opts)
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Fprintf(os.Stderr, "dev: handler on %s (namespace %s, Role of config/knative), ApiServerSource adapter feeding it, sweep every %s\n", s.URL, *ns, *sweepEvery)
	if *demo {
		return runDemo(ctx, c, s.URL, *ns)
	}
	fmt.Fprintln(os.Stderr, "dev: try the curl examples of the README; Ctrl-C stops")
	<-ctx.Done()
	return nil
}

// runDemo submits the example task and prints its progress until it ends.
func runDemo(ctx context.Context, c *cluster.Cluster, url, ns string) error {
	data, err := os.ReadFile("examples/task.submitted.json")
	if err != nil {
		return err
	}
	var ev struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return err
	}
	// A demo runs the example afresh.
	bg := metav1.DeletePropagationBackground
	_ = c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, ev.Task, metav1.DeleteOptions{PropagationPolicy: &bg})
	for i := 0; i < 100; i++ {
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, ev.Task, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("\n$ curl -X POST %s/ -H 'Ce-Type: task.submitted' ... -d @examples/task.submitted.json\n", url)
	body, err := devstack.Post(url, "task.submitted", data)
	if err != nil {
		return err
	}
	fmt.Printf("%s\n\n", body)
	start := time.Now()
	lastState, lastJobs := "", ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(url + "/tasks/" + ns + "/" + ev.Task)
		if err != nil {
			return err
		}
		var v steps.TesTask
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		jobs := jobSummary(ctx, c, ns, ev.Task)
		if v.State != lastState || jobs != lastJobs {
			fmt.Printf("%6.1fs  %-14s %s\n", time.Since(start).Seconds(), v.State, jobs)
			lastState, lastJobs = v.State, jobs
		}
		switch v.State {
		case steps.StateComplete, steps.StateExecutorError, steps.StateSystemError, steps.StateCanceled:
			out, _ := json.MarshalIndent(v, "", "  ")
			fmt.Printf("\n$ curl %s/tasks/%s/%s\n%s\n", url, ns, ev.Task, out)
			if v.State != steps.StateComplete {
				return fmt.Errorf("the example task ended %s", v.State)
			}
			return nil
		}
	}
}

func jobSummary(ctx context.Context, c *cluster.Cluster, ns, task string) string {
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, j := range jobs.Items {
		_, part, _ := taskmeta.SplitJobName(j.Name)
		parts = append(parts, part+":"+taskmeta.StatusOf(&j).String())
	}
	sort.Strings(parts)
	pvc := "pvc:none"
	if p, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, taskmeta.PVCName(task), metav1.GetOptions{}); err == nil {
		pvc = "pvc:" + strings.ToLower(string(p.Status.Phase))
		if p.DeletionTimestamp != nil {
			pvc = "pvc:deleting"
		}
	}
	return pvc + " " + strings.Join(parts, " ")
}
