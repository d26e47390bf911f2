package tes

import (
	"fmt"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

var taskNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// anchor reads a task's anchor for the caller: 404 for an unknown one, 403
// for one the caller may not see, 501 for one of a record format this
// version cannot read (taskmeta.CheckFormat).
func (s *Server) anchor(c echo.Context, id string) (*corev1.ConfigMap, error) {
	if !taskNameRE.MatchString(id) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no task %q", id))
	}
	cm, err := s.store().Anchor(c.Request().Context(), id)
	if apierrors.IsNotFound(err) || (err == nil && !taskmeta.IsAnchor(cm.ObjectMeta)) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no task %q", id))
	}
	if err != nil {
		return nil, err
	}
	if !callerOf(c).mayAccess(cm.ObjectMeta) {
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("task %q belongs to another user", id))
	}
	if err := taskmeta.CheckFormat(cm.ObjectMeta); err != nil {
		return nil, echo.NewHTTPError(http.StatusNotImplemented, err.Error())
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
