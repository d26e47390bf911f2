// Command demo is make demo KNATIVE=1: config/knative on the local
// cluster's real Knative (started with make cluster-up KNATIVE=1), one TES
// task (an input, two executors, an output to S3) submitted to the TES
// API's Knative Service and followed hop by hop: the ApiServerSource's
// adapter pod, the handler's pods as Knative starts them from zero and
// what each one did for the task, the task's states, its output, and the
// handler back at zero pods.
//
//	go run ./test/knative/cmd/demo -dir .cluster
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

func main() {
	dir := flag.String("dir", ".cluster", "the directory of a cluster started with cluster up -knative")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	c, err := knative.AttachTo(dir)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "demo: "+format+"\n", a...) }
	env, err := knative.Setup(ctx, c, logf)
	if err != nil {
		return err
	}
	defer env.Close()
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Printf("%6.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	adapters, err := c.Client.CoreV1().Pods(knative.Platform).List(ctx, metav1.ListOptions{LabelSelector: "eventing.knative.dev/sourceName=tesk-events"})
	if err != nil {
		return err
	}
	for _, p := range adapters.Items {
		say("ApiServerSource adapter pod %s (ServiceAccount %s) sends the tasks' Job, Pod and ConfigMap changes to the Broker", p.Name, p.Spec.ServiceAccountName)
	}
	pods, err := env.Pods(ctx, "tesk-handler")
	if err != nil {
		return err
	}
	say("tesk-handler: %d pods (scaled to zero)", len(pods))

	api, err := env.TES(ctx, "demo-user")
	if err != nil {
		return err
	}
	task := knative.TwoStepTask("hello-knative", "hello-knative/result.txt")
	body, _ := json.Marshal(task)
	fmt.Printf("\n$ curl -sS -X POST %s/tasks -H 'Authorization: Bearer ...' -d '%s'\n", api.Base, body)
	id, err := api.Create(ctx, task)
	if err != nil {
		return err
	}
	fmt.Printf("{\"id\":%q}\n\n", id)
	start = time.Now()

	followCtx, stopFollowing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		followHandler(followCtx, env, id, say)
	}()
	final, err := api.Wait(ctx, id, 10*time.Minute, func(state string) { say("TES state %s", state) })
	stopFollowing()
	wg.Wait()
	if err != nil {
		return err
	}
	if final.State != "COMPLETE" {
		return fmt.Errorf("the task ended %s", final.State)
	}
	if len(final.Logs) > 0 && len(final.Logs[0].Logs) > 1 {
		fmt.Printf("\n$ curl -sS '%s/tasks/%s?view=FULL' | jq -r '.logs[0].logs[1].stdout'   # the second executor, on the real node\n%s", api.Base, id, final.Logs[0].Logs[1].Stdout)
	}
	got, err := env.Store.Get(ctx, knative.Bucket, "hello-knative/result.txt")
	if err != nil {
		return err
	}
	fmt.Printf("\n$ aws s3 cp s3://%s/hello-knative/result.txt -   # uploaded by the outputs filer\n%s\n", knative.Bucket, got)
	t0 := time.Now()
	if err := env.WaitZero(ctx, "tesk-handler", 3*time.Minute); err != nil {
		return err
	}
	say("tesk-handler back at 0 pods, %s after the task ended", time.Since(t0).Round(time.Second))
	return nil
}

// followHandler prints each handler pod as Knative starts it and the lines
// of its log that name the task.
func followHandler(ctx context.Context, env *knative.Env, task string, say func(string, ...any)) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		pods, _ := env.Pods(ctx, "tesk-handler")
		for _, p := range pods {
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			say("tesk-handler pod %s started by Knative (%d running)", p.Name, len(pods))
			go followLog(ctx, env, p.Name, task, say)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func followLog(ctx context.Context, env *knative.Env, pod, task string, say func(string, ...any)) {
	for ctx.Err() == nil {
		p, err := env.C.Client.CoreV1().Pods(knative.Platform).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := env.C.Client.CoreV1().Pods(knative.Platform).GetLogs(pod, &corev1.PodLogOptions{Container: "handler", Follow: true}).Stream(ctx)
	if err != nil {
		return
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["task"] != task {
			continue
		}
		msg, _ := line["msg"].(string)
		var extra []string
		for _, k := range []string{"job", "type", "event"} {
			if v, ok := line[k]; ok {
				extra = append(extra, fmt.Sprintf("%s=%v", k, v))
			}
		}
		say("  %s: %s %s", pod, msg, strings.Join(extra, " "))
	}
}
