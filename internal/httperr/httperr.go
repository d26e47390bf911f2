// Package httperr is how the handler and the TES API answer an error: one
// status for each kind of error and one JSON body.
package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
)

// Body is the JSON of every error answer.
type Body struct {
	Error string `json:"error"`
}

// Status is the answer to an error: 400 for what can never succeed
// (invalid), the status of an *echo.HTTPError (401, 403, 404...), 429 when
// the API server throttles, 503 for what may pass later (a transient API
// error, or a request whose answer never came, kubeapi.Classify; a
// deadline), 500 for the rest (the API server refused: a Role that lacks a
// permission, an admission policy).
func Status(err error) int {
	var he *echo.HTTPError
	switch {
	case invalid.Is(err):
		return http.StatusBadRequest
	case errors.As(err, &he):
		return he.Code
	case apierrors.IsTooManyRequests(err):
		return http.StatusTooManyRequests
	case kubeapi.IsTransient(err), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Message is what an answer says of an error: an *echo.HTTPError's own
// message, else the error's text.
func Message(err error) string {
	var he *echo.HTTPError
	if !invalid.Is(err) && errors.As(err, &he) {
		return fmt.Sprint(he.Message)
	}
	return err.Error()
}

// Write answers an error with a status and its Body.
func Write(c echo.Context, code int, err error) error {
	return c.JSON(code, Body{Error: Message(err)})
}

// Handler is Echo's HTTPErrorHandler for the errors no route answered (an
// unknown path, a method not allowed, a panic recovered): its Status and
// Body, unless an answer has begun.
func Handler(err error, c echo.Context) {
	if !c.Response().Committed {
		_ = Write(c, Status(err), err)
	}
}
