package tes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// checkFileURLs refuses file:// inputs and outputs when the service offers
// no file storage: without a transfer volume the filer could never reach
// them.
func (s *Server) checkFileURLs(t *tesv1.Task) error {
	for _, st := range s.storage() {
		if strings.HasPrefix(strings.ToLower(st), "file:") {
			return nil
		}
	}
	return refuseFileURLs(t, fmt.Sprintf("this service has no transfer volume for files (service-info storage: %s)", strings.Join(s.storage(), ", ")))
}

// refuseFileURLs refuses a task with a file:// input or output, saying why.
func refuseFileURLs(t *tesv1.Task, why string) error {
	for i, in := range t.Inputs {
		if isFileURL(in.URL) {
			return bad("inputs[%d].url: %q is a file URL, and %s", i, taskspec.Redact(in.URL), why)
		}
	}
	for i, out := range t.Outputs {
		if isFileURL(out.URL) {
			return bad("outputs[%d].url: %q is a file URL, and %s", i, taskspec.Redact(out.URL), why)
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
	if d := callerOf(c).Denied; d != "" {
		return httperr.Write(c, http.StatusForbidden, errors.New(d))
	}
	if err := checkJSON(c.Request()); err != nil {
		return s.fail(c, err)
	}
	if limited, err := s.limitCreate(c, callerOf(c).Subject); limited {
		return err
	}
	caller := callerOf(c)
	t, ignored, err := s.readTask(c, caller)
	if err != nil {
		return s.fail(c, err)
	}
	// done ends the create's place among its user's unfinished tasks
	// (admitCreate): with the name written, or none if nothing was.
	id, done, err := s.writeAnchor(c, t, ignored, caller)
	if err != nil {
		defer done("")
		return s.fail(c, err)
	}
	defer done(id)
	ctx := c.Request().Context()
	s.Telemetry.TaskCreated(ctx)
	s.Log.With(telemetry.LogFields(ctx)...).Infow("Task created", "task", id, "name", t.Name, "creator", caller.Subject)
	s.post(ctx, "submit-"+id, events.NewTaskSubmitted(id, s.Config.Namespace))
	return c.JSON(http.StatusOK, tesv1.CreateTaskResponse{ID: id})
}

// readTask reads the request's task and checks it: valid, within the
// service's limits and the caller's share, with file URLs and an address
// for its state changes the service takes, within the ResourceQuotas of the
// tasks' namespace, and its backend parameters,
// those it ignores returned (and logged).
func (s *Server) readTask(c echo.Context, caller Caller) (*tesv1.Task, []string, error) {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxRequestBytes+1))
	if err != nil {
		return nil, nil, invalid.Errorf("reading the body: %v", err)
	}
	t, err := DecodeTask(body)
	if err == nil {
		err = Validate(t)
	}
	if err == nil {
		err = s.Config.Limits.Check(t)
	}
	if err == nil {
		err = s.checkShare(t, caller)
	}
	if err == nil {
		err = s.checkFileURLs(t)
	}
	if err == nil {
		err = s.checkNotifyURL(t)
	}
	if err == nil {
		err = s.checkResourceQuota(c.Request().Context(), t)
	}
	if err != nil {
		return nil, nil, err
	}
	ignored, err := CheckBackendParameters(t, s.Config.Steps.BackendParameters)
	if err != nil {
		return nil, nil, err
	}
	if len(ignored) > 0 {
		s.Log.Warnw("Unsupported backend parameters left out", "keys", ignored)
	}
	if s.Config.Steps.UserSecretPrefix != "" && caller.Subject != "" {
		// The transfer volume is one for all users: with credentials per
		// user, a task of one could read another's files through it.
		if err := refuseFileURLs(t, "this service keeps credentials per user (FILER_USER_SECRET_PREFIX), and its transfer volume is shared by all users"); err != nil {
			return nil, nil, err
		}
	}
	return t, ignored, nil
}

// writeAnchor writes the task's anchor under a new id, drawn again when one
// is taken, once admitted among the caller's unfinished tasks. done, never
// nil, ends its place there (admitCreate) with the id written, or "".
func (s *Server) writeAnchor(c echo.Context, t *tesv1.Task, ignored []string, caller Caller) (id string, done func(created string), err error) {
	opts := s.Config.Convert
	opts.User = caller.Label
	if opts.DiskGB == 0 {
		opts.DiskGB = s.Config.Steps.DefaultDiskGB
	}
	done = func(string) {}
	for attempt := 0; ; attempt++ {
		id = taskmeta.NewID(s.now())
		cm, size, err := s.newAnchor(t, id, opts, ignored, caller)
		if err != nil {
			return "", done, err
		}
		if attempt == 0 {
			// The user's bounds, counted with the creates this process
			// is writing; its place is held until the write ends.
			admitted, err := s.admitCreate(c, caller.Label, id, size)
			if err != nil {
				return "", done, err
			}
			done = admitted
		}
		err = s.store().CreateAnchor(c.Request().Context(), cm)
		if apierrors.IsAlreadyExists(err) && attempt < maxCreateAttempts {
			continue
		}
		if err != nil {
			return "", done, err
		}
		return id, done, nil
	}
}

// newAnchor is the task's anchor under the id, noting the backend
// parameters ignored, and the bytes the task will keep in etcd, which the
// user's bound of bytes counts: its anchor, its Jobs, Pods, PVC and Events.
func (s *Server) newAnchor(t *tesv1.Task, id string, opts ConvertOptions, ignored []string, caller Caller) (*corev1.ConfigMap, int64, error) {
	spec, raw, err := convert(t, id, opts)
	if err != nil {
		return nil, 0, err
	}
	cm, err := BuildAnchor(s.Config.Namespace, id, t, raw, caller)
	if err != nil {
		return nil, 0, err
	}
	noteIgnored(cm, ignored)
	size := recordFootprint(cm, spec, taskmeta.Anchor{Name: id, Namespace: s.Config.Namespace, Creator: caller.Subject}, s.Config.Steps)
	return cm, size, nil
}

// sinkToken is the OIDC token to send with an event (events.SinkToken);
// "" when there is none.
func (s *Server) sinkToken() string {
	token, err := events.SinkToken(s.Config.SinkTokenFile)
	if err != nil {
		s.Log.Warnw("The sink's token cannot be read; the event goes without it", "file", s.Config.SinkTokenFile, "error", err)
	}
	return token
}

// post sends a step's CloudEvent (from package events) to the sink with the
// id eventID, retrying with bounded backoff. A failure loses nothing: the
// task's anchor is on the cluster, and the sweep starts a task whose
// submission did not arrive (and cancels one labelled cancelled).
func (s *Server) post(ctx context.Context, eventID string, ev cloudevents.Event) {
	if s.Events == nil || s.Config.Sink == "" {
		return
	}
	ev.SetID(eventID)
	ev.SetSource(events.SourceTESAPI)
	ctx = cloudevents.ContextWithTarget(context.WithoutCancel(ctx), s.Config.Sink)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ctx = cloudevents.ContextWithRetriesExponentialBackoff(ctx, 100*time.Millisecond, 3)
	if token := s.sinkToken(); token != "" {
		ctx = cehttp.WithCustomHeader(ctx, http.Header{"Authorization": {"Bearer " + token}})
	}
	if res := s.Events.Send(ctx, ev); cloudevents.IsUndelivered(res) || !cloudevents.IsACK(res) {
		s.Log.Warnw("Event not delivered; the sweep takes the task up", "type", ev.Type(), "task", ev.Subject(), "error", res)
	}
}

// checkNotifyURL refuses a task whose tag taskmeta.TagNotifyURL names an
// address the operator does not allow (steps.NotifyURLAllowed).
func (s *Server) checkNotifyURL(t *tesv1.Task) error {
	addr, ok := t.Tags[taskmeta.TagNotifyURL]
	if !ok {
		return nil
	}
	if err := steps.NotifyURLAllowed(addr, s.Config.Steps.NotifyURLPrefixes); err != nil {
		return bad("tags.%s: %v", taskmeta.TagNotifyURL, err)
	}
	return nil
}
