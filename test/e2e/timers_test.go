//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// sweepUntil posts a sweep every half second until the task reaches want.
func (e *env) sweepUntil(task, want string, timeout time.Duration) tesv1.Task {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if v, code := e.view(task); code == http.StatusOK && v.State == want {
			return v
		}
		e.sweep()
		time.Sleep(500 * time.Millisecond)
	}
	return e.waitState(task, want, time.Second)
}

// checkFailedByService checks that the service failed the job through
// activeDeadlineSeconds and Kubernetes marked it Failed (DeadlineExceeded),
// which it does once the job's pods have ended.
func (e *env) checkFailedByService(name string) {
	e.t.Helper()
	e.waitFor("job "+name+" to be marked Failed", 20*time.Second, func() bool {
		j, err := e.job(name)
		return err == nil && taskmeta.IsMarkedFailed(j)
	})
	j, err := e.job(name)
	if err != nil {
		e.t.Fatalf("job %s is not kept: %v", name, err)
	}
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 1 {
		e.t.Errorf("job %s activeDeadlineSeconds %v, want 1", name, j.Spec.ActiveDeadlineSeconds)
	}
	found := false
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			found = true
		}
	}
	if !found {
		e.t.Errorf("job %s conditions %v, want Failed with DeadlineExceeded", name, j.Status.Conditions)
	}
}

// Pods whose containers cannot start fail their executor's job after the pod
// timeout (EXECUTOR_ERROR), for a container and for an init container that
// the cluster adds to the pod (as a sidecar injector's webhook does; a
// task's own spec may hold none).
func TestPodsThatCannotStartFailExecutor(t *testing.T) {
	for _, fate := range []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "init-ErrImagePull", "init-CreateContainerConfigError"} {
		t.Run(fate, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			task := "task-" + strings.ToLower(strings.ReplaceAll(fate, "-", ""))
			ex := executor(task, 0, map[string]string{fateResult: fate}, nil)
			if strings.HasPrefix(fate, "init-") {
				e.injectInitContainer(task + "-ex-00")
			}
			e.submit(task, noIO(taskJSON(ex, executor(task, 1, nil, nil))))
			// Before the pod timeout (3 s) nothing happens.
			e.waitFor("the executor's pod", 20*time.Second, func() bool { return len(e.podsOf(task+"-ex-00")) > 0 })
			e.sweep()
			if j, err := e.job(task + "-ex-00"); err != nil || j.Spec.ActiveDeadlineSeconds != nil {
				t.Fatalf("job failed before the pod timeout: %v", err)
			}
			v := e.sweepUntil(task, tesv1.StateExecutorError, 40*time.Second)
			e.checkFailedByService(task + "-ex-00")
			if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), task+"-ex-00") {
				t.Errorf("system_logs %v", v.Logs[0].SystemLogs)
			}
			if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
				t.Errorf("the next executor was created: %v", err)
			}
		})
	}
}

// injectInitContainer makes the API server add an init container to the
// pods of a job, as a sidecar injector's mutating webhook would, through a
// MutatingAdmissionPolicy bound to the test's namespace.
func (e *env) injectInitContainer(job string) {
	e.t.Helper()
	name := "inject-" + job
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  matchConditions:
  - name: the-job
    expression: "has(object.metadata.labels) && 'job-name' in object.metadata.labels && object.metadata.labels['job-name'] == '%[2]s'"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >-
        Object{spec: Object.spec{initContainers: [Object.spec.initContainers{name: "injected", image: "busybox:1.36"}]}}
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %[3]s
`, name, job, e.ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.c.Apply(ctx, []byte(policy)); err != nil {
		e.t.Fatalf("mutating admission policy: %v", err)
	}
	e.t.Cleanup(func() {
		_ = e.c.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = e.c.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The policy takes a moment to reach the admission chain: a probe pod
	// of the job's name, created with a dry run, shows when it applies.
	e.waitFor("the admission policy to add the init container", 30*time.Second, func() bool {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: e.ns, Labels: map[string]string{"job-name": job}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
		}
		p, err := e.c.Client.CoreV1().Pods(e.ns).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(p.Spec.InitContainers) == 1
	})
}

// With TESK_MAX_QUEUE_SECONDS, an executor whose pod is never scheduled is
// deleted and the task ends with SYSTEM_ERROR, naming the job and the
// scheduler's message.
func TestUnschedulableExecutorIsDeleted(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.MaxQueue = 2 * time.Second }})
	task := "task-unsched01"
	ex := executor(task, 0, nil, nil)
	c := ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "500"}}
	e.submit(task, noIO(taskJSON(ex)))
	v := e.waitStateOrSweep(task, tesv1.StateQueued, 20*time.Second)
	_ = v
	v = e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	msg := strings.Join(v.Logs[0].SystemLogs, " ")
	if !strings.Contains(msg, task+"-ex-00") || !strings.Contains(msg, "wasn't scheduled within 2 s") || !strings.Contains(msg, "Insufficient cpu") {
		t.Errorf("system_logs %q should name the job, the max queue time and the scheduler's message", msg)
	}
	e.waitFor("the executor job to be deleted", 20*time.Second, func() bool {
		_, err := e.job(task + "-ex-00")
		return apierrors.IsNotFound(err)
	})
}

// waitStateOrSweep waits for a state, sweeping meanwhile.
func (e *env) waitStateOrSweep(task, want string, timeout time.Duration) tesv1.Task {
	return e.sweepUntil(task, want, timeout)
}

// A handler whose Role lacks patch on jobs deletes a job it cannot fail, and
// the task stops with SYSTEM_ERROR.
func TestFailRejectedDeletesJob(t *testing.T) {
	noPatch := func(role map[string]any) {
		for _, r := range role["rules"].([]any) {
			rule := r.(map[string]any)
			if res, _ := rule["resources"].([]any); len(res) == 1 && res[0] == "jobs" {
				var verbs []any
				for _, v := range rule["verbs"].([]any) {
					if v != "patch" {
						verbs = append(verbs, v)
					}
				}
				rule["verbs"] = verbs
			}
		}
	}
	e := newEnv(t, envOptions{role: noPatch})
	task := "task-nopatch01"
	e.submit(task, noIO(taskJSON(executor(task, 0, map[string]string{fateResult: "ErrImagePull"}, nil))))
	v := e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), "rejected") {
		t.Errorf("system_logs %v should say failing the job was rejected", v.Logs[0].SystemLogs)
	}
	e.waitFor("the job to be deleted", 20*time.Second, func() bool {
		_, err := e.job(task + "-ex-00")
		return apierrors.IsNotFound(err)
	})
}

// Cancelling while an executor runs deletes that job, keeps the inputs filer
// that ended, deletes the PVC, and ends CANCELED (CANCELING meanwhile).
func TestCancelWhileExecutorRuns(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-cancel01"
	e.submit(task, taskJSON(executor(task, 0, runFor("60s"), nil), executor(task, 1, nil, nil)))
	e.waitFor("the executor's pod to run", 30*time.Second, func() bool {
		for _, p := range e.podsOf(task + "-ex-00") {
			if p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	code, body := e.post("task.cancelled", map[string]any{"task": task})
	if code != http.StatusOK || !strings.Contains(body, tesv1.StateCanceling) && !strings.Contains(body, tesv1.StateCanceled) {
		t.Fatalf("task.cancelled: %d %s", code, body)
	}
	e.waitState(task, tesv1.StateCanceled, 30*time.Second)
	if _, err := e.job(task + "-ex-00"); !apierrors.IsNotFound(err) {
		t.Errorf("the running executor's job is not deleted: %v", err)
	}
	if j, err := e.job(task + "-inputs-filer"); err != nil || taskmeta.StatusOf(j) != taskmeta.JobComplete {
		t.Errorf("the inputs filer's job should be kept: %v", err)
	}
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Errorf("a later executor was created: %v", err)
	}
	e.waitFor("the PVC to be deleted", 10*time.Second, func() bool { return e.pvcGone(task) })
	// A second cancel changes nothing and says so.
	code, body = e.post("task.cancelled", map[string]any{"task": task})
	if code != http.StatusOK || !strings.Contains(body, "already ended") {
		t.Errorf("cancel of an ended task: %d %s", code, body)
	}
}

// A task cancelled before it was submitted creates nothing.
func TestCancelBeforeFirstJob(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-cancel02"
	// The TESK API writes the task's ConfigMap, then cancels it before the
	// submission is handled.
	spec := taskJSON(executor(task, 0, nil, nil))
	raw := mustJSON(t, spec)
	_, err := shared.Client.CoreV1().ConfigMaps(e.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: task},
		BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := e.post("task.cancelled", map[string]any{"task": task}); code != http.StatusOK {
		t.Fatalf("task.cancelled: %d %s", code, body)
	}
	if code, body := e.post("task.submitted", map[string]any{"task": task}); code != http.StatusOK {
		t.Fatalf("task.submitted: %d %s", code, body)
	}
	e.waitState(task, tesv1.StateCanceled, 10*time.Second)
	e.settle()
	if names := e.jobNames(task); len(names) != 0 {
		t.Errorf("jobs created for a cancelled task: %v", names)
	}
	if _, err := shared.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), taskmeta.PVCName(task), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PVC was created for a cancelled task: %v", err)
	}
}

// An event lost while a job finishes (the adapter stopped) is caught by the
// sweep, which starts the next step.
func TestSweepCatchesLostEvent(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-lost01"
	e.submit(task, noIO(taskJSON(executor(task, 0, runFor("3s"), nil), executor(task, 1, nil, nil))))
	e.waitFor("the first executor's job", 20*time.Second, func() bool { _, err := e.job(task + "-ex-00"); return err == nil })
	if err := e.adapter.Stop(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first executor to complete", 30*time.Second, func() bool {
		j, err := e.job(task + "-ex-00")
		return err == nil && taskmeta.StatusOf(j) == taskmeta.JobComplete
	})
	e.idle()
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Fatalf("the next executor started without an event: %v", err)
	}
	e.sweep()
	if _, err := e.job(task + "-ex-01"); err != nil {
		t.Fatalf("the sweep did not start the next executor: %v", err)
	}
	e.sweepUntil(task, tesv1.StateComplete, 30*time.Second)
}

// A sweep reads its lists a page at a time (here one object a page): events
// lost for several tasks are all caught (behaviour §7).
func TestSweepPagesCatchLostEvents(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.srv.Runner.PageSize = 1
	tasks := []string{"task-page01", "task-page02", "task-page03"}
	for _, task := range tasks {
		e.submit(task, noIO(taskJSON(executor(task, 0, runFor("2s"), nil), executor(task, 1, nil, nil))))
	}
	for _, task := range tasks {
		e.waitFor("the first executor's job", 20*time.Second, func() bool { _, err := e.job(task + "-ex-00"); return err == nil })
	}
	if err := e.adapter.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		e.waitFor("the first executor to complete", 30*time.Second, func() bool {
			j, err := e.job(task + "-ex-00")
			return err == nil && taskmeta.StatusOf(j) == taskmeta.JobComplete
		})
	}
	body := e.sweep()
	for _, task := range tasks {
		if _, err := e.job(task + "-ex-01"); err != nil {
			t.Errorf("the sweep did not start %s's next executor: %v (%s)", task, err, body)
		}
	}
	if !strings.Contains(body, `"tasks":3`) {
		t.Errorf("sweep %s, want all 3 tasks seen", body)
	}
}

// With TASK_TTL_SECONDS, a task that ended that long ago is deleted with all
// it owns.
func TestTTLDeletesEndedTask(t *testing.T) {
	// Long enough for GET to see COMPLETE before the task goes: the end is
	// recorded on the anchor in whole seconds, so a TTL of 1 s may
	// already be over a few milliseconds after the task ends.
	ttl := 5 * time.Second
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.TaskTTL = &ttl }})
	task := "task-ttl01"
	e.submit(task, noIO(taskJSON(executor(task, 0, nil, nil))))
	e.waitState(task, tesv1.StateComplete, taskTimeout)
	// The final state is recorded by the step of the job's last event, or
	// by a sweep when that event is slow to come (a loaded machine).
	e.waitFor("the final state on the anchor", 30*time.Second, func() bool {
		cm, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), task, metav1.GetOptions{})
		if err == nil && cm.Annotations[taskmeta.AnnotationState] != "" {
			return true
		}
		e.sweep()
		return false
	})
	time.Sleep(ttl + time.Second)
	e.sweep()
	if _, code := e.view(task); code != http.StatusNotFound {
		t.Errorf("view of a task past its TTL: %d, want 404", code)
	}
	e.waitFor("the garbage collector to delete the task's jobs", 30*time.Second, func() bool { return len(e.jobNames(task)) == 0 })
}

// KEEP_FAILED_PVC keeps the PVC of a failed task, released from the task so
// that deleting the task keeps it too.
func TestKeepFailedPVC(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.KeepFailedPVC = true }})
	task := "task-keep01"
	e.submit(task, taskJSON(executor(task, 0, fail(1), nil)))
	e.waitState(task, tesv1.StateExecutorError, taskTimeout)
	e.waitFor("the PVC to be released", 10*time.Second, func() bool {
		pvc, err := shared.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), taskmeta.PVCName(task), metav1.GetOptions{})
		return err == nil && pvc.DeletionTimestamp == nil && len(pvc.OwnerReferences) == 0
	})
}

func (e *env) podsOf(job string) []corev1.Pod {
	pods, err := e.c.Client.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		e.t.Fatal(err)
	}
	return pods.Items
}

// A filer job that fails stops the task with SYSTEM_ERROR, before any
// executor.
func TestInputsFilerFailureIsSystemError(t *testing.T) {
	zero := int32(0)
	e := newEnv(t, envOptions{config: func(c *steps.Config) {
		c.FilerName, c.FilerVersion = "fate.tesk.test/fail", "5"
		c.FilerBackoffLimit = &zero
	}})
	task := "task-filerfail01"
	e.submit(task, taskJSON(executor(task, 0, nil, nil)))
	v := e.waitState(task, tesv1.StateSystemError, taskTimeout)
	if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), task+"-inputs-filer") {
		t.Errorf("system_logs %v should name the inputs filer's job", v.Logs[0].SystemLogs)
	}
	if _, err := e.job(task + "-ex-00"); !apierrors.IsNotFound(err) {
		t.Errorf("an executor was created after the inputs filer failed: %v", err)
	}
	if j, err := e.job(task + "-inputs-filer"); err != nil || taskmeta.StatusOf(j) != taskmeta.JobFailed {
		t.Errorf("the failed filer's job should be kept: %v", err)
	}
	e.waitFor("the PVC to be deleted", 10*time.Second, func() bool { return e.pvcGone(task) })
}

// A filer whose image cannot be pulled is failed after the pod timeout:
// SYSTEM_ERROR.
func TestFilerThatCannotStartIsSystemError(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.FilerName, c.FilerVersion = "fate.tesk.test/ErrImagePull", "latest" }})
	task := "task-filerpull01"
	e.submit(task, taskJSON(executor(task, 0, nil, nil)))
	e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	e.checkFailedByService(task + "-inputs-filer")
}

// With TESK_MAX_QUEUE_SECONDS, a filer whose pod is never scheduled is failed
// and kept: SYSTEM_ERROR.
func TestUnschedulableFilerIsFailed(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) {
		c.MaxQueue = 2 * time.Second
		c.FilerResources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500")}}
	}})
	task := "task-filersched01"
	e.submit(task, taskJSON(executor(task, 0, nil, nil)))
	v := e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), "wasn't scheduled") {
		t.Errorf("system_logs %v", v.Logs[0].SystemLogs)
	}
	e.checkFailedByService(task + "-inputs-filer")
}

// Cancelling as the TESK API does, with the label task-status: Cancelled on
// the task (here its anchor): the ApiServerSource's ConfigMap event is the
// cancellation; no task.cancelled is sent.
func TestCancelByLabel(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-cancel03"
	e.submit(task, noIO(taskJSON(executor(task, 0, runFor("60s"), nil), executor(task, 1, nil, nil))))
	e.waitFor("the executor's job", 30*time.Second, func() bool { _, err := e.job(task + "-ex-00"); return err == nil })
	patch := []byte(`{"metadata":{"labels":{"task-status":"Cancelled"}}}`)
	if _, err := shared.Client.CoreV1().ConfigMaps(e.ns).Patch(context.Background(), task, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitState(task, tesv1.StateCanceled, 30*time.Second)
	if _, err := e.job(task + "-ex-00"); !apierrors.IsNotFound(err) {
		t.Errorf("the running executor's job is not deleted: %v", err)
	}
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Errorf("a later executor was created: %v", err)
	}
}
