package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// The polling baseline imitates the taskmaster of TESK: one poller per task,
// with a Kubernetes client of its own, that creates a task's jobs one after
// another and, while a job runs, GETs it and its own job (the cancellation
// check) every poll interval.
var (
	flagBaseline     = flag.Bool("baseline", true, "run the polling baseline on the same tasks and print the ratios")
	flagPollInterval = flag.Duration("poll-interval", 5*time.Second, "poll interval of the baseline (the taskmaster's default is 5 s)")
	flagPollers      = flag.Int("pollers", 1000, "waiting tasks polled by the baseline for API requests and memory per waiting task")
	flagPollWindow   = flag.Duration("poll-window", 30*time.Second, "how long the baseline's waiting pollers are counted")
)

// Figures of the event-driven run, for the ratios.
var figures struct {
	stepGaps []time.Duration
	// sweepRequests and sweepPeakKiB by task count: a sweep's API
	// requests (median) and bin/handler's RSS at ready and peak.
	sweepRequests map[int]int64
	readyKiB      map[int]int64
	peakKiB       map[int]int64
	pollGaps      []time.Duration
}

// jobTimes records, by one watch of a namespace's jobs, when each job was
// first seen and when it was first seen ended.
type jobTimes struct {
	mu           sync.Mutex
	ended, added map[string]time.Time
}

func watchJobs(ctx context.Context, c *cluster.Cluster, ns string) (*jobTimes, func(), error) {
	w, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	t := &jobTimes{ended: map[string]time.Time{}, added: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			now := time.Now()
			t.mu.Lock()
			if _, seen := t.added[j.Name]; !seen {
				t.added[j.Name] = now
			}
			if _, seen := t.ended[j.Name]; !seen && taskmeta.StatusOf(j) != taskmeta.JobRunning {
				t.ended[j.Name] = now
			}
			t.mu.Unlock()
		}
	}()
	return t, w.Stop, nil
}

// gaps are the step gaps of tasks named task(i) of executors jobs each: the
// time from job k's end to job k+1's creation.
func (t *jobTimes) gaps(tasks, executors int, task func(int) string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat []time.Duration
	for i := 0; i < tasks; i++ {
		for k := 0; k+1 < executors; k++ {
			e, ok1 := t.ended[fmt.Sprintf("%s-ex-%02d", task(i), k)]
			n, ok2 := t.added[fmt.Sprintf("%s-ex-%02d", task(i), k+1)]
			if ok1 && ok2 {
				lat = append(lat, n.Sub(e))
			}
		}
	}
	return lat
}

// pollerClient is a client of its own for one poller, as each taskmaster
// pod has, counting its requests into total.
func pollerClient(base *rest.Config, total *atomic.Int64) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(base)
	rc.QPS, rc.Burst = 50, 100
	// A Wrap makes the transport uncacheable: each poller gets its own
	// connection, as a pod would.
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, total: total} })
	return kubernetes.NewForConfig(rc)
}

// poll GETs the job and the task's own object (the taskmaster reads its own
// job to see a cancellation) every interval until the job ends.
func poll(ctx context.Context, cs kubernetes.Interface, ns, job, own string, interval time.Duration) (taskmeta.JobStatus, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return taskmeta.JobRunning, ctx.Err()
		case <-t.C:
		}
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return taskmeta.JobRunning, err
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, own, metav1.GetOptions{}); err != nil {
			return taskmeta.JobRunning, err
		}
		if s := taskmeta.StatusOf(j); s != taskmeta.JobRunning {
			return s, nil
		}
	}
}

// benchPollingSteps runs the tasks of the step benchmark with a poller per
// task instead of the handler and measures the same step gap.
func benchPollingSteps(ctx context.Context, c *cluster.Cluster) error {
	ns := "bench-poll"
	if err := setupNamespace(ctx, c, ns); err != nil {
		return err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, "tesk-handler")
	if err != nil {
		return err
	}
	base, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	times, stop, err := watchJobs(ctx, c, ns)
	if err != nil {
		return err
	}
	defer stop()
	name := func(i int) string { return fmt.Sprintf("poll-%04d", i) }
	var requests atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, *flagTasks)
	start := time.Now()
	for i := 0; i < *flagTasks; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pollTask(ctx, base, &requests, ns, name(i)); err != nil {
				errc <- fmt.Errorf("%s: %w", name(i), err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		return err
	}
	elapsed := time.Since(start)
	lat := times.gaps(*flagTasks, *flagExecutors, name)
	figures.pollGaps = lat
	if sum.Baseline == nil {
		sum.Baseline = &BaselineSummary{}
	}
	sum.Baseline.Gap = pcts(lat)
	fmt.Printf("== Polling baseline, steps: the same %d tasks of %d executors, a poller per task (own client, GET job + GET own object every %s), all at once; %.1fs, %d API requests\n",
		*flagTasks, *flagExecutors, *flagPollInterval, elapsed.Seconds(), requests.Load())
	fmt.Printf("step latency (job's terminal condition seen -> next job added, both by one watch), %d steps:\n  %s\n\n", len(lat), pct(lat))
	return nil
}

// pollTask creates the task's own object and then its executor jobs one by
// one, each once the one before completed.
func pollTask(ctx context.Context, base *rest.Config, requests *atomic.Int64, ns, task string) error {
	cs, err := pollerClient(base, requests)
	if err != nil {
		return err
	}
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: task, Labels: map[string]string{"taskmaster-name": task}}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, own, metav1.CreateOptions{}); err != nil {
		return err
	}
	for k := 0; k < *flagExecutors; k++ {
		j := executorJob(task, k)
		j.Labels = map[string]string{"taskmaster-name": task, "job-type": "executor"}
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, &j, metav1.CreateOptions{}); err != nil {
			return err
		}
		s, err := poll(ctx, cs, ns, j.Name, task, *flagPollInterval)
		if err != nil {
			return err
		}
		if s != taskmeta.JobComplete {
			return fmt.Errorf("job %s ended %s", j.Name, s)
		}
	}
	return nil
}

// benchPollingWaiting polls waiting tasks of the sweep benchmark (each with a
// running, suspended job) with a poller each, and counts their API requests
// and the memory they keep.
func benchPollingWaiting(ctx context.Context, c *cluster.Cluster, waiting int) error {
	ns := "bench-sweep"
	k := min(*flagPollers, waiting)
	if k == 0 {
		return nil
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, "tesk-handler")
	if err != nil {
		return err
	}
	base, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var requests atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, k)
	// The pollers start spread over one interval, as pods would.
	for i := 0; i < k; i++ {
		cs, err := pollerClient(base, &requests)
		if err != nil {
			return err
		}
		task := fmt.Sprintf("wait-%05d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := poll(pctx, cs, ns, task+"-ex-00", task, *flagPollInterval); err != nil && pctx.Err() == nil {
				errc <- err
			}
		}()
		time.Sleep(*flagPollInterval / time.Duration(k))
	}
	// Count from the first full interval on, when every poller has polled
	// (and connected) once.
	time.Sleep(*flagPollInterval)
	from := requests.Load()
	begin := time.Now()
	time.Sleep(*flagPollWindow)
	n := requests.Load() - from
	window := time.Since(begin)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	goroutinesPer := float64(runtime.NumGoroutine()-goroutines) / float64(k)
	cancel()
	wg.Wait()
	close(errc)
	for err := range errc {
		return err
	}
	kept := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	perMin := float64(n) / float64(k) / window.Minutes()
	perTaskKiB := float64(kept) / float64(k) / 1024
	if sum.Baseline == nil {
		sum.Baseline = &BaselineSummary{}
	}
	bl := sum.Baseline
	bl.Pollers, bl.Window, bl.PerMinute, bl.KeptKiB, bl.GoroutinesPerPoller = k, window, perMin, perTaskKiB, goroutinesPer

	fmt.Printf("== Polling baseline, waiting tasks: %d pollers of running jobs, counted for %s\n", k, window.Round(time.Second))
	fmt.Printf("  API requests per task-minute: %.1f (GETs)\n", perMin)
	fmt.Printf("  memory kept per waiting poller (Go heap+stacks in use, after GC): %.1f KiB, %.1f goroutines\n", perTaskKiB, goroutinesPer)

	// The handler keeps nothing per task between events; a waiting task
	// costs it its share of the sweep, one per minute (PingSource
	// "* * * * *"), and the sweep's memory is transient.
	fmt.Printf("\n== Ratios, polling baseline / event-driven handler (same run)\n")
	if p, h := figures.pollGaps, figures.stepGaps; len(p) > 0 && len(h) > 0 {
		pm, hm := median(p), median(h)
		fmt.Printf("  step gap p50: poller %.1fms, handler %.1fms: %.0fx\n", ms(pm), ms(hm), float64(pm)/float64(max(hm, time.Microsecond)))
	}
	for _, sn := range sortedKeys(figures.sweepRequests) {
		sweepPer := float64(figures.sweepRequests[sn]) / float64(sn) // per task, per sweep, one sweep a minute
		fmt.Printf("  API requests per waiting task-minute at %d tasks: poller %.1f, handler %.4f (sweep of %d requests a minute / %d tasks): %.0fx\n",
			sn, perMin, sweepPer, figures.sweepRequests[sn], sn, perMin/sweepPer)
	}
	for _, sn := range sortedKeys(figures.peakKiB) {
		during := float64(figures.peakKiB[sn]-figures.readyKiB[sn]) / float64(sn)
		fmt.Printf("  memory per waiting task at %d tasks: poller %.1f KiB kept; handler 0 kept between events, %.2f KiB during a sweep (peak RSS - RSS at ready, / tasks): %.0fx\n",
			sn, perTaskKiB, during, perTaskKiB/max(during, 0.001))
	}
	fmt.Println()
	return nil
}
