// Package invalid is the one error type for what can never succeed: an event
// that names no task, a task JSON that does not parse, a TES request with a
// wrong field. No retry makes such an input valid, so every layer that meets
// one answers it as the caller's mistake (400, no redelivery) and changes
// nothing; every other error may pass on a later attempt.
package invalid

import (
	"errors"
	"fmt"
)

// Error is an input that can never succeed.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is an Error with a formatted message (%w wraps as fmt.Errorf does).
func Errorf(format string, a ...any) error { return &Error{Err: fmt.Errorf(format, a...)} }

// Wrap marks err as an input that can never succeed; nil stays nil.
func Wrap(err error) error {
	if err == nil || Is(err) {
		return err
	}
	return &Error{Err: err}
}

// Is reports whether err, or an error it wraps, is an Error.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
