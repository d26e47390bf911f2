package kubeapi

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// DefaultBackoff retries a transient API error 5 times, from 50 ms, doubling,
// for at most about 1.5 s in all.
var DefaultBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: time.Second}

// Call runs one API request with DefaultBackoff (see CallWith).
func Call(ctx context.Context, fn func(context.Context) error) error {
	return CallWith(ctx, DefaultBackoff, fn)
}

// CallWith runs one API request, trying it again while its error is
// transient and ctx lasts, with bounded backoff b. A conflict (409:
// AlreadyExists, or a write on a resourceVersion that changed) is not tried
// again as it is: the caller reads again and decides, or draws another name.
func CallWith(ctx context.Context, b wait.Backoff, fn func(context.Context) error) error {
	return retry.OnError(b, func(err error) bool {
		return IsTransient(err) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil
	}, func() error {
		return fn(ctx)
	})
}

// Get runs one reading API request with DefaultBackoff and returns what it
// read.
func Get[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	var out T
	err := Call(ctx, func(ctx context.Context) (err error) {
		out, err = fn(ctx)
		return err
	})
	return out, err
}
