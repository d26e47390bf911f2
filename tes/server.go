package tes

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// BasePath is where the API is served.
const BasePath = "/ga4gh/tes/v1"

// Paging of the list.
const (
	DefaultPageSize = 256
	MaxPageSize     = 2048
)

// Config is the TES API's configuration.
type Config struct {
	// Namespace holds the tasks.
	Namespace string
	// Sink is where task.submitted and task.cancelled are posted (K_SINK);
	// none: the events are left out (the sweep starts the tasks).
	Sink string
	// Info is the service-info (type, and the backend parameters, are set
	// by the service).
	Info tesv1.ServiceInfo
	// LogTailBytes bounds each of a running executor's streams in the FULL
	// view (0: steps.DefaultLogTailBytes).
	LogTailBytes int
	// Steps is the handler's configuration, for the state derivation.
	Steps steps.Config
	// Convert holds the executors' secret and security context.
	Convert ConvertOptions
}

// Caller is who makes a request.
type Caller struct {
	// Subject is the token's subject ("" without access control).
	Subject string
	// Label is its label-safe form (creator-user-id).
	Label string
	// All: the caller sees every task (an administrator, or no access
	// control).
	All bool
}

// Authenticator finds the caller of a request. An error that is an
// *echo.HTTPError carries its status (401, 403); others are 401.
type Authenticator interface {
	Authenticate(r *http.Request) (Caller, error)
}

// Server is the TES API of one namespace. It keeps nothing between requests:
// every task is its anchor ConfigMap, its jobs and pods.
type Server struct {
	Client   kubernetes.Interface
	Metadata metadata.Interface
	Events   cloudevents.Client
	Config   Config
	Auth     Authenticator
	Log      *zap.SugaredLogger
	Now      func() time.Time
	// Telemetry, when set, makes each request a span and counts requests
	// and created tasks.
	Telemetry *telemetry.API
	// Ready, when set, says why the API cannot serve yet (GET /readyz
	// answers 503 with it), or nil.
	Ready func() error
}

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

type callerKey struct{}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Echo returns the routes.
func (s *Server) Echo() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Server.ReadHeaderTimeout = 10 * time.Second
	e.Server.ReadTimeout = 60 * time.Second
	e.Server.WriteTimeout = 2 * time.Minute
	e.Server.IdleTimeout = 2 * time.Minute
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		code, msg := http.StatusInternalServerError, err.Error()
		var he *echo.HTTPError
		if errors.As(err, &he) {
			code = he.Code
			if m, ok := he.Message.(string); ok {
				msg = m
			}
		}
		if !c.Response().Committed {
			_ = c.JSON(code, ErrorBody{Error: msg})
		}
	}
	if s.Telemetry != nil {
		e.Use(s.Telemetry.Middleware)
	}
	g := e.Group(BasePath, s.authenticate)
	g.GET("/service-info", s.serviceInfo)
	g.POST("/tasks", s.create)
	g.GET("/tasks", s.list)
	g.GET("/tasks/:id", s.get)
	// "{id}:cancel" is one path segment.
	g.POST("/tasks/:ref", s.cancel)
	s.extensions(e, g)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", func(c echo.Context) error {
		if s.Ready != nil {
			if err := s.Ready(); err != nil {
				return c.JSON(http.StatusServiceUnavailable, ErrorBody{Error: "not ready: " + err.Error()})
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	return e
}

func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		caller := Caller{All: true}
		if s.Auth != nil && c.Path() != BasePath+"/service-info" {
			var err error
			caller, err = s.Auth.Authenticate(c.Request())
			if err != nil {
				var he *echo.HTTPError
				if errors.As(err, &he) {
					return c.JSON(he.Code, ErrorBody{Error: fmt.Sprint(he.Message)})
				}
				challenges := []string{BearerChallenge}
				if ch, ok := s.Auth.(Challenger); ok {
					challenges = ch.Challenges()
				}
				for _, v := range challenges {
					c.Response().Header().Add("WWW-Authenticate", v)
				}
				return c.JSON(http.StatusUnauthorized, ErrorBody{Error: err.Error()})
			}
		}
		c.Set("caller", caller)
		return next(c)
	}
}

func callerOf(c echo.Context) Caller {
	if v, ok := c.Get("caller").(Caller); ok {
		return v
	}
	return Caller{}
}

// mayAccess reports whether the caller may see a task.
func (c Caller) mayAccess(meta metav1.ObjectMeta) bool {
	return c.All || (c.Subject != "" && meta.Annotations[taskmeta.AnnotationCreator] == c.Subject)
}

func (s *Server) serviceInfo(c echo.Context) error {
	info := s.Config.Info
	info.Type = tesv1.ServiceType{Group: "org.ga4gh", Artifact: "tes", Version: "1.1.0"}
	info.TesResourcesBackendParameters = append([]string{}, SupportedBackendParameters...)
	info.Storage = s.storage()
	return c.JSON(http.StatusOK, info)
}

// storage is the storage the service offers (service-info.storage): the
// operator's list (TES_STORAGE), else what every deployment's filer
// reaches; file:// only where the operator lists it, having mounted a
// transfer volume (HOST_BASE_PATH).
func (s *Server) storage() []string {
	if len(s.Config.Info.Storage) > 0 {
		return s.Config.Info.Storage
	}
	return []string{"http://", "https://", "ftp://", "s3://"}
}

// checkFileURLs refuses file:// inputs and outputs when the service offers
// no file storage: without a transfer volume the filer could never reach
// them.
func (s *Server) checkFileURLs(t *tesv1.Task) error {
	for _, st := range s.storage() {
		if strings.HasPrefix(strings.ToLower(st), "file:") {
			return nil
		}
	}
	refuse := func(field, raw string) error {
		return bad("%s: %q is a file URL, and this service has no transfer volume for files (service-info storage: %s)", field, taskspec.Redact(raw), strings.Join(s.storage(), ", "))
	}
	for i, in := range t.Inputs {
		if isFileURL(in.URL) {
			return refuse(fmt.Sprintf("inputs[%d].url", i), in.URL)
		}
	}
	for i, out := range t.Outputs {
		if isFileURL(out.URL) {
			return refuse(fmt.Sprintf("outputs[%d].url", i), out.URL)
		}
	}
	return nil
}

func isFileURL(raw string) bool {
	scheme, _, ok := strings.Cut(raw, ":")
	return ok && strings.EqualFold(scheme, "file")
}

// maxCreateAttempts bounds how often a new id is drawn when one is taken.
const maxCreateAttempts = 5

func (s *Server) create(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxRequestBytes+1))
	if err != nil {
		return c.JSON(http.StatusBadRequest, ErrorBody{Error: "reading the body: " + err.Error()})
	}
	t, err := DecodeTask(body)
	if err == nil {
		err = Validate(t)
	}
	if err == nil {
		err = s.checkFileURLs(t)
	}
	if err != nil {
		return s.fail(c, err)
	}
	if dropped := dropUnsupported(t.Resources); len(dropped) > 0 {
		s.Log.Warnw("Unsupported backend parameters left out", "keys", dropped)
	}
	caller := callerOf(c)
	opts := s.Config.Convert
	opts.User = caller.Label
	if opts.DiskGB == 0 {
		opts.DiskGB = s.Config.Steps.DefaultDiskGB
	}
	ctx := c.Request().Context()
	var id string
	for attempt := 0; ; attempt++ {
		id = NewID()
		raw, err := Convert(t, id, opts)
		if err != nil {
			return s.fail(c, err)
		}
		cm, err := BuildAnchor(s.Config.Namespace, id, t, raw, caller)
		if err != nil {
			return s.fail(c, err)
		}
		err = retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() error {
			_, err := s.Client.CoreV1().ConfigMaps(s.Config.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
		if apierrors.IsAlreadyExists(err) && attempt < maxCreateAttempts {
			continue
		}
		if err != nil {
			return s.fail(c, err)
		}
		break
	}
	s.Telemetry.TaskCreated(ctx)
	s.Log.With(telemetry.LogFields(ctx)...).Infow("Task created", "task", id, "name", t.Name, "creator", caller.Subject)
	s.post(ctx, "task.submitted", "submit-"+id, id)
	return c.JSON(http.StatusOK, tesv1.CreateTaskResponse{ID: id})
}

// post sends a step's CloudEvent to the sink, retrying with bounded backoff.
// A failure loses nothing: the task's anchor is on the cluster, and the
// sweep starts a task whose submission did not arrive (and cancels one
// labelled cancelled).
func (s *Server) post(ctx context.Context, typ, eventID, task string) {
	if s.Events == nil || s.Config.Sink == "" {
		return
	}
	ev := cloudevents.NewEvent()
	ev.SetID(eventID)
	ev.SetType(typ)
	ev.SetSource("tesk-knative/tes-api")
	ev.SetSubject(task)
	_ = ev.SetData(cloudevents.ApplicationJSON, map[string]string{"task": task, "namespace": s.Config.Namespace})
	ctx = cloudevents.ContextWithTarget(context.WithoutCancel(ctx), s.Config.Sink)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ctx = cloudevents.ContextWithRetriesExponentialBackoff(ctx, 100*time.Millisecond, 3)
	if res := s.Events.Send(ctx, ev); cloudevents.IsUndelivered(res) || !cloudevents.IsACK(res) {
		s.Log.Warnw("Event not delivered; the sweep takes the task up", "type", typ, "task", task, "error", res)
	}
}

// NewID draws a task id as the TESK API does: task- and 8 hex digits.
func NewID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "task-" + hex.EncodeToString(b[:])
}

var taskNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// anchor reads a task's anchor for the caller: 404 for an unknown one, 403
// for one the caller may not see.
func (s *Server) anchor(c echo.Context, id string) (*corev1.ConfigMap, error) {
	if !taskNameRE.MatchString(id) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no task %q", id))
	}
	var cm *corev1.ConfigMap
	err := retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() (err error) {
		cm, err = s.Client.CoreV1().ConfigMaps(s.Config.Namespace).Get(c.Request().Context(), id, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) || (err == nil && !taskmeta.IsAnchor(cm.ObjectMeta)) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no task %q", id))
	}
	if err != nil {
		return nil, err
	}
	if !callerOf(c).mayAccess(cm.ObjectMeta) {
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("task %q belongs to another user", id))
	}
	return cm, nil
}

func parseView(c echo.Context) (string, error) {
	v := c.QueryParam("view")
	switch v {
	case "":
		return tesv1.ViewMinimal, nil
	case tesv1.ViewMinimal, tesv1.ViewBasic, tesv1.ViewFull:
		return v, nil
	}
	return "", bad("view: %q is none of MINIMAL, BASIC, FULL", v)
}

func (s *Server) get(c echo.Context) error {
	view, err := parseView(c)
	if err != nil {
		return s.fail(c, err)
	}
	cm, err := s.anchor(c, c.Param("id"))
	if err != nil {
		return s.fail(c, err)
	}
	t, err := s.task(c.Request().Context(), cm, view)
	if err != nil {
		return s.fail(c, err)
	}
	return c.JSON(http.StatusOK, t)
}

// task reads a task's jobs and pods and returns it in a view.
func (s *Server) task(ctx context.Context, cm *corev1.ConfigMap, view string) (tesv1.Task, error) {
	sel := labels.Set{taskmeta.LabelTask: cm.Name}.String()
	jobs, pods, err := s.jobsAndPods(ctx, sel)
	if err != nil {
		return tesv1.Task{}, err
	}
	return s.build(ctx, cm, jobs, pods, view), nil
}

// jobsAndPods lists the jobs and pods of a label selector, both at once.
func (s *Server) jobsAndPods(ctx context.Context, selector string) ([]batchv1.Job, []corev1.Pod, error) {
	ns := s.Config.Namespace
	sel := metav1.ListOptions{LabelSelector: selector}
	var jobs *batchv1.JobList
	var pods *corev1.PodList
	var jerr, perr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		jerr = retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() (err error) {
			jobs, err = s.Client.BatchV1().Jobs(ns).List(ctx, sel)
			return err
		})
	}()
	go func() {
		defer wg.Done()
		perr = retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() (err error) {
			pods, err = s.Client.CoreV1().Pods(ns).List(ctx, sel)
			return err
		})
	}()
	wg.Wait()
	if err := errors.Join(jerr, perr); err != nil {
		return nil, nil, err
	}
	return jobs.Items, pods.Items, nil
}

// build derives a task in a view from its anchor, jobs and pods (those of
// other tasks are left out).
func (s *Server) build(ctx context.Context, cm *corev1.ConfigMap, jobs []batchv1.Job, pods []corev1.Pod, view string) tesv1.Task {
	id := cm.Name
	byPart := map[string]*batchv1.Job{}
	for i := range jobs {
		if t, part, ok := taskmeta.SplitJobName(jobs[i].Name); ok && t == id && jobs[i].Labels[taskmeta.LabelTask] == id {
			byPart[part] = &jobs[i]
		}
	}
	podList := []*corev1.Pod{}
	for i := range pods {
		if pods[i].Labels[taskmeta.LabelTask] == id {
			podList = append(podList, &pods[i])
		}
	}
	v := steps.BuildView(cm.ObjectMeta, byPart, podList, s.Config.Steps, s.now())
	out := tesv1.Task{ID: id, State: v.State}
	if view == tesv1.ViewMinimal {
		return out
	}
	stored, ok := StoredTask(cm)
	if !ok {
		stored = taskFromSpec(cm)
	}
	out.Name, out.Description = stored.Name, stored.Description
	out.Inputs, out.Outputs, out.Resources = stored.Inputs, stored.Outputs, stored.Resources
	out.Executors, out.Volumes, out.Tags = stored.Executors, stored.Volumes, stored.Tags
	out.CreationTime = v.CreationTime
	if view == tesv1.ViewBasic {
		out.Inputs = make([]tesv1.Input, len(stored.Inputs))
		for i, in := range stored.Inputs {
			in.Content = ""
			out.Inputs[i] = in
		}
		if len(out.Inputs) == 0 {
			out.Inputs = nil
		}
	}
	out.Logs = s.taskLogs(ctx, v, byPart, podList, view)
	return out
}

// taskLogs keeps of the view's log what the view shows: every executor's
// log, in the executors' order; FULL adds the ends of each executor's stdout
// and stderr (recorded on its job once it ended, read from its pod while it
// runs) and the system logs.
func (s *Server) taskLogs(ctx context.Context, v tesv1.Task, jobs map[string]*batchv1.Job, pods []*corev1.Pod, view string) []tesv1.TaskLog {
	parts := steps.ExecutorParts(jobs)
	logs := v.Logs
	for i := range logs {
		for k := range logs[i].Logs {
			el := &logs[i].Logs[k]
			if view != tesv1.ViewFull {
				el.Stdout, el.Stderr = "", ""
				continue
			}
			if k >= len(parts) {
				continue
			}
			if _, recorded := steps.RecordedLog(jobs[parts[k]]); !recorded {
				el.Stdout, el.Stderr = s.liveLog(ctx, jobs[parts[k]].Name, pods)
			}
		}
		if view != tesv1.ViewFull {
			logs[i].SystemLogs = nil
		}
	}
	return logs
}

// liveLog is the end of the streams of a job's last pod; "" if it cannot be
// read.
func (s *Server) liveLog(ctx context.Context, job string, pods []*corev1.Pod) (stdout, stderr string) {
	last := steps.LastPod(pods, job)
	if last == nil || len(last.Spec.Containers) == 0 {
		return "", ""
	}
	stdout, stderr, _, err := steps.ExecutorLog(ctx, s.Client, s.Config.Namespace, last.Name, last.Spec.Containers[0].Name, s.Config.LogTailBytes)
	if err != nil {
		s.Log.Debugw("Executor log not readable", "pod", last.Name, "error", err)
	}
	return stdout, stderr
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// pageToken is the position after the last task of a page: tasks are listed
// newest first, by creation time and then name, so a token stays valid
// whatever is created or deleted meanwhile.
type pageToken struct {
	Created int64  `json:"c"`
	Name    string `json:"n"`
}

func (p pageToken) String() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parsePageToken(s string) (*pageToken, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var p pageToken
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.Name == "" {
		return nil, bad("page_token: %q is not a token this service gave", s)
	}
	return &p, nil
}

// ListQuery is a list request.
type ListQuery struct {
	NamePrefix string
	State      string
	Tags       map[string]string
	PageSize   int
	Token      *pageToken
	View       string
}

// ParseListQuery reads the list's parameters.
func ParseListQuery(q url.Values) (ListQuery, error) {
	lq := ListQuery{NamePrefix: q.Get("name_prefix"), State: q.Get("state"), PageSize: DefaultPageSize}
	if lq.State != "" && !contains(tesv1.States, lq.State) {
		return lq, bad("state: %q is not a TES state", lq.State)
	}
	if ps := q.Get("page_size"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			return lq, bad("page_size: %q is not a positive integer", ps)
		}
		lq.PageSize = min(n, MaxPageSize)
	}
	var err error
	if lq.Token, err = parsePageToken(q.Get("page_token")); err != nil {
		return lq, err
	}
	keys, values := q["tag_key"], q["tag_value"]
	if len(values) > len(keys) {
		return lq, bad("tag_value: %d values for %d tag_key", len(values), len(keys))
	}
	if len(keys) > 0 {
		lq.Tags = map[string]string{}
		for i, k := range keys {
			v := ""
			if i < len(values) {
				v = values[i]
			}
			lq.Tags[k] = v
		}
	}
	switch v := q.Get("view"); v {
	case "":
		lq.View = tesv1.ViewMinimal
	case tesv1.ViewMinimal, tesv1.ViewBasic, tesv1.ViewFull:
		lq.View = v
	default:
		return lq, bad("view: %q is none of MINIMAL, BASIC, FULL", v)
	}
	return lq, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MatchTags is the specification's tag filter: every key of the filter must
// be a tag of the task, with the same value unless the filter's is empty.
func MatchTags(filter, tags map[string]string) bool {
	for k, v := range filter {
		tv, ok := tags[k]
		if !ok || (v != "" && tv != v) {
			return false
		}
	}
	return true
}

// Page selects a page of anchors: those the query's filters keep, newest
// first, after its token. It returns the page and whether more follow. A
// final state filters on the anchor's record; a state a task passes through
// is left to the caller, who derives it from the jobs and pods.
func Page(anchors []metav1.ObjectMeta, q ListQuery) ([]metav1.ObjectMeta, bool) {
	var kept []metav1.ObjectMeta
	for _, m := range anchors {
		if !taskmeta.IsAnchor(m) {
			continue
		}
		if q.NamePrefix != "" && !strings.HasPrefix(m.Annotations[taskmeta.AnnotationTaskName], q.NamePrefix) {
			continue
		}
		if q.State != "" && !slices.Contains(passingStates, q.State) && m.Annotations[taskmeta.AnnotationState] != q.State {
			continue
		}
		if len(q.Tags) > 0 && !MatchTags(q.Tags, Tags(m)) {
			continue
		}
		kept = append(kept, m)
	}
	sort.Slice(kept, func(i, k int) bool { return newer(kept[i], kept[k]) })
	start := 0
	if q.Token != nil {
		start = sort.Search(len(kept), func(i int) bool {
			m := kept[i]
			c := m.CreationTimestamp.Unix()
			return c < q.Token.Created || (c == q.Token.Created && m.Name < q.Token.Name)
		})
	}
	kept = kept[start:]
	if len(kept) > q.PageSize {
		return kept[:q.PageSize], true
	}
	return kept, false
}

func newer(a, b metav1.ObjectMeta) bool {
	ca, cb := a.CreationTimestamp.Unix(), b.CreationTimestamp.Unix()
	if ca != cb {
		return ca > cb
	}
	return a.Name > b.Name
}

// listChunk is how many anchors one LIST call returns.
const listChunk = 1000

func (s *Server) list(c echo.Context) error {
	q, err := ParseListQuery(c.QueryParams())
	if err != nil {
		return s.fail(c, err)
	}
	ctx := c.Request().Context()
	caller := callerOf(c)
	sel := taskmeta.LabelTask
	if !caller.All {
		sel += "," + taskmeta.LabelCreator + "=" + caller.Label
	}
	var anchors []metav1.ObjectMeta
	opts := metav1.ListOptions{LabelSelector: sel, Limit: listChunk}
	for {
		var l *metav1.PartialObjectMetadataList
		err := retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() (err error) {
			l, err = s.Metadata.Resource(configMapsResource).Namespace(s.Config.Namespace).List(ctx, opts)
			return err
		})
		if err != nil {
			return s.fail(c, err)
		}
		for i := range l.Items {
			if caller.mayAccess(l.Items[i].ObjectMeta) {
				anchors = append(anchors, l.Items[i].ObjectMeta)
			}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	var page []metav1.ObjectMeta
	var more bool
	var resp tesv1.ListTasksResponse
	if slices.Contains(passingStates, q.State) {
		page, more, resp.Tasks, err = s.pageInState(ctx, anchors, q)
		if err != nil {
			return s.fail(c, err)
		}
	} else {
		page, more = Page(anchors, q)
		resp.Tasks = make([]tesv1.Task, len(page))
		if err := s.views(ctx, page, q.View, resp.Tasks); err != nil {
			return s.fail(c, err)
		}
	}
	if more {
		last := page[len(page)-1]
		resp.NextPageToken = pageToken{Created: last.CreationTimestamp.Unix(), Name: last.Name}.String()
	}
	return c.JSON(http.StatusOK, resp)
}

// passingStates are the states a task of this service passes through
// (never UNKNOWN, PAUSED or PREEMPTED).
var passingStates = []string{tesv1.StateQueued, tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling}

// pageInState is a page of the tasks in q.State, a state a task passes
// through: the anchor's metadata may lag a running task's state by a step,
// so the tasks that have not ended (and that the other filters keep) have
// their state derived as GET derives it, from their jobs and pods, a chunk
// at a time, newest first, until the page is full. A task ended is known
// from its anchor alone, so the final states are filtered as before.
func (s *Server) pageInState(ctx context.Context, anchors []metav1.ObjectMeta, q ListQuery) ([]metav1.ObjectMeta, bool, []tesv1.Task, error) {
	all := q
	all.State, all.PageSize = "", len(anchors)+1
	candidates, _ := Page(anchors, all)
	var live []metav1.ObjectMeta
	for _, m := range candidates {
		if m.Annotations[taskmeta.AnnotationState] == "" {
			live = append(live, m)
		}
	}
	var page []metav1.ObjectMeta
	var tasks []tesv1.Task
	for from := 0; from < len(live); from += viewChunk {
		chunk := live[from:min(from+viewChunk, len(live))]
		states := make([]tesv1.Task, len(chunk))
		if err := s.views(ctx, chunk, tesv1.ViewMinimal, states); err != nil {
			return nil, false, nil, err
		}
		for i, t := range states {
			if t.State != q.State {
				continue
			}
			if len(page) == q.PageSize {
				return page, true, tasks, s.fill(ctx, page, q.View, tasks)
			}
			page, tasks = append(page, chunk[i]), append(tasks, t)
		}
	}
	return page, false, tasks, s.fill(ctx, page, q.View, tasks)
}

// fill reads a page's tasks in a view richer than MINIMAL.
func (s *Server) fill(ctx context.Context, page []metav1.ObjectMeta, view string, tasks []tesv1.Task) error {
	if view == tesv1.ViewMinimal {
		return nil
	}
	return s.views(ctx, page, view, tasks)
}

// viewChunk is how many tasks of a page one set of LIST calls reads.
const viewChunk = 256

// views reads the page's tasks in a view, their states derived as GET
// derives them: for each chunk of the page, two LIST calls (their jobs,
// their pods, selected by the task label's values), whatever the namespace
// holds besides, and for BASIC and FULL a third (the anchors, for the
// submitted task). A task deleted meanwhile keeps its place with the state
// its metadata gives.
func (s *Server) views(ctx context.Context, page []metav1.ObjectMeta, view string, out []tesv1.Task) error {
	for from := 0; from < len(page); from += viewChunk {
		chunk := page[from:min(from+viewChunk, len(page))]
		names := make([]string, len(chunk))
		for i, m := range chunk {
			names[i] = m.Name
		}
		req, err := labels.NewRequirement(taskmeta.LabelTask, selection.In, names)
		if err != nil {
			return err
		}
		sel := labels.NewSelector().Add(*req).String()
		cms := &corev1.ConfigMapList{}
		var cerr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			if view == tesv1.ViewMinimal {
				// The metadata listed holds all that MINIMAL shows.
				for _, m := range chunk {
					cms.Items = append(cms.Items, corev1.ConfigMap{ObjectMeta: m})
				}
				return
			}
			cerr = retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() (err error) {
				cms, err = s.Client.CoreV1().ConfigMaps(s.Config.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
				return err
			})
		}()
		jobs, pods, err := s.jobsAndPods(ctx, sel)
		<-done
		if err = errors.Join(err, cerr); err != nil {
			return err
		}
		byName := map[string]*corev1.ConfigMap{}
		for i := range cms.Items {
			if taskmeta.IsAnchor(cms.Items[i].ObjectMeta) {
				byName[cms.Items[i].Name] = &cms.Items[i]
			}
		}
		jobsOf := map[string][]batchv1.Job{}
		for _, j := range jobs {
			jobsOf[j.Labels[taskmeta.LabelTask]] = append(jobsOf[j.Labels[taskmeta.LabelTask]], j)
		}
		podsOf := map[string][]corev1.Pod{}
		for _, p := range pods {
			podsOf[p.Labels[taskmeta.LabelTask]] = append(podsOf[p.Labels[taskmeta.LabelTask]], p)
		}
		// FULL reads each executor's log: a few tasks at a time.
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, m := range chunk {
			cm, ok := byName[m.Name]
			if !ok {
				out[from+i] = s.build(ctx, &corev1.ConfigMap{ObjectMeta: m}, nil, nil, tesv1.ViewMinimal)
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				out[from+i] = s.build(ctx, cm, jobsOf[m.Name], podsOf[m.Name], view)
			}()
		}
		wg.Wait()
	}
	return nil
}

func (s *Server) cancel(c echo.Context) error {
	ref, err := url.PathUnescape(c.Param("ref"))
	if err != nil {
		ref = c.Param("ref")
	}
	id, ok := strings.CutSuffix(ref, ":cancel")
	if !ok {
		return c.JSON(http.StatusNotFound, ErrorBody{Error: "no such endpoint: POST " + c.Request().URL.Path})
	}
	cm, err := s.anchor(c, id)
	if err != nil {
		return s.fail(c, err)
	}
	if state := cm.Annotations[taskmeta.AnnotationState]; state != "" {
		// Ended: nothing to cancel, nothing changes.
		return c.JSON(http.StatusOK, struct{}{})
	}
	ctx := c.Request().Context()
	if cm.Labels[taskmeta.LabelStatus] != taskmeta.StatusCancelled {
		err := retry.OnError(steps.DefaultBackoff, steps.IsTransient, func() error {
			_, err := s.Client.CoreV1().ConfigMaps(s.Config.Namespace).Patch(ctx, id, types.MergePatchType, taskmeta.CancelPatch(), metav1.PatchOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return c.JSON(http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no task %q", id)})
		}
		if err != nil {
			return s.fail(c, err)
		}
		s.Log.Infow("Task cancelled", "task", id, "by", callerOf(c).Subject)
	}
	s.post(ctx, "task.cancelled", "cancel-"+id, id)
	return c.JSON(http.StatusOK, struct{}{})
}

// fail answers an error: 400 for a request that can never succeed, the
// status of an HTTP error, 429 or 503 for what may pass later, 500 else.
func (s *Server) fail(c echo.Context, err error) error {
	var he *echo.HTTPError
	code := http.StatusInternalServerError
	msg := err.Error()
	switch {
	case invalid.Is(err):
		code = http.StatusBadRequest
	case errors.As(err, &he):
		code, msg = he.Code, fmt.Sprint(he.Message)
	case apierrors.IsTooManyRequests(err):
		code = http.StatusTooManyRequests
	case steps.IsTransient(err), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	if code >= 500 {
		s.Log.Errorw("Request failed", "path", c.Request().URL.Path, "error", err, "status", code)
	}
	return c.JSON(code, ErrorBody{Error: msg})
}
