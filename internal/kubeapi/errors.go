// Package kubeapi is how the services call the API server: what an error of
// a request means (Classify) and the one retrying call (Call), with bounded
// backoff, used by the handler's steps and the TES API alike.
package kubeapi

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Outcome is what an API error means for the write that got it
// (docs/behaviour.md §8.1).
type Outcome int

const (
	// Done: no error.
	Done Outcome = iota
	// Retry: the write may pass if tried again (a timeout of the client or
	// of the server, a network error, throttling, a conflict, any 5xx). It
	// changed nothing that the step relies on: the step answers 5xx or 429
	// and the event, or the next sweep, tries again.
	Retry
	// Rejected: the API server refused the write for what it is (a 4xx
	// other than 404, 408, 409 and 429: 403 Forbidden by RBAC, an admission
	// policy or a quota, 422 Invalid, 400 Bad Request). Trying again cannot
	// help; the step falls back where the behaviour says how.
	Rejected
	// Missing: the object is not there (404).
	Missing
)

func (o Outcome) String() string {
	return [...]string{"done", "retry", "rejected", "missing"}[o]
}

// Classify tells what an error of an API request means. It is the one place
// that decides "rejected" against "try again", for every write.
func Classify(err error) Outcome {
	if err == nil {
		return Done
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		switch code := se.Status().Code; {
		case code == 404:
			return Missing
		case code == 408, code == 409, code == 429, code >= 500:
			return Retry
		case code >= 400:
			return Rejected
		}
		// A status without an HTTP code: its reason tells.
		switch {
		case apierrors.IsNotFound(err):
			return Missing
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err),
			apierrors.IsUnauthorized(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
			apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err):
			return Rejected
		}
		return Retry
	}
	// Not an answer of the API server: the request did not get through, or
	// its answer did not come back (the client's own timeout, a dial, DNS or
	// TLS handshake timeout, a refused or reset connection, a context
	// deadline). Whether it took effect is unknown, and only the API server
	// can reject a write: it is tried again, which is safe as every write of
	// a step is idempotent.
	return Retry
}

// IsTransient reports whether an API error may pass if tried again.
func IsTransient(err error) bool { return Classify(err) == Retry }

// IsRejected reports whether the API server refused a write for good.
func IsRejected(err error) bool { return Classify(err) == Rejected }
