package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
)

func TestStatusAndMessage(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		name string
		err  error
		code int
		msg  string
	}{
		{"invalid", invalid.Errorf("state: %q is not a TES state", "X"), 400, `state: "X" is not a TES state`},
		{"invalid wrapping an HTTP error", invalid.Wrap(echo.NewHTTPError(404, "gone")), 400, "code=404, message=gone"},
		{"HTTP error", echo.NewHTTPError(http.StatusForbidden, "task belongs to another user"), 403, "task belongs to another user"},
		{"wrapped HTTP error", fmt.Errorf("reading: %w", echo.NewHTTPError(404, "no task")), 404, "no task"},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), 429, "slow down"},
		{"API server unavailable", apierrors.NewServiceUnavailable("shutting down"), 503, "shutting down"},
		{"deadline", fmt.Errorf("listing: %w", context.DeadlineExceeded), 503, "listing: context deadline exceeded"},
		{"forbidden by RBAC", apierrors.NewForbidden(gr, "x", errors.New("no")), 500, `configmaps "x" is forbidden: no`},
		{"not an answer of the API server", errors.New("dial tcp: connection refused"), 503, "dial tcp: connection refused"},
	}
	for _, c := range cases {
		if got := Status(c.err); got != c.code {
			t.Errorf("%s: Status = %d, want %d", c.name, got, c.code)
		}
		if got := Message(c.err); got != c.msg {
			t.Errorf("%s: Message = %q, want %q", c.name, got, c.msg)
		}
	}
}

func TestHandlerAnswersUnroutedErrors(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = Handler
	e.GET("/x", func(echo.Context) error { return nil })
	for _, c := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{http.MethodGet, "/nowhere", 404, "Not Found"},
		{http.MethodPost, "/x", 405, "Method Not Allowed"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		var b Body
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("%s %s: body %q: %v", c.method, c.path, rec.Body, err)
		}
		if rec.Code != c.code || b.Error != c.msg {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, rec.Code, b.Error, c.code, c.msg)
		}
	}
}
