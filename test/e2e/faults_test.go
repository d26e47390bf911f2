//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The fault paths of behaviour §8 against real rejections: a
// ValidatingAdmissionPolicy of the API server denies the handler's deletes
// or patches of the test's jobs.

// denyHandler makes the API server deny the handler's operations
// (admissionregistration operations: DELETE, UPDATE for a patch) on jobs in
// the test's namespace, and waits until it does.
func (e *env) denyHandler(operations ...admissionv1.OperationType) {
	e.t.Helper()
	ctx := context.Background()
	name := "tesk-deny-" + e.ns
	user := fmt.Sprintf("system:serviceaccount:%s:%s", e.ns, HandlerServiceAccount)
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: operations,
					Rule:       admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "the-handler", Expression: fmt.Sprintf("request.userInfo.username == %q", user)}},
			Validations:     []admissionv1.Validation{{Expression: "false", Message: "denied by the test's admission policy"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns},
			}},
		},
	}
	arc := shared.Client.AdmissionregistrationV1()
	if _, err := arc.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create the admission policy: %v", err)
	}
	if _, err := arc.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create the admission policy's binding: %v", err)
	}
	e.t.Cleanup(func() {
		_ = arc.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = arc.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// The API server loads policies in the background: probe with dry runs
	// as the handler until they are denied.
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"},
		Spec: batchv1.JobSpec{Suspend: ptrTo(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox:1.36"}},
		}}},
	}
	if _, err := shared.Client.BatchV1().Jobs(e.ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	sa := e.handlerClient()
	dry := []string{metav1.DryRunAll}
	e.waitFor("the admission policy to deny the handler", 30*time.Second, func() bool {
		for _, op := range operations {
			var err error
			switch op {
			case admissionv1.Delete:
				err = sa.BatchV1().Jobs(e.ns).Delete(ctx, probe.Name, metav1.DeleteOptions{DryRun: dry})
			case admissionv1.Update:
				_, err = sa.BatchV1().Jobs(e.ns).Patch(ctx, probe.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"probe":"1"}}}`), metav1.PatchOptions{DryRun: dry})
			}
			if !kubeapi.IsRejected(err) || !strings.Contains(err.Error(), "denied by the test's admission policy") {
				return false
			}
		}
		return true
	})
	if err := shared.Client.BatchV1().Jobs(e.ns).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// handlerClient is a client with the handler's ServiceAccount token.
func (e *env) handlerClient() kubernetes.Interface {
	e.t.Helper()
	return kubernetes.NewForConfigOrDie(e.handlerRESTConfig())
}

// handlerRESTConfig is the API server as the handler's ServiceAccount
// reaches it.
func (e *env) handlerRESTConfig() *rest.Config {
	e.t.Helper()
	kubeconfig, err := e.c.ServiceAccountKubeconfig(context.Background(), e.ns, HandlerServiceAccount)
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	return rc
}

func ptrTo[T any](v T) *T { return &v }

func systemLogs(v tesv1.Task) string { return strings.Join(v.Logs[0].SystemLogs, "\n") }

// behaviour §8.2: the admission policy rejects failing a job whose pod
// cannot start: it is deleted instead, and the task stops.
func TestFailRejectedByPolicyDeletesJob(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.denyHandler(admissionv1.Update)
	task := "task-vapfail01"
	e.submit(task, noIO(taskJSON(executor(task, 0, map[string]string{fateResult: "ErrImagePull"}, nil))))
	v := e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	if logs := systemLogs(v); !strings.Contains(logs, "denied by the test's admission policy") || !strings.Contains(logs, "deleted instead") {
		t.Errorf("system_logs %q should say the API server rejected failing the job, so it was deleted", logs)
	}
	e.waitFor("the job to be deleted", 20*time.Second, func() bool {
		_, err := e.job(task + "-ex-00")
		return apierrors.IsNotFound(err)
	})
}

// behaviour §8.3: the admission policy rejects deleting the running job of
// a cancelled task: the job is failed instead and kept, the PVC deleted, and
// the task ends CANCELED, saying so.
func TestCancelWhenDeletingIsRejected(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.denyHandler(admissionv1.Delete)
	task := "task-vapcancel1"
	e.submit(task, taskJSON(executor(task, 0, runFor("120s"), nil), executor(task, 1, nil, nil)))
	e.waitFor("the executor's pod to run", 30*time.Second, func() bool {
		for _, p := range e.podsOf(task + "-ex-00") {
			if p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
	if code, body := e.post("task.cancelled", map[string]any{"task": task}); code != http.StatusOK {
		t.Fatalf("task.cancelled: %d %s", code, body)
	}
	v := e.waitState(task, tesv1.StateCanceled, 30*time.Second)
	if logs := systemLogs(v); !strings.HasPrefix(logs, "Task cancelled\n") || !strings.Contains(logs, "Deleting job '"+task+"-ex-00' was rejected") {
		t.Errorf("system_logs %q should say the task was cancelled and name the kept job", logs)
	}
	// Failed instead, so that its pod stops; kept.
	e.checkFailedByService(task + "-ex-00")
	e.waitFor("the PVC to be deleted", 20*time.Second, func() bool { return e.pvcGone(task) })
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Errorf("a later executor was created: %v", err)
	}
}

// behaviour §8.4: TESK_MAX_QUEUE_SECONDS, with the admission policy
// rejecting the deletion of the unschedulable executor's job: the job is
// failed and kept instead, and the task stops.
func TestUnschedulableWhenDeletingIsRejected(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.MaxQueue = 2 * time.Second }})
	e.denyHandler(admissionv1.Delete)
	task := "task-vapsched01"
	ex := executor(task, 0, nil, nil)
	c := ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "500"}}
	e.submit(task, noIO(taskJSON(ex)))
	v := e.sweepUntil(task, tesv1.StateSystemError, 40*time.Second)
	logs := systemLogs(v)
	if !strings.Contains(logs, "wasn't scheduled within 2 s") || !strings.Contains(logs, "Insufficient cpu") || !strings.Contains(logs, "was rejected") {
		t.Errorf("system_logs %q should give the scheduler's message and say the deletion was rejected", logs)
	}
	j, err := e.job(task + "-ex-00")
	if err != nil {
		t.Fatalf("the job is not kept: %v", err)
	}
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 1 {
		t.Errorf("the kept job's activeDeadlineSeconds is %v, want 1 (failed)", j.Spec.ActiveDeadlineSeconds)
	}
}

// behaviour §8.3: a deleted job that never goes (a finalizer holds it) keeps
// the task CANCELING for at most the pod timeout; then it is CANCELED, with
// a line naming the job.
func TestCancelWithAJobStuckTerminating(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-stuckterm1"
	e.submit(task, noIO(taskJSON(executor(task, 0, runFor("120s"), nil))))
	name := task + "-ex-00"
	e.waitFor("the executor's job", 30*time.Second, func() bool { _, err := e.job(name); return err == nil })
	const hold = "tesk.test/hold"
	ctx := context.Background()
	if _, err := shared.Client.BatchV1().Jobs(e.ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+hold+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = shared.Client.BatchV1().Jobs(e.ns).Patch(context.Background(), name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	})
	if code, body := e.post("task.cancelled", map[string]any{"task": task}); code != http.StatusOK || !strings.Contains(body, tesv1.StateCanceling) {
		t.Fatalf("task.cancelled: %d %s, want CANCELING", code, body)
	}
	start := time.Now()
	v := e.sweepUntil(task, tesv1.StateCanceled, 40*time.Second)
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("CANCELED after %v, before the pod timeout (3 s) since the deletion", waited)
	}
	if logs := systemLogs(v); !strings.Contains(logs, "Job '"+name+"' was still terminating 3 s after it was deleted") {
		t.Errorf("system_logs %q should name the job still terminating", logs)
	}
	j, err := e.job(name)
	if err != nil || j.DeletionTimestamp == nil {
		t.Errorf("the job should still be terminating: %v", err)
	}
}
