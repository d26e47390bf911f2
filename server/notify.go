package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/labstack/echo/v4"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
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
// tesk-state-notify brings (those with events.ExtensionNotifyURL), posted
// as it came, in binary mode and without that extension, to the address
// it names, if the operator allows it. 200 once the address took it (any
// 2xx; empty to a Knative dispatcher, as for a step: it takes no other
// reply than a CloudEvent); 502 when it did not answer so, which the Trigger retries and then
// dead-letters; 400 for an event that cannot be posted (not a state
// change, an address not allowed); an event without an address is
// answered 200 and nothing is posted.
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
	addr, _ := types.ToString(ev.Extensions()[events.ExtensionNotifyURL])
	if addr == "" {
		return s.ok(c, map[string]string{"result": "no address to post to"})
	}
	if err := steps.NotifyURLAllowed(addr, s.notifier.prefixes); err != nil {
		s.Log.Warnw("State change not posted", "task", ev.Subject(), "url", addr, "error", err)
		return httperr.Write(c, http.StatusBadRequest, err)
	}
	out := ev.Clone()
	out.SetExtension(events.ExtensionNotifyURL, nil)
	ctx, cancel := context.WithTimeout(req.Context(), NotifyTimeout)
	defer cancel()
	if res := s.notifier.client.Send(cloudevents.ContextWithTarget(ctx, addr), out); !cloudevents.IsACK(res) {
		err := fmt.Errorf("posting %s to %s: %w", ev.ID(), addr, res)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("posting %s to %s: no answer within %s", ev.ID(), addr, NotifyTimeout)
		}
		s.Log.Warnw("State change not taken by the task's address; the Trigger retries", "task", ev.Subject(), "url", addr, "error", err)
		return httperr.Write(c, http.StatusBadGateway, err)
	}
	s.Log.Debugw("State change posted", "task", ev.Subject(), "url", addr, "state", ev.ID())
	return s.ok(c, map[string]string{"result": "posted"})
}
