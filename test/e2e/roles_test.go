//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/rbacaudit"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestRolesAreExactlyWhatIsUsed: the Roles of config/knative grant exactly
// what their ServiceAccounts use, read from the API server's audit log of
// this test, both ways. Every request of the handler, the TES API and the
// ApiServerSource's adapter (each as its ServiceAccount, under the Roles
// of config/knative, in the test's namespace) must be granted by a Role
// bound to its ServiceAccount; every permission a Role grants must be used
// by a request, or be one the ApiServerSource controller requires
// (rbacaudit.WhyRequired). Every Role and RoleBinding of config/knative is
// held to it, matched by ServiceAccount, so that a Role added there is
// checked too.
//
// The test goes through every path that needs a permission, rare ones
// included; each step says which permissions it is there for:
//
//   - a TES task with an input, two executors and an output, to COMPLETE:
//     the TES API checks it against the namespace's ResourceQuotas
//     (resourcequotas list: it asks for a core) and creates and gets its
//     anchor (configmaps create, get);
//     the handler reads and records it (configmaps get, patch), creates the
//     PVC, the filers' and the executors' jobs (persistentvolumeclaims
//     create, jobs create), reads the jobs it waits for and lists a task's
//     jobs and pods (jobs get, list; pods list), reads the outputs filer's
//     log and each executor's as it ends and records them on their jobs
//     (pods/log get, jobs patch), deletes
//     the PVC (persistentvolumeclaims delete) and tells the story
//     (events.k8s.io events create); the adapter lists and watches jobs,
//     pods and anchors (list, watch);
//   - the task in the FULL view and a list in the BASIC view through the
//     TES API: the anchors listed (configmaps list), the jobs and pods
//     listed (jobs list, pods list; the executors that ended show what
//     the handler recorded on their jobs);
//     the task's story (GET /tasks/{id}/events): the Events of its objects
//     listed (events list);
//   - task.submitted with the task JSON, an executor that fails,
//     KEEP_FAILED_PVC: the handler creates the anchor (configmaps create,
//     which only TRUST_EVENTS on asks for: a handler with the ConfigMap's
//     default never creates one) and releases the PVC from the task
//     (persistentvolumeclaims patch);
//   - a running TES task read in the FULL view, its running executor's
//     log read from its pod (pods/log get), then cancelled through the TES
//     API: it labels the anchor (configmaps patch), the handler deletes the
//     running job (jobs delete);
//   - sweeps past TASK_TTL_SECONDS: the anchors listed (configmaps list)
//     and the ended tasks deleted (configmaps delete).
//
// So the handler runs with every setting that opens a path of its own on:
// TRUST_EVENTS, KEEP_FAILED_PVC and TASK_TTL_SECONDS; the Role must allow
// what any supported configuration asks for.
func TestRolesAreExactlyWhatIsUsed(t *testing.T) {
	if auditLog == "" {
		t.Fatal("the shared cluster runs without an audit log")
	}
	ctx := context.Background()
	// Long enough for the first task to be read after its end on a loaded
	// machine: a later event of an ended task deletes it past its TTL, as
	// the sweep does.
	ttl := 30 * time.Second
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.TaskTTL, c.KeepFailedPVC, c.TrustEvents = &ttl, true, true }})
	api := newTESAPI(t, e, e.url)
	// The comparison runs however the tour ends: a request refused for want
	// of a permission is named even when the step that needed it failed.
	finished := false
	defer func() {
		if !finished {
			t.Log("the tour stopped early: the permissions of its later steps show as unused")
		}
		checkRoles(t, e)
	}()

	// Every pod of the namespace logs this: the executors' stdout, and the
	// uploaded file the outputs filer reports.
	stop, err := shared.SetLogsForSelector(ctx, e.ns, taskmeta.LabelTask,
		"HELLO\nTESK_OUTPUT_FILE_LOGS [{\"output\":0,\"path\":\"/data/out/result.txt\",\"size_bytes\":\"6\"}]\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	// A TES task with an input, executors and an output.
	done := api.create(demoTask("roles"))
	api.waitState(done, tesv1.StateComplete, 60*time.Second)
	full := api.get(done, tesv1.ViewFull)
	if ex := full["logs"].([]any)[0].(map[string]any)["logs"].([]any); len(ex) == 0 || ex[0].(map[string]any)["stdout"] == "" {
		t.Errorf("FULL: no executor's stdout: %v", full["logs"])
	}
	if code, body := api.do(http.MethodGet, "/tasks?view=BASIC", nil); code != http.StatusOK || !strings.Contains(string(body), done) {
		t.Errorf("list BASIC: %d %s", code, body)
	}
	if code, body := api.do(http.MethodGet, "/tasks/"+done+"/events", nil); code != http.StatusOK || !strings.Contains(string(body), `"reason":"JobCreated"`) {
		t.Errorf("the task's story: %d %s", code, body)
	}
	e.waitFor("the outputs filer's uploaded files on its job", 20*time.Second, func() bool {
		j, err := e.job(done + "-outputs-filer")
		return err == nil && j.Annotations[taskmeta.AnnotationOutputFileLogs] != ""
	})
	e.waitFor("the PVC to be deleted", 20*time.Second, func() bool { return e.pvcGone(done) })

	// task.submitted with the task JSON, an executor that fails, the PVC
	// kept.
	kept := "task-roles-keep"
	e.submit(kept, taskJSON(executor(kept, 0, fail(1), nil)))
	e.waitState(kept, tesv1.StateExecutorError, taskTimeout)
	e.waitFor("the PVC to be released", 20*time.Second, func() bool {
		pvc, err := shared.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, taskmeta.PVCName(kept), metav1.GetOptions{})
		return err == nil && pvc.DeletionTimestamp == nil && len(pvc.OwnerReferences) == 0
	})

	// A running TES task cancelled through the TES API.
	cancelled := api.create(map[string]any{"executors": []any{map[string]any{"image": "fate.tesk.test/forever", "command": []any{"sleep", "1000"}}}})
	e.waitFor("the executor's pod to run", 30*time.Second, func() bool {
		pods := e.podsOf(cancelled + "-ex-00")
		return len(pods) > 0 && pods[0].Status.Phase == corev1.PodRunning
	})
	// Its FULL view reads the running executor's log from its pod.
	running := api.get(cancelled, tesv1.ViewFull)
	if ex := running["logs"].([]any)[0].(map[string]any)["logs"].([]any); len(ex) != 1 || ex[0].(map[string]any)["stdout"] == nil || ex[0].(map[string]any)["end_time"] != nil {
		t.Errorf("FULL of a running executor: %v", running["logs"])
	}
	if code, body := api.do(http.MethodPost, "/tasks/"+cancelled+":cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	api.waitState(cancelled, tesv1.StateCanceled, 60*time.Second)
	e.waitFor("the running job to be deleted", 20*time.Second, func() bool {
		_, err := e.job(cancelled + "-ex-00")
		return apierrors.IsNotFound(err)
	})

	// Past the TTL, the sweep deletes the ended tasks.
	tasks := []string{done, kept, cancelled}
	e.waitFor("the final states on the anchors", 30*time.Second, func() bool {
		for _, task := range tasks {
			cm, err := shared.Client.CoreV1().ConfigMaps(e.ns).Get(ctx, task, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue // ended, and already past its TTL
			}
			if err != nil || cm.Annotations[taskmeta.AnnotationState] == "" {
				e.sweep()
				return false
			}
		}
		return true
	})
	time.Sleep(ttl + time.Second)
	e.waitFor("the ended tasks to be deleted past their TTL", ttl+30*time.Second, func() bool {
		e.sweep()
		for _, task := range tasks {
			if _, code := e.view(task); code != http.StatusNotFound {
				return false
			}
		}
		return true
	})
	finished = true
}

// checkRoles holds config/knative's Roles, as the env deployed them, to
// the requests the audit log shows the env's ServiceAccounts making.
func checkRoles(t *testing.T, e *env) {
	t.Helper()
	granted, err := rbacaudit.Granted(e.config)
	if err != nil {
		t.Fatal(err)
	}
	// The namespaces a source's namespaceSelector selects, as Knative's
	// controller lists them.
	namespaces := func(sel labels.Selector) ([]string, error) {
		list, err := e.c.Client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return names, nil
	}
	required, err := rbacaudit.RequiredBySources(e.config, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	if len(granted) == 0 || len(required) == 0 {
		t.Fatalf("config/knative grants %d permissions, the ApiServerSource requires %d: the manifests were not read", len(granted), len(required))
	}
	compare := func() (int, map[rbacaudit.Permission]int, rbacaudit.Verdict) {
		f, err := os.Open(auditLog)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		reqs, err := benchkit.ReadAudit(f, func(r benchkit.AuditRequest) bool {
			return strings.HasPrefix(r.User, "system:serviceaccount:"+e.ns+":")
		})
		if err != nil {
			t.Fatal(err)
		}
		used := rbacaudit.Used(reqs, map[string]bool{e.ns: true})
		return len(reqs), used, rbacaudit.Compare(granted, required, used)
	}
	// The handler records Kubernetes Events in the background: a grant
	// only they use shows in the audit log once they are out, so the log
	// is read again while a grant is unused, for up to 30 s (a request
	// no Role grants fails at once).
	n, used, v := compare()
	for deadline := time.Now().Add(30 * time.Second); len(v.Unused) > 0 && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		n, used, v = compare()
	}
	t.Logf("%d requests of the namespace's ServiceAccounts; permissions:\n%s", n, rbacaudit.Report(used, v))
	for p, n := range v.ByDefault {
		t.Logf("allowed to every authenticated user by Kubernetes' default ClusterRoles: %s (%d requests)", p, n)
	}
	for _, p := range v.Problems() {
		t.Error(p)
	}
}
