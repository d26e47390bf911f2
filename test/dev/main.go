// Command dev runs the service on the local cluster as it runs on Knative:
// the handler binary with the Role of config/knative, fed by the
// ApiServerSource receive adapter, and swept every minute as a PingSource
// would; the TES API next to it, posting its events to the handler.
//
//	dev            run until interrupted (make dev)
//	dev -demo      run, submit examples/tes-task.json through the TES API,
//	               print the task's progress until it ends, then stop
//	               (make demo)
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
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
	tesPort := flag.Int("tes-port", 8081, "the TES API's port (0: no TES API)")
	tesBin := flag.String("tes", "bin/tes", "the TES API binary")
	sweepEvery := flag.Duration("sweep", time.Minute, "how often to send the sweep, as a PingSource would (0: never)")
	demo := flag.Bool("demo", false, "submit examples/tes-task.json through the TES API and follow it until it ends")
	demoTimeout := flag.Duration("demo-timeout", 10*time.Minute, "how long the demo's task may take to end before the demo fails")
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
	opts := devstack.Options{Root: ".", Namespace: *ns, Port: *port, Handler: *handlerBin, Sweep: *sweepEvery, TES: *tesBin, TESPort: *tesPort}
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
	var store *s3server.Server
	if n := c.RealNode(); n != nil {
		// On the real node the filer really uploads: an S3 server where its
		// pods reach it, with the bucket of the example and the filer's
		// aws-secret.
		if store, err = realNodeStore(ctx, c, n, *ns); err != nil {
			return err
		}
		defer store.Stop()
		fmt.Fprintf(os.Stderr, "dev: real node %s (pods on %s); S3 for the filer at %s (bucket %s, secret %s)\n", n.Name, n.Subnet, store.Endpoint, demoBucket, jobspec.AWSSecretName)
	}
	s, err := devstack.Start(ctx, c, opts)
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Fprintf(os.Stderr, "dev: handler on %s (namespace %s, Role of config/knative), ApiServerSource adapter feeding it, sweep every %s\n", s.URL, *ns, *sweepEvery)
	if s.TESURL != "" {
		fmt.Fprintf(os.Stderr, "dev: TES API on %s%s (no access control), posting to the handler; its dashboard on %s/\n", s.TESURL, tes.BasePath, s.TESURL)
	}
	if *demo {
		if s.TESURL == "" {
			return fmt.Errorf("the demo needs the TES API (-tes-port)")
		}
		return runDemo(ctx, c, s.TESURL+tes.BasePath, *ns, store, *demoTimeout)
	}
	fmt.Fprintln(os.Stderr, "dev: try the curl examples of the README; Ctrl-C stops")
	<-ctx.Done()
	return nil
}

// runDemo submits the example TES task through the TES API and prints its
// progress until it ends. A task that has not ended within timeout, or a
// signal before it ended, fails the demo.
func runDemo(ctx context.Context, c *cluster.Cluster, api, ns string, store *s3server.Server, timeout time.Duration) error {
	data, err := os.ReadFile("examples/tes-task.json")
	if err != nil {
		return err
	}
	fmt.Printf("\n$ curl -sS -X POST %s/tasks -H 'Content-Type: application/json' -d @examples/tes-task.json\n", api)
	resp, err := http.Post(api+"/tasks", "application/json", bytes.NewReader(data))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s\n", bytes.TrimSpace(body))
	var created tesv1.CreateTaskResponse
	if err := json.Unmarshal(body, &created); err != nil || resp.StatusCode != http.StatusOK || created.ID == "" {
		return fmt.Errorf("create: %s: %s", resp.Status, body)
	}
	id := created.ID
	start := time.Now()
	deadline := time.After(timeout)
	lastState, lastJobs := "", ""
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while task %s was %s", id, lastState)
		case <-deadline:
			return fmt.Errorf("task %s did not end within %s (still %s)", id, timeout, lastState)
		case <-time.After(200 * time.Millisecond):
		}
		var v tesv1.Task
		if err := getJSON(api+"/tasks/"+id, &v); err != nil {
			return err
		}
		jobs := jobSummary(ctx, c, ns, id)
		if v.State != lastState || jobs != lastJobs {
			fmt.Printf("%6.1fs  %-14s %s\n", time.Since(start).Seconds(), v.State, jobs)
			lastState, lastJobs = v.State, jobs
		}
		if tesv1.IsFinal(v.State) {
			var full tesv1.Task
			if err := getJSON(api+"/tasks/"+id+"?view=FULL", &full); err != nil {
				return err
			}
			out, _ := json.MarshalIndent(full, "", "  ")
			fmt.Printf("\n$ curl -sS '%s/tasks/%s?view=FULL'\n%s\n", api, id, out)
			if v.State != tesv1.StateComplete {
				return fmt.Errorf("the example task ended %s", v.State)
			}
			if store != nil {
				return showRealOutput(ctx, c, ns, id, store)
			}
			return nil
		}
	}
}

// demoBucket is the bucket of examples/tes-task.json's output.
const demoBucket = "tes-results"

// realNodeStore starts an S3 server on the real node's bridge address with
// the example's bucket, and gives the namespace the filer's aws-secret for it.
func realNodeStore(ctx context.Context, c *cluster.Cluster, n *cluster.RealNode, ns string) (*s3server.Server, error) {
	store, err := s3server.StartOn(n.HostIP)
	if err != nil {
		return nil, fmt.Errorf("S3 server for the real node: %w", err)
	}
	if err := store.CreateBucket(ctx, demoBucket); err != nil {
		store.Stop()
		return nil, err
	}
	config, credentials := store.AWSConfig()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: jobspec.AWSSecretName, Namespace: ns},
		StringData: map[string]string{"config": config, "credentials": credentials},
	}
	secrets := c.Client.CoreV1().Secrets(ns)
	_, err = secrets.Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		store.Stop()
		return nil, fmt.Errorf("secret %s: %w", jobspec.AWSSecretName, err)
	}
	return store, nil
}

// showRealOutput prints what the real containers did: the second executor's
// log, read from the kubelet, and the uploaded result with its checksum.
func showRealOutput(ctx context.Context, c *cluster.Cluster, ns, task string, store *s3server.Server) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + task + "-ex-01"})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Errorf("the second executor's pod: %v", err)
	}
	log, err := c.Client.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the second executor's log: %w", err)
	}
	fmt.Printf("\n$ kubectl logs %s   # printed by the container on %s\n%s", pods.Items[0].Name, pods.Items[0].Spec.NodeName, log)
	got, err := store.Get(ctx, demoBucket, "hello-tes/result.txt")
	if err != nil {
		return fmt.Errorf("the uploaded result: %w", err)
	}
	sum := sha256.Sum256([]byte(got))
	fmt.Printf("\n$ aws s3 cp s3://%s/hello-tes/result.txt - | sha256sum   # uploaded by the outputs filer\n%x  -   (%q)\n", demoBucket, sum, got)
	if got != "HELLO FROM TES\n" {
		return fmt.Errorf("the uploaded result is %q, want %q", got, "HELLO FROM TES\n")
	}
	return nil
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
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
