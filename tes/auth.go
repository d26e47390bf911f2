package tes

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Caller is who makes a request.
type Caller struct {
	// Subject is the token's subject ("" without access control).
	Subject string
	// Label is its label-safe form (creator-user-id).
	Label string
	// All: the caller sees every task (an administrator, or no access
	// control).
	All bool
	// Denied, when set, says why the caller may not create tasks (an
	// authenticated caller outside the allowed groups and users); it may
	// still see and cancel the tasks it created.
	Denied string
}

// Authenticator finds the caller of a request. An error that is an
// *echo.HTTPError carries its status (401, 403); others are 401.
type Authenticator interface {
	Authenticate(r *http.Request) (Caller, error)
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
					return httperr.Write(c, he.Code, he)
				}
				challenges := []string{BearerChallenge}
				if ch, ok := s.Auth.(Challenger); ok {
					challenges = ch.Challenges()
				}
				for _, v := range challenges {
					c.Response().Header().Add("WWW-Authenticate", v)
				}
				return httperr.Write(c, http.StatusUnauthorized, err)
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
