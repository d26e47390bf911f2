package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"knative.dev/pkg/logging"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// fakeAPI is client-go's fake clientset with what the runner relies on of
// the API server: resourceVersions that change on every write, and merge
// patches of the anchor conditional on the resourceVersion they carry; and
// errors injected at chosen requests.
type fakeAPI struct {
	*fake.Clientset
	t *testing.T

	mu     sync.Mutex
	rv     int
	faults []*fault
}

// fault answers matching requests with err, times times (0: always). With
// applied, the request takes effect first (its answer is what is lost).
type fault struct {
	verb, resource, name string
	err                  error
	times                int
	applied              bool
	hits                 int
}

func newFakeAPI(t *testing.T, objects ...runtime.Object) *fakeAPI {
	f := &fakeAPI{t: t, Clientset: fake.NewSimpleClientset()}
	for _, o := range objects {
		f.stamp(o)
		if err := f.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	tracker := k8stesting.ObjectReaction(f.Tracker())
	f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var injected *fault
		for _, ft := range f.faults {
			if ft.matches(a) {
				ft.hits++
				injected = ft
				break
			}
		}
		if injected != nil && !injected.applied {
			return true, nil, injected.err
		}
		handled, obj, err := f.serve(a, tracker)
		if injected != nil {
			return true, nil, injected.err
		}
		return handled, obj, err
	})
	return f
}

func (ft *fault) matches(a k8stesting.Action) bool {
	if ft.times > 0 && ft.hits >= ft.times {
		return false
	}
	if a.GetVerb() != ft.verb || a.GetResource().Resource != ft.resource {
		return false
	}
	return ft.name == "" || actionName(a) == ft.name
}

// inject makes the next times requests (verb, resource, and name if given)
// fail with err; times 0 is every one.
func (f *fakeAPI) inject(verb, resource, name string, err error, times int) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := &fault{verb: verb, resource: resource, name: name, err: err, times: times}
	f.faults = append(f.faults, ft)
	return ft
}

func (f *fakeAPI) stamp(o runtime.Object) {
	f.rv++
	if m, err := meta.Accessor(o); err == nil {
		m.SetResourceVersion(strconv.Itoa(f.rv))
	}
}

// serve carries out a request as the API server would, as far as the runner
// can tell.
func (f *fakeAPI) serve(a k8stesting.Action, tracker k8stesting.ReactionFunc) (bool, runtime.Object, error) {
	switch a := a.(type) {
	case k8stesting.CreateActionImpl:
		obj := a.GetObject().DeepCopyObject()
		f.stamp(obj)
		return tracker(k8stesting.NewCreateAction(a.GetResource(), a.GetNamespace(), obj))
	case k8stesting.PatchActionImpl:
		var body map[string]any
		if err := json.Unmarshal(a.GetPatch(), &body); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		cur, err := f.Tracker().Get(a.GetResource(), a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		m, _ := meta.Accessor(cur)
		md, _ := body["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			body["metadata"] = md
		}
		if want, ok := md["resourceVersion"].(string); ok && want != m.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("the object has been modified"))
		}
		f.rv++
		md["resourceVersion"] = strconv.Itoa(f.rv)
		patch, _ := json.Marshal(body)
		return tracker(k8stesting.NewPatchSubresourceAction(a.GetResource(), a.GetNamespace(), a.GetName(), a.GetPatchType(), patch, a.GetSubresource()))
	}
	return tracker(a)
}

// actionName is the name of the object a request is about.
func actionName(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.GetAction:
		return a.GetName()
	case k8stesting.PatchAction:
		return a.GetName()
	case k8stesting.DeleteAction:
		return a.GetName()
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			return m.GetName()
		}
	}
	return ""
}

// requests lists the requests made, one line each: verb, resource and
// name, and for a patch what it sets (annotations by their short names).
func (f *fakeAPI) requests() []string {
	var out []string
	for _, a := range f.Actions() {
		line := a.GetVerb() + " " + a.GetResource().Resource
		if s := a.GetSubresource(); s != "" {
			line += "/" + s
		}
		if n := actionName(a); n != "" {
			line += " " + strings.TrimPrefix(n, taskfixtures.TaskName+"-")
		}
		if p, ok := a.(k8stesting.PatchAction); ok {
			line += " " + patchSummary(p.GetPatch())
		}
		out = append(out, line)
	}
	return out
}

// patchSummary names what a merge patch sets: the leaf fields, and the
// service's annotations without their prefix.
func patchSummary(patch []byte) string {
	var body map[string]any
	_ = json.Unmarshal(patch, &body)
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			keys = append(keys, prefix)
			return
		}
		for k, sub := range m {
			if k == "resourceVersion" {
				continue
			}
			if prefix == "metadata.annotations" || prefix == "metadata.labels" {
				keys = append(keys, strings.TrimPrefix(k, taskmeta.AnnotationPrefix))
				continue
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub)
		}
	}
	walk("", body)
	sort.Strings(keys)
	return "{" + strings.Join(keys, ",") + "}"
}

// anchor returns the task's anchor as it is now.
func (f *fakeAPI) anchor() *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.CoreV1().ConfigMaps(taskfixtures.Namespace).Get(context.Background(), taskfixtures.TaskName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("anchor: %v", err)
	}
	return cm
}

func (f *fakeAPI) progress() taskmeta.Progress {
	f.t.Helper()
	p, err := taskmeta.ParseProgress(f.anchor().Annotations[taskmeta.AnnotationProgress])
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fakeAPI) job(part string) *batchv1.Job {
	j, err := f.BatchV1().Jobs(taskfixtures.Namespace).Get(context.Background(), taskmeta.ObjectName(taskfixtures.TaskName, part), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// count is how many requests of a verb on a resource (and name) were made.
func (f *fakeAPI) count(verb, resource, name string) int {
	n := 0
	for _, a := range f.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && (name == "" || actionName(a) == name) {
			n++
		}
	}
	return n
}

// testCtx carries a logger that shows only when the test fails.
func testCtx(t *testing.T) context.Context {
	return logging.WithLogger(context.Background(), zaptest.NewLogger(t).Sugar())
}

// testRunner is a runner on the fake API, at t0, with fast retries. It
// takes the task JSON from the events, as make dev's handler does
// (TestEventsAreNotTrustedByDefault covers the default).
func testRunner(api *fakeAPI, cfg steps.Config) *Runner {
	cfg.TrustEvents = true
	return &Runner{
		Client:  api,
		Config:  cfg,
		Now:     func() time.Time { return taskfixtures.Now },
		Backoff: wait.Backoff{Duration: time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 3, Cap: 5 * time.Millisecond},
	}
}

// anchorObject is the task's anchor ConfigMap, holding the task.
func anchorObject(spec *taskspec.Task, m metav1.ObjectMeta) *corev1.ConfigMap {
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return &corev1.ConfigMap{ObjectMeta: m, BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)}}
}

// owned is a job owned by the test task's anchor.
func owned(j *batchv1.Job) *batchv1.Job {
	j.OwnerReferences = steps.Anchor{Name: taskfixtures.TaskName, Namespace: taskfixtures.Namespace, UID: taskfixtures.AnchorUID}.OwnerRefs()
	return j
}

// Errors of every class, as client-go returns them.
var (
	gr          = schema.GroupResource{Group: "batch", Resource: "jobs"}
	errNotFound = apierrors.NewNotFound(gr, "x")
	errConflict = apierrors.NewConflict(gr, "x", fmt.Errorf("the object has been modified"))
	errDenied   = apierrors.NewForbidden(gr, "x", fmt.Errorf("ValidatingAdmissionPolicy 'tesk-deny' denied request"))
	errInvalid  = apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", field.ErrorList{field.Invalid(field.NewPath("spec"), 1, "bad")})
	errThrottle = apierrors.NewTooManyRequests("slow down", 1)
	errInternal = apierrors.NewInternalError(fmt.Errorf("etcdserver: leader changed"))
	errUnavail  = apierrors.NewServiceUnavailable("the server is shutting down")
	errTimeout  = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis", Err: timeoutError{}}
	errDial     = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	errDeadline = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis", Err: context.DeadlineExceeded}
	errReset    = &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
)

// timeoutError is the client's own timeout (net/http's Client.Timeout).
type timeoutError struct{}

func (timeoutError) Error() string {
	return "net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
}
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// errorClass is an injected error and what it is.
type errorClass struct {
	name string
	err  error
	want kubeapi.Outcome
}

var errorClasses = []errorClass{
	{"403 Forbidden", errDenied, kubeapi.Rejected},
	{"404 Not Found", errNotFound, kubeapi.Missing},
	{"409 Conflict", errConflict, kubeapi.Retry},
	{"422 Invalid", errInvalid, kubeapi.Rejected},
	{"429 Too Many Requests", errThrottle, kubeapi.Retry},
	{"500 Internal Server Error", errInternal, kubeapi.Retry},
	{"503 Service Unavailable", errUnavail, kubeapi.Retry},
	{"the client's timeout", errTimeout, kubeapi.Retry},
	{"a refused dial", errDial, kubeapi.Retry},
	{"a context deadline", errDeadline, kubeapi.Retry},
	{"a reset connection", errReset, kubeapi.Retry},
}
