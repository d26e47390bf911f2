package tes

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
)

// crossOrigin refuses the state-changing requests (POST) a browser sends
// from a page of another origin, as the browser's Sec-Fetch-Site or Origin
// header says; requests without them (every client that is not a browser)
// pass.
var crossOrigin = http.NewCrossOriginProtection()

// refuseCrossSite answers 403 to a create or a cancel a browser sends from
// another site, unless it carries a bearer token. A browser attaches Basic
// credentials it has cached (and, without access control, none are needed)
// to any request a page makes, so a page elsewhere could otherwise create
// or cancel tasks as the user who visits it; a bearer token it never
// attaches by itself.
func (s *Server) refuseCrossSite(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			if err := crossOrigin.Check(r); err != nil {
				return httperr.Write(c, http.StatusForbidden, errors.New("a request from a page of another site is refused: "+err.Error()))
			}
		}
		return next(c)
	}
}

// checkJSON refuses (415) a body that does not say it is JSON, as no HTML
// form can send one without the browser asking the server first.
func checkJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType, "a task is sent as JSON: Content-Type: application/json (got "+quoteOrNone(ct)+")")
	}
	return nil
}

// quoteOrNone quotes a header's value, or says it is missing.
func quoteOrNone(v string) string {
	if v == "" {
		return "none"
	}
	return `"` + v + `"`
}
