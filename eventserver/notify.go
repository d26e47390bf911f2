package eventserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// NotifyTimeout bounds one post of a state change to a task's address; the
// Trigger that brought it retries what fails.
const NotifyTimeout = 10 * time.Second

// maxNotifyBytes bounds the event /notify reads (a state change is well
// under a kilobyte; its reason at most a few).
const maxNotifyBytes = 1 << 20

// notifier posts state change events to the addresses tasks name.
type notifier struct {
	prefixes []string
	client   cloudevents.Client
}

// newNotifier posts within NotifyTimeout and follows no redirect: the
// address the operator allowed is the only one posted to.
func newNotifier(prefixes []string) (*notifier, error) {
	hc := http.Client{
		Timeout:       NotifyTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c, err := cloudevents.NewClientHTTP(cehttp.WithClient(hc))
	if err != nil {
		return nil, err
	}
	return &notifier{prefixes: prefixes, client: c}, nil
}

// notify is POST /notify: a state change event the Trigger
// tesk-state-notify brings (those marked with events.ExtensionNotify),
// posted as it came, in binary mode and without that mark, to the address
// the task's anchor names (its tag taskmeta.TagNotifyURL), if the operator
// allows it. The event only says which task it is of (its data's id and
// namespace): an address it carries is never posted to, so that one who
// forges an event can have it posted nowhere but where the task's creator
// asked. 200 once the address took it (any 2xx; empty to a Knative
// dispatcher, as for a step: it takes no other reply than a CloudEvent);
// 502 when it did not answer so, which the Trigger retries and then
// dead-letters; 400 for an event that cannot be posted (not a state
// change, a task of another namespace, an address not allowed); an event
// of a task that has no address, or that is gone, is answered 200 and
// nothing is posted. The address is named, in logs and answers, by
// steps.RedactNotifyURL only: the Trigger's dead letter sink logs the
// answer with the event.
func (s *Server) notify(c echo.Context) error {
	req := c.Request()
	req.Body = http.MaxBytesReader(c.Response(), req.Body, maxNotifyBytes)
	ev, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		return httperr.Write(c, http.StatusBadRequest, fmt.Errorf("not a CloudEvent: %w", err))
	}
	if ev.Type() != events.TypeTaskStateChanged {
		return httperr.Write(c, http.StatusBadRequest, fmt.Errorf("only %s events are posted to tasks' addresses, not %q", events.TypeTaskStateChanged, ev.Type()))
	}
	var d events.StateChangedData
	if err := ev.DataAs(&d); err != nil {
		return httperr.Write(c, http.StatusBadRequest, fmt.Errorf("the state change's data does not decode: %w", err))
	}
	if d.Namespace != s.Namespace {
		return httperr.Write(c, http.StatusBadRequest, fmt.Errorf("a state change of a task of namespace %q: this handler's tasks are in %q", d.Namespace, s.Namespace))
	}
	if problems := validation.IsDNS1123Subdomain(d.ID); len(problems) > 0 {
		return httperr.Write(c, http.StatusBadRequest, fmt.Errorf("a state change of task %q, which is not a task's name: %s", d.ID, strings.Join(problems, "; ")))
	}
	log := s.Log.With("task", d.ID, "state", ev.ID())
	anchor, err := s.Runner.Client.CoreV1().ConfigMaps(s.Namespace).Get(req.Context(), d.ID, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && !taskmeta.IsAnchor(anchor.ObjectMeta):
		log.Infow("State change not posted: the task is gone")
		return s.ok(c, map[string]string{"result": "no such task: no address to post to"})
	case err != nil:
		err = fmt.Errorf("reading task %s's address: %w", d.ID, err)
		log.Warnw("State change not posted; the Trigger retries", "error", err)
		return httperr.Write(c, httperr.Status(err), err)
	}
	addr := taskmeta.NotifyURLOf(anchor.ObjectMeta)
	if addr == "" {
		return s.ok(c, map[string]string{"result": "no address to post to"})
	}
	shown := steps.RedactNotifyURL(addr)
	log = log.With("url", shown)
	if err := steps.NotifyURLAllowedRedacted(addr, s.notifier.prefixes); err != nil {
		log.Warnw("State change not posted", "error", err)
		return httperr.Write(c, http.StatusBadRequest, err)
	}
	out := ev.Clone()
	out.SetExtension(events.ExtensionNotify, nil)
	ctx, cancel := context.WithTimeout(req.Context(), NotifyTimeout)
	defer cancel()
	if res := s.notifier.client.Send(cloudevents.ContextWithTarget(ctx, addr), out); !cloudevents.IsACK(res) {
		err := fmt.Errorf("posting %s to %s: %s", ev.ID(), shown, notifyFailure(res, addr))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("posting %s to %s: no answer within %s", ev.ID(), shown, NotifyTimeout)
		}
		log.Warnw("State change not taken by the task's address; the Trigger retries", "error", err)
		return httperr.Write(c, http.StatusBadGateway, err)
	}
	log.Debugw("State change posted")
	return s.ok(c, map[string]string{"result": "posted"})
}

// notifyFailure says why the address addr did not take an event without
// naming more of it than steps.RedactNotifyURL: the status it answered, or
// why no answer came (the HTTP client's error names the URL in full, and is
// left out).
func notifyFailure(res error, addr string) string {
	var hr *cehttp.Result
	if errors.As(res, &hr) {
		return fmt.Sprintf("it answered %d %s", hr.StatusCode, http.StatusText(hr.StatusCode))
	}
	why := res.Error()
	var ue *url.Error
	if errors.As(res, &ue) {
		why = ue.Err.Error()
	}
	return strings.ReplaceAll(why, addr, steps.RedactNotifyURL(addr))
}
