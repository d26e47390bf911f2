//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// manualImage makes kwok leave a pod to the test, which plays its kubelet.
const manualImage = "fate.tesk.test/manual"

// A task on the local cluster whose inputs and outputs filer jobs run the
// real filer (cmd/filer) against a real S3 server: the test plays the
// kubelet of those pods. It runs the filer binary as the pod would (its args
// and env, the task JSON from the anchor ConfigMap the pod mounts, the task
// volume as a local directory, the aws-secret as AWS config files), serves
// its output as the pod's log through the API server, and reports the pod
// Succeeded or Failed with the filer's exit code. The executor's pod is
// played too: it turns the input into the outputs on the volume.
func TestRealFilerThroughS3(t *testing.T) {
	ctx := context.Background()
	srv, err := s3server.Start()
	if err != nil {
		t.Fatalf("S3 server: %v", err)
	}
	defer srv.Stop()
	if err := srv.CreateBucket(ctx, "tes-data"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Put(ctx, "tes-data", "in/greeting.txt", "hello from s3\n"); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	filerBin := filepath.Join(work, "filer")
	if out, err := exec.Command("go", "build", "-o", filerBin, filepath.Join(repoRoot(t), "cmd", "filer")).CombinedOutput(); err != nil {
		t.Fatalf("build the filer: %v\n%s", err, out)
	}
	awsConfig, awsCreds, err := srv.WriteAWSConfig(work)
	if err != nil {
		t.Fatal(err)
	}
	volume := filepath.Join(work, "volume") // the task's PVC
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.FilerName, c.FilerVersion = manualImage, "e2e" }})
	task := "task-realfiler1"
	ex := executor(task, 0, nil, nil)
	ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = manualImage
	spec := map[string]any{
		"executors": []any{ex},
		"inputs":    []any{map[string]any{"url": "s3://tes-data/in/greeting.txt", "path": "/data/in/greeting.txt", "type": "FILE"}},
		"outputs": []any{
			map[string]any{"url": "s3://tes-data/out/result.txt", "path": "/data/out/result.txt", "type": "FILE"},
			map[string]any{"url": "s3://tes-data/out/logs", "path": "/data/logs/*.log", "path_prefix": "/data/logs", "type": "FILE"},
		},
	}

	kctx, stop := context.WithCancel(ctx)
	defer stop()
	kubeletErr := make(chan error, 1)
	go func() {
		kubeletErr <- playKubelet(kctx, e.ns, task, func(pod *corev1.Pod) (string, int32, error) {
			c := pod.Spec.Containers[0]
			if pod.Labels[batchv1.JobNameLabel] == task+"-ex-00" {
				return runExecutor(volume)
			}
			return runFiler(kctx, e.ns, task, filerBin, c, volume, awsConfig, awsCreds)
		})
	}()

	e.submit(task, spec)
	v := e.waitState(task, tesv1.StateComplete, taskTimeout)
	stop()
	if err := <-kubeletErr; err != nil {
		t.Fatal(err)
	}

	if got, err := srv.Get(ctx, "tes-data", "out/result.txt"); err != nil || got != "HELLO FROM S3\n" {
		t.Errorf("uploaded result %q, %v", got, err)
	}
	for _, key := range []string{"out/logs/a.log", "out/logs/b.log"} {
		if _, err := srv.Get(ctx, "tes-data", key); err != nil {
			t.Errorf("wildcard output %s: %v", key, err)
		}
	}
	out, err := e.job(task + "-outputs-filer")
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"url":"s3://tes-data/out/result.txt","path":"/data/out/result.txt","size_bytes":"14"},` +
		`{"url":"s3://tes-data/out/logs/a.log","path":"/data/logs/a.log","size_bytes":"2"},` +
		`{"url":"s3://tes-data/out/logs/b.log","path":"/data/logs/b.log","size_bytes":"2"}]`
	if got := out.Annotations[taskmeta.AnnotationOutputFileLogs]; got != want {
		t.Errorf("output-file-logs\n got %s\nwant %s", got, want)
	}
	if len(v.Logs[0].Outputs) != 3 {
		t.Errorf("view outputs %+v", v.Logs[0].Outputs)
	}
}

// playKubelet runs each pod of the task that kwok left to the test, once:
// run gives its log and exit code.
func playKubelet(ctx context.Context, ns, task string, run func(*corev1.Pod) (string, int32, error)) error {
	done := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		pods, err := shared.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if done[pod.Name] || pod.Spec.NodeName == "" || !strings.HasPrefix(pod.Spec.Containers[0].Image, manualImage) {
				continue
			}
			done[pod.Name] = true
			started := metav1.Now()
			log, code, err := run(pod)
			if err != nil {
				return err
			}
			if err := shared.SetPodLogs(ctx, ns, pod.Name, log); err != nil {
				return err
			}
			phase, reason := corev1.PodSucceeded, "Completed"
			if code != 0 {
				phase, reason = corev1.PodFailed, "Error"
			}
			pod.Status.Phase = phase
			pod.Status.StartTime = &started
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"}}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image, ImageID: pod.Spec.Containers[0].Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: metav1.Now(),
				}},
			}}
			if _, err := shared.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
}

// runFiler runs the filer binary as the filer pod would run it.
func runFiler(ctx context.Context, ns, task, bin string, c corev1.Container, volume, awsConfig, awsCreds string) (string, int32, error) {
	// The task JSON, as the pod mounts it from the anchor ConfigMap.
	cm, err := shared.Client.CoreV1().ConfigMaps(ns).Get(ctx, task, metav1.GetOptions{})
	if err != nil {
		return "", 0, err
	}
	jsonFile := filepath.Join(filepath.Dir(volume), "JSON_INPUT.gz")
	if err := os.WriteFile(jsonFile, cm.BinaryData[taskspec.ConfigMapKey], 0o600); err != nil {
		return "", 0, err
	}
	args := append([]string{}, c.Args...)
	for i := range args {
		if strings.HasSuffix(args[i], taskspec.ConfigMapKey) {
			args[i] = jsonFile
		}
	}
	args = append(args, "--task-dir", volume)
	cmd := exec.CommandContext(ctx, bin, args...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(volume)}
	for _, ev := range c.Env {
		switch ev.Name {
		case "AWS_CONFIG_FILE":
			ev.Value = awsConfig
		case "AWS_SHARED_CREDENTIALS_FILE":
			ev.Value = awsCreds
		}
		if ev.ValueFrom == nil {
			env = append(env, ev.Name+"="+ev.Value)
		}
	}
	cmd.Env = env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return log.String(), int32(exit.ExitCode()), nil
	case err != nil:
		return "", 0, err
	}
	return log.String(), 0, nil
}

// runExecutor does the executor's work on the volume: the input upper-cased
// into the result, and two log files for the wildcard output.
func runExecutor(volume string) (string, int32, error) {
	in, err := os.ReadFile(filepath.Join(volume, "data", "in", "greeting.txt"))
	if err != nil {
		return "the input is not on the volume: " + err.Error() + "\n", 1, nil
	}
	for p, content := range map[string]string{
		"data/out/result.txt": strings.ToUpper(string(in)),
		"data/logs/a.log":     "a\n",
		"data/logs/b.log":     "b\n",
	} {
		path := filepath.Join(volume, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", 0, err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", 0, err
		}
	}
	b, _ := json.Marshal(map[string]string{"done": "ok"})
	return string(b) + "\n", 0, nil
}
