package tes

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

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
// *echo.HTTPError carries its status (401, 403), a *SignInsThrottled is a
// 429 with Retry-After; others are 401.
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
				var th *SignInsThrottled
				if errors.As(err, &th) {
					c.Response().Header().Set("Retry-After", strconv.Itoa(th.RetryAfter()))
					return httperr.Write(c, http.StatusTooManyRequests, err)
				}
				var he *echo.HTTPError
				if errors.As(err, &he) {
					return httperr.Write(c, he.Code, he)
				}
				challenges := []string{BearerChallenge}
				if ch, ok := s.Auth.(Challenger); ok {
					challenges = ch.Challenges()
				}
				for _, v := range challengesFor(c.Request(), challenges) {
					c.Response().Header().Add("WWW-Authenticate", v)
				}
				return httperr.Write(c, http.StatusUnauthorized, err)
			}
		}
		c.Set("caller", caller)
		return next(c)
	}
}

// RequestedWith is the header that marks a request a page's script makes
// (X-Requested-With: XMLHttpRequest), as the dashboard's are marked.
const RequestedWith = "X-Requested-With"

// fromScript reports whether a page's script made the request, as its
// X-Requested-With header says.
func fromScript(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get(RequestedWith)), "XMLHttpRequest")
}

// challengesFor is the challenges of a 401 to a request: without the Basic
// challenge when a page's script made it. A browser answers the Basic
// challenge with a prompt of its own, keeps what the user types for the
// origin and attaches it to any request to it, a page of another site's
// too; the dashboard asks for the user name and password itself and sends
// them with its own requests only. Clients that are not a page's script
// (curl, TES clients) still get the challenge. The API answers no CORS
// preflight: the dashboard is served from the API's own origin, and a page
// of another origin cannot send the header at all.
func challengesFor(r *http.Request, challenges []string) []string {
	if !fromScript(r) {
		return challenges
	}
	return slices.DeleteFunc(slices.Clone(challenges), func(c string) bool {
		scheme, _, _ := strings.Cut(c, " ")
		return strings.EqualFold(scheme, "Basic")
	})
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
