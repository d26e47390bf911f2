package tes

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

func (s *Server) cancel(c echo.Context) error {
	ref, err := url.PathUnescape(c.Param("ref"))
	if err != nil {
		ref = c.Param("ref")
	}
	id, ok := strings.CutSuffix(ref, ":cancel")
	if !ok {
		return s.fail(c, echo.NewHTTPError(http.StatusNotFound, "no such endpoint: POST "+c.Request().URL.Path))
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
		err := s.store().Cancel(ctx, id)
		if apierrors.IsNotFound(err) {
			return s.fail(c, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no task %q", id)))
		}
		if err != nil {
			return s.fail(c, err)
		}
		s.Log.Infow("Task cancelled", "task", id, "by", callerOf(c).Subject)
	}
	s.post(ctx, "cancel-"+id, events.NewTaskCancelled(id, s.Config.Namespace))
	return c.JSON(http.StatusOK, struct{}{})
}
