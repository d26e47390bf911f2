package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The layer that talks to the API server, on client-go's fake clientset with
// errors injected at each write of a step: the exact requests made, and the
// state written (behaviour §8).

func TestClassify(t *testing.T) {
	cases := append(slices.Clone(errorClasses),
		errorClass{"400 Bad Request", apierrors.NewBadRequest("no"), kubeapi.Rejected},
		errorClass{"401 Unauthorized", apierrors.NewUnauthorized("token expired"), kubeapi.Rejected},
		errorClass{"403 exceeded quota", apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "x", errors.New("exceeded quota: q")), kubeapi.Rejected},
		errorClass{"408 Request Timeout", apierrors.NewTimeoutError("slow", 1), kubeapi.Retry},
		errorClass{"504 Gateway Timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "jobs"}, "patch", 1), kubeapi.Retry},
		errorClass{"a wrapped 403", fmt.Errorf("patching: %w", errDenied), kubeapi.Rejected},
		errorClass{"a wrapped dial error", fmt.Errorf("patching: %w", errDial), kubeapi.Retry},
		errorClass{"no error", nil, kubeapi.Done},
	)
	for _, c := range cases {
		if got := kubeapi.Classify(c.err); got != c.want {
			t.Errorf("%s: Classify = %s, want %s", c.name, got, c.want)
		}
	}
}

// stuckTask is a task whose only executor's pod cannot pull its image, for
// longer than the pod timeout: its step fails the job.
func stuckTask() []runtime.Object {
	prog := taskfixtures.ProgressOf([]string{"ex-00"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
	pod := taskfixtures.Waiting("ex-00", taskfixtures.Ago(time.Hour), taskfixtures.Ago(time.Hour), "ImagePullBackOff", false)
	return []runtime.Object{anchorObject(taskfixtures.TaskWith(1), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), owned(taskfixtures.Running("ex-00")), pod}
}

func TestFailingAJob(t *testing.T) {
	rejected := []string{
		"get configmaps task-1234abcd",
		"get jobs ex-00",
		"list pods",
		"patch configmaps task-1234abcd {progress,taskmaster-name}", // failing recorded first
		"patch jobs ex-00 {failed,failed-at,spec.activeDeadlineSeconds}",
		"get configmaps task-1234abcd",
		"patch configmaps task-1234abcd {progress}", // ended by the service, before the delete
		"delete jobs ex-00",
		"get configmaps task-1234abcd",
		"get jobs ex-00",
		"list pods",
		"patch configmaps task-1234abcd {ended,reason,state,state}",
	}
	for _, c := range errorClasses {
		if c.want == kubeapi.Missing {
			continue // a job gone under the patch: the task stops as for any job deleted (TestDecide)
		}
		t.Run(c.name, func(t *testing.T) {
			api := newFakeAPI(t, stuckTask()...)
			api.inject("patch", "jobs", taskmeta.ObjectName(taskfixtures.TaskName, "ex-00"), c.err, 0)
			res, err := testRunner(api, steps.DefaultConfig()).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-pod", Pods: true})
			if c.want == kubeapi.Rejected {
				// behaviour §1.12: only a rejection falls back to deleting
				// the job, and the task stops.
				if err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				if got := api.requests(); !slices.Equal(got, rejected) {
					t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(rejected, "\n"))
				}
				if api.job("ex-00") != nil {
					t.Error("the job whose failing was rejected is not deleted")
				}
				a := api.anchor()
				if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], "was rejected") {
					t.Errorf("final %q %q, want SYSTEM_ERROR saying the failing was rejected", a.Annotations[taskmeta.AnnotationState], a.Annotations[taskmeta.AnnotationReason])
				}
				return
			}
			// behaviour §8.2: any other error deletes nothing; the step
			// answers an error that is tried again.
			if err == nil || !kubeapi.IsTransient(err) {
				t.Fatalf("Reconcile = %+v, %v; want an error to try again", res, err)
			}
			if n := api.count("delete", "jobs", ""); n != 0 {
				t.Errorf("%d deletes of jobs after %v", n, c.err)
			}
			if api.job("ex-00") == nil {
				t.Error("the job is gone")
			}
			if s := api.anchor().Annotations[taskmeta.AnnotationState]; s != "" {
				t.Errorf("final state %s written", s)
			}
			if !api.progress().IsFailing("ex-00") {
				t.Error("the job the step set out to fail is not recorded as failing")
			}
			// Transient errors are retried within the step (bounded); a
			// conflict is answered at once, as the step must read again.
			want := 3
			if c.err == error(errConflict) {
				want = 1
			}
			if n := api.count("patch", "jobs", ""); n != want {
				t.Errorf("%d patches of the job, want %d", n, want)
			}
		})
	}
}

// cancelledTask is a cancelled task with a PVC and a running executor.
func cancelledTask() []runtime.Object {
	prog := taskfixtures.ProgressOf([]string{taskmeta.PartPVC, "ex-00"}, "ev-0", taskfixtures.Ago(time.Hour), taskmeta.PartPVC, "ex-00")
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: taskmeta.PVCName(taskfixtures.TaskName), Namespace: taskfixtures.Namespace}}
	return []runtime.Object{anchorObject(taskfixtures.TaskWith(1), taskfixtures.Cancelled(taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL))), owned(taskfixtures.Running("ex-00")), pvc}
}

func TestCancelWhenDeletingIsRejected(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KEEP_FAILED_PVC=%v", keep), func(t *testing.T) {
			api := newFakeAPI(t, cancelledTask()...)
			api.inject("delete", "jobs", taskmeta.ObjectName(taskfixtures.TaskName, "ex-00"), errDenied, 0)
			cfg := steps.DefaultConfig()
			cfg.KeepFailedPVC = keep
			res, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-cancel"})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			pvc := "delete persistentvolumeclaims pvc"
			if keep {
				pvc = "patch persistentvolumeclaims pvc {metadata.ownerReferences}"
			}
			want := []string{
				"get configmaps task-1234abcd",
				"get jobs ex-00",
				"patch configmaps task-1234abcd {progress,taskmaster-name}", // ended by the cancel, before the delete
				"delete jobs ex-00",
				"patch jobs ex-00 {failed,failed-at,spec.activeDeadlineSeconds}", // failed instead, so that its pods stop
				"get configmaps task-1234abcd",
				"patch configmaps task-1234abcd {progress}", // kept: never deleted again
				"get configmaps task-1234abcd",
				"get jobs ex-00",
				pvc,
				"patch configmaps task-1234abcd {ended,reason,state,state}",
			}
			if got := api.requests(); !slices.Equal(got, want) {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			a := api.anchor()
			if res.State != tesv1.StateCanceled || a.Annotations[taskmeta.AnnotationState] != tesv1.StateCanceled || a.Labels[taskmeta.LabelState] != tesv1.StateCanceled {
				t.Errorf("state %s, written %q, labelled %q; want CANCELED", res.State, a.Annotations[taskmeta.AnnotationState], a.Labels[taskmeta.LabelState])
			}
			if r := a.Annotations[taskmeta.AnnotationReason]; !strings.Contains(r, "Task cancelled\nDeleting job 'task-1234abcd-ex-00' was rejected") {
				t.Errorf("reason %q, want the cancel and a line naming the kept job", r)
			}
			// A later event changes nothing.
			before := len(api.Actions())
			if _, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-later"}); err != nil {
				t.Fatal(err)
			}
			if n := api.count("delete", "jobs", ""); n != 1 {
				t.Errorf("%d deletes of the job, want 1", n)
			}
			if got := len(api.Actions()) - before; got != 1 {
				t.Errorf("%d requests for an ended task's event, want 1 (its anchor)", got)
			}
		})
	}
	for _, c := range errorClasses {
		if c.want != kubeapi.Retry {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			api := newFakeAPI(t, cancelledTask()...)
			api.inject("delete", "jobs", "", c.err, 0)
			_, err := testRunner(api, steps.DefaultConfig()).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-cancel"})
			if err == nil || !kubeapi.IsTransient(err) {
				t.Fatalf("Reconcile: %v; want an error to try again", err)
			}
			if s := api.anchor().Annotations[taskmeta.AnnotationState]; s != "" {
				t.Errorf("final state %s written while the delete may still pass", s)
			}
			if n := api.count("patch", "jobs", ""); n != 0 {
				t.Errorf("the job was failed after %v", c.err)
			}
			if _, kept := api.progress().KeptReason("ex-00"); kept {
				t.Error("the job is recorded as kept")
			}
		})
	}
}

// unschedulableTask is a task whose executor's pod has not been scheduled
// for two hours, and never ran.
func unschedulableTask() []runtime.Object {
	prog := taskfixtures.ProgressOf([]string{"ex-00"}, "ev-0", taskfixtures.Ago(2*time.Hour), "ex-00")
	return []runtime.Object{anchorObject(taskfixtures.TaskWith(1), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), owned(taskfixtures.Running("ex-00")), taskfixtures.UnschedulablePod("ex-00", taskfixtures.Ago(2*time.Hour))}
}

func TestMaxQueueWhenDeletingIsRejected(t *testing.T) {
	cfg := steps.DefaultConfig()
	cfg.MaxQueue = time.Hour
	t.Run("the job is failed and kept instead, and the task stops", func(t *testing.T) {
		api := newFakeAPI(t, unschedulableTask()...)
		api.inject("delete", "jobs", "", errDenied, 0)
		if _, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev", Pods: true}); err != nil {
			t.Fatal(err)
		}
		j := api.job("ex-00")
		if j == nil || j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 1 {
			t.Fatalf("job %+v, want it kept with activeDeadlineSeconds 1", j)
		}
		a := api.anchor()
		lines := strings.Split(a.Annotations[taskmeta.AnnotationReason], "\n")
		if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || len(lines) != 2 ||
			!strings.Contains(lines[0], "wasn't scheduled within 3600 s: 0/3 nodes are available: 3 Insufficient cpu.") || !strings.Contains(lines[1], "it is kept") {
			t.Errorf("final %q %q, want SYSTEM_ERROR with the scheduler's message and the kept job", a.Annotations[taskmeta.AnnotationState], a.Annotations[taskmeta.AnnotationReason])
		}
		if n := api.count("delete", "jobs", ""); n != 1 {
			t.Errorf("%d deletes, want 1", n)
		}
	})
	t.Run("failing it rejected too: the task stops all the same, saying both", func(t *testing.T) {
		api := newFakeAPI(t, unschedulableTask()...)
		api.inject("delete", "jobs", "", errDenied, 0)
		api.inject("patch", "jobs", "", errDenied, 0)
		if _, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev", Pods: true}); err != nil {
			t.Fatal(err)
		}
		a := api.anchor()
		if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], "and so was failing it") {
			t.Errorf("final %q %q", a.Annotations[taskmeta.AnnotationState], a.Annotations[taskmeta.AnnotationReason])
		}
	})
}

// input is a task JSON with an input, so that it has a PVC.
func input(t *testing.T) json.RawMessage {
	raw, err := json.Marshal(taskfixtures.TaskWith(1, taskfixtures.WithInput))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestRejectedVolumeClaim(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, taskmeta.PVCName(taskfixtures.TaskName),
		errors.New("exceeded quota: storage, requested: requests.storage=2Gi, used: requests.storage=9Gi, limited: requests.storage=10Gi"))
	class := apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, taskmeta.PVCName(taskfixtures.TaskName),
		field.ErrorList{field.Invalid(field.NewPath("spec", "storageClassName"), "Fast_SSD", "a lowercase RFC 1123 subdomain must consist of ...")})
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a quota", quota, "exceeded quota: storage"},
		{"an invalid STORAGE_CLASS_NAME", class, `spec.storageClassName: Invalid value: "Fast_SSD"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := newFakeAPI(t)
			api.inject("create", "persistentvolumeclaims", "", c.err, 0)
			res, err := testRunner(api, steps.DefaultConfig()).Submit(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, input(t), "ev-1")
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			a := api.anchor()
			if res.State != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], c.want) {
				t.Errorf("state %s, final %q %q; want SYSTEM_ERROR with the API server's message", res.State, a.Annotations[taskmeta.AnnotationState], a.Annotations[taskmeta.AnnotationReason])
			}
			if n := api.count("create", "persistentvolumeclaims", ""); n != 1 {
				t.Errorf("%d creates of the claim, want 1", n)
			}
			if n := api.count("create", "jobs", ""); n != 0 {
				t.Errorf("%d jobs created", n)
			}
			// A redelivery of the submission creates nothing more.
			if _, err := testRunner(api, steps.DefaultConfig()).Submit(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, input(t), "ev-1"); err != nil {
				t.Fatal(err)
			}
			if n := api.count("create", "persistentvolumeclaims", ""); n != 1 {
				t.Errorf("%d creates of the claim after a redelivery, want 1", n)
			}
		})
	}
}

// TestCreateFailsAfterTheRecord: the step recorded the job, then its create
// failed; the redelivery of the same event creates it, exactly once. Once
// someone deletes it, no event creates it again.
func TestCreateFailsAfterTheRecord(t *testing.T) {
	raw, _ := json.Marshal(taskfixtures.TaskWith(1))
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("the create took effect: %v", applied), func(t *testing.T) {
			api := newFakeAPI(t)
			ft := api.inject("create", "jobs", "", errInternal, 3)
			ft.applied = applied
			r := testRunner(api, steps.DefaultConfig())
			ctx := testCtx(t)
			if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err == nil {
				t.Fatal("Submit succeeded with every create failing")
			}
			if !api.progress().IsStarted("ex-00") {
				t.Fatal("the job was not recorded before its create")
			}
			if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
				t.Fatalf("the redelivery: %v", err)
			}
			if api.job("ex-00") == nil {
				t.Fatal("the redelivery did not create the job")
			}
			// Another event (not the one that recorded it) never creates
			// it: once it is deleted, the task stops.
			if err := api.BatchV1().Jobs(taskfixtures.Namespace).Delete(ctx, taskmeta.ObjectName(taskfixtures.TaskName, "ex-00"), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			res, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", GoneJob: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != tesv1.StateSystemError {
				t.Errorf("state %s after the job was deleted, want SYSTEM_ERROR", res.State)
			}
			if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
				t.Fatal(err)
			}
			if api.job("ex-00") != nil {
				t.Error("a deleted job was created again")
			}
			// Three failed attempts in the first delivery; the redelivery
			// creates the job, unless a failed attempt took effect (then
			// the redelivery finds it running).
			want := 4
			if applied {
				want = 3
			}
			if n := api.count("create", "jobs", ""); n != want {
				t.Errorf("%d creates of the job, want %d", n, want)
			}
		})
	}
}

// TestRecordAnsweredWithAnErrorIsFinished: the step that records the next
// executor gets an error for a write that took effect (the answer was
// lost); its retry, and the redelivery of its event, find the task past the
// job the event is about and still create the recorded job (behaviour §6.3).
func TestRecordAnsweredWithAnErrorIsFinished(t *testing.T) {
	for _, redelivered := range []bool{false, true} {
		t.Run(fmt.Sprintf("redelivered: %v", redelivered), func(t *testing.T) {
			prog := taskfixtures.ProgressOf([]string{"ex-00", "ex-01"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
			done := owned(taskfixtures.JobOf("ex-00", taskfixtures.Cond(batchv1.JobSuccessCriteriaMet, taskfixtures.Now), taskfixtures.Cond(batchv1.JobComplete, taskfixtures.Now)))
			api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
			ft := api.inject("patch", "configmaps", "", errInternal, 1)
			ft.applied = true
			if redelivered {
				api.inject("create", "jobs", "", errInternal, 3)
			}
			r := testRunner(api, steps.DefaultConfig())
			ctx := testCtx(t)
			_, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-1", Job: done.Name, Seen: done})
			if redelivered {
				if err == nil {
					t.Fatal("the step succeeded with every create failing")
				}
				if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-1", Job: done.Name, Seen: done}); err != nil {
					t.Fatalf("the redelivery: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if api.job("ex-01") == nil {
				t.Fatal("the recorded executor ex-01 was never created")
			}
			// Another event about the done job is stale: nothing is done.
			before := len(api.requests())
			if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", Job: done.Name, Seen: done}); err != nil {
				t.Fatal(err)
			}
			if got := api.requests()[before:]; len(got) != 1 {
				t.Errorf("a stale event made %d requests %v, want the anchor read alone", len(got), got)
			}
		})
	}
}

// TestConflictsBackOff: a step whose anchor changed under it decides again
// after a growing, jittered wait, not back to back (behaviour §8.1).
func TestConflictsBackOff(t *testing.T) {
	raw, _ := json.Marshal(taskfixtures.TaskWith(1))
	api := newFakeAPI(t)
	api.inject("patch", "configmaps", "", apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, taskfixtures.TaskName, errors.New("modified")), 3)
	r := testRunner(api, steps.DefaultConfig())
	var waits []time.Duration
	r.Sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	if _, err := r.Submit(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
		t.Fatal(err)
	}
	if api.job("ex-00") == nil {
		t.Error("the job was not created once the conflicts passed")
	}
	if len(waits) != 3 {
		t.Fatalf("waits %v, want 3", waits)
	}
	for i, d := range waits {
		base := r.Backoff.Duration << i
		if base > r.Backoff.Cap {
			base = r.Backoff.Cap
		}
		if d < base || float64(d) > float64(base)*(1+r.Backoff.Jitter) {
			t.Errorf("wait %d is %v, want from %v to %v", i, d, base, time.Duration(float64(base)*(1+r.Backoff.Jitter)))
		}
	}
	t.Run("bounded", func(t *testing.T) {
		api := newFakeAPI(t)
		api.inject("patch", "configmaps", "", apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, taskfixtures.TaskName, errors.New("modified")), 0)
		r := testRunner(api, steps.DefaultConfig())
		r.Sleep = func(context.Context, time.Duration) error { return nil }
		if _, err := r.Submit(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err == nil {
			t.Fatal("a step whose anchor always changes succeeded")
		}
		if n := api.count("patch", "configmaps", ""); n != maxAttempts {
			t.Errorf("%d attempts, want %d", n, maxAttempts)
		}
	})
}

func TestTasksThatCanNeverRun(t *testing.T) {
	cfg := steps.DefaultConfig()
	cfg.TaskTTL = ptrTo(time.Hour)
	ctx := testCtx(t)
	check := func(t *testing.T, api *fakeAPI, err error, reason string) {
		t.Helper()
		if !invalid.Is(err) {
			t.Errorf("error %v, want bad input (400)", err)
		}
		a := api.anchor()
		if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], reason) || a.Annotations[taskmeta.AnnotationTTL] != "3600" {
			t.Errorf("anchor %v, want SYSTEM_ERROR saying %q, with its TTL", a.Annotations, reason)
		}
		if n := api.count("create", "jobs", "") + api.count("create", "persistentvolumeclaims", ""); n != 0 {
			t.Errorf("%d objects created", n)
		}
	}
	t.Run("behaviour §8.5: the event's input", func(t *testing.T) {
		api := newFakeAPI(t)
		_, err := testRunner(api, cfg).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, json.RawMessage(`{"executors":[]}`), "ev-1")
		check(t, api, err, "invalid task")
	})
	t.Run("behaviour §8.5: the TESK API's ConfigMap", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: taskfixtures.AnchorWith(nil), BinaryData: map[string][]byte{"JSON_INPUT.gz": []byte("not gzip")}}
		api := newFakeAPI(t, cm)
		_, err := testRunner(api, cfg).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-1")
		check(t, api, err, "is not gzip")
	})
	t.Run("behaviour §8.5: unknown fields are a warning, and the task runs", func(t *testing.T) {
		api := newFakeAPI(t)
		raw := json.RawMessage(`{"executors":[` + string(must(json.Marshal(taskfixtures.ExecutorSpec(0, "alpine")))) + `],"newer_field":{"x":1}}`)
		if _, err := testRunner(api, cfg).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
			t.Fatal(err)
		}
		if api.job("ex-00") == nil {
			t.Error("a task with an unknown field did not run")
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestEachErrorAtEachWriteOfASubmission injects every error class at each
// write of a submission (the record, the PVC, the inputs filer): a rejected
// create stops the task with the API server's message; any other error
// leaves what was written, writes nothing after it, and is answered as an
// error, after which a redelivery of the event finishes the step, creating
// each object exactly once (behaviour §6, §8.1).
func TestEachErrorAtEachWriteOfASubmission(t *testing.T) {
	writes := []struct{ verb, resource string }{
		{"patch", "configmaps"}, {"create", "persistentvolumeclaims"}, {"create", "jobs"},
	}
	for wi, w := range writes {
		for _, c := range errorClasses {
			t.Run(w.verb+" "+w.resource+": "+c.name, func(t *testing.T) {
				api := newFakeAPI(t)
				ft := api.inject(w.verb, w.resource, "", c.err, 0)
				r := testRunner(api, steps.DefaultConfig())
				r.Sleep = func(context.Context, time.Duration) error { return nil }
				ctx := testCtx(t)
				res, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, input(t), "ev-1")
				later := writes[wi+1:]
				if c.want == kubeapi.Rejected && w.verb == "create" {
					if err != nil || res.State != tesv1.StateSystemError || !strings.Contains(api.anchor().Annotations[taskmeta.AnnotationReason], "was rejected") {
						t.Fatalf("Submit = %+v, %v; want SYSTEM_ERROR saying the create was rejected", res, err)
					}
					for _, l := range later {
						if n := api.count(l.verb, l.resource, ""); n != 0 {
							t.Errorf("%d %s %s after the rejection", n, l.verb, l.resource)
						}
					}
					return
				}
				if err == nil {
					t.Fatalf("Submit = %+v; want an error", res)
				}
				if s := api.anchor().Annotations[taskmeta.AnnotationState]; s != "" {
					t.Errorf("final state %s written", s)
				}
				for _, l := range later {
					if n := api.count(l.verb, l.resource, ""); n != 0 {
						t.Errorf("%d %s %s after the failed write", n, l.verb, l.resource)
					}
				}
				// The fault passes; the redelivery finishes the step.
				ft.times, ft.hits = 1, 1
				res, err = r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, input(t), "ev-1")
				if err != nil || res.State != tesv1.StateInitializing {
					t.Fatalf("the redelivery: %+v, %v; want INITIALIZING", res, err)
				}
				if api.job(taskmeta.PartInputsFiler) == nil {
					t.Error("the inputs filer was not created")
				}
				jobs, _ := api.BatchV1().Jobs(taskfixtures.Namespace).List(ctx, metav1.ListOptions{})
				pvcs, _ := api.CoreV1().PersistentVolumeClaims(taskfixtures.Namespace).List(ctx, metav1.ListOptions{})
				if len(jobs.Items) != 1 || len(pvcs.Items) != 1 {
					t.Errorf("%d jobs and %d PVCs, want one each", len(jobs.Items), len(pvcs.Items))
				}
			})
		}
	}
}

// TestAnExecutorStepsRequests: the step for an executor that ended, from an
// event that carried the ended job: the anchor read, the record and the next
// job's create, then the ended executor's log (its pods listed, its log read,
// its job annotated); the job's later Complete (after SuccessCriteriaMet)
// costs the anchor read alone.
func TestAnExecutorStepsRequests(t *testing.T) {
	prog := taskfixtures.ProgressOf([]string{"ex-00", "ex-01"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
	done := owned(taskfixtures.JobOf("ex-00", taskfixtures.Cond(batchv1.JobSuccessCriteriaMet, taskfixtures.Now)))
	api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
	r := testRunner(api, steps.DefaultConfig())
	ctx := testCtx(t)
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-1", Job: done.Name, Seen: done}); err != nil {
		t.Fatal(err)
	}
	later := done.DeepCopy()
	later.Status.Conditions = append(later.Status.Conditions, taskfixtures.Cond(batchv1.JobComplete, taskfixtures.Now))
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", Job: later.Name, Seen: later}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"get configmaps task-1234abcd",
		"patch configmaps task-1234abcd {progress,taskmaster-name}",
		"create jobs ex-01",
		"list pods",
		"patch jobs ex-00 {executor-log}",
		"get configmaps task-1234abcd",
	}
	if got := api.requests(); !slices.Equal(got, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without the job in the event (Reference mode), it is read.
	api2 := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done.DeepCopy())
	if _, err := testRunner(api2, steps.DefaultConfig()).Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-1", Job: done.Name}); err != nil {
		t.Fatal(err)
	}
	if n := api2.count("get", "jobs", done.Name); n != 1 {
		t.Errorf("%d reads of the job without it in the event, want 1", n)
	}
}

// TestEndedExecutorIsRecorded: the step past an executor that failed
// (ignoring errors) copies its last pod's exit code, times and streams onto
// its job, after it created the next executor; the view then reads the
// record when the pod is gone.
func TestEndedExecutorIsRecorded(t *testing.T) {
	prog := taskfixtures.ProgressOf([]string{"ex-00", "ex-01"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
	ended := owned(taskfixtures.Ignoring(taskfixtures.Failed("ex-00")))
	pod := taskfixtures.TerminatedPod("ex-00", taskfixtures.Ago(30*time.Minute), taskfixtures.Ago(29*time.Minute), taskfixtures.Ago(21*time.Minute), 3)
	pod.Namespace = taskfixtures.Namespace
	pod.Spec.Containers = []corev1.Container{{Name: "executor"}}
	api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), ended, pod)
	r := testRunner(api, steps.DefaultConfig())
	ctx := testCtx(t)
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-1", Job: ended.Name, Seen: ended}); err != nil {
		t.Fatal(err)
	}
	reqs := api.requests()
	if i, k := slices.Index(reqs, "create jobs ex-01"), slices.Index(reqs, "patch jobs ex-00 {executor-log}"); i < 0 || k < i {
		t.Fatalf("requests %v: want ex-01 created, then ex-00's log recorded", reqs)
	}
	j, err := api.BatchV1().Jobs(taskfixtures.Namespace).Get(ctx, ended.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := steps.RecordedLog(j)
	if !ok {
		t.Fatalf("no record on %s: %v", j.Name, j.Annotations)
	}
	// The fake clientset answers every log request with "fake logs", as a
	// node that does not serve the streams apart: stdout holds the log.
	want := tesv1.ExecutorLog{StartTime: taskfixtures.RFC3339(taskfixtures.Ago(29 * time.Minute)), EndTime: taskfixtures.RFC3339(taskfixtures.Ago(21 * time.Minute)), ExitCode: 3, Stdout: "fake logs"}
	if rec != want {
		t.Errorf("record %+v, want %+v", rec, want)
	}
	v := steps.BuildView(taskfixtures.AnchorWith(&prog), taskfixtures.JobsOf(j), nil, steps.DefaultConfig(), taskfixtures.Now)
	if got := v.Logs[0].Logs; len(got) != 1 || got[0] != want {
		t.Errorf("view without pods %s, want the record", taskfixtures.ShowLogs(got))
	}
}
