package kubeapi

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestCallTriesAgainOnlyWhatMayPass(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	fast := wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}
	cases := []struct {
		name  string
		err   error
		calls int
	}{
		{"503 every time: bounded", apierrors.NewServiceUnavailable("down"), 4},
		{"a dial error: bounded", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), 4},
		{"409 conflict: the caller reads again", apierrors.NewConflict(gr, "x", errors.New("changed")), 1},
		{"409 already exists: the caller draws another name", apierrors.NewAlreadyExists(gr, "x"), 1},
		{"403 forbidden: never passes", apierrors.NewForbidden(gr, "x", errors.New("no")), 1},
		{"404 not found", apierrors.NewNotFound(gr, "x"), 1},
	}
	for _, c := range cases {
		calls := 0
		err := CallWith(context.Background(), fast, func(context.Context) error {
			calls++
			return c.err
		})
		if calls != c.calls || err == nil {
			t.Errorf("%s: %d calls, error %v; want %d calls and the error", c.name, calls, err, c.calls)
		}
	}
}

func TestCallStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := CallWith(ctx, wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 10}, func(context.Context) error {
		calls++
		cancel()
		return apierrors.NewServiceUnavailable("down")
	})
	if calls != 1 || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("%d calls, error %v; want 1 call and the API's error", calls, err)
	}
}

func TestGetReturnsWhatASecondAttemptRead(t *testing.T) {
	calls := 0
	got, err := Get(context.Background(), func(context.Context) (string, error) {
		if calls++; calls == 1 {
			return "", apierrors.NewTooManyRequests("slow down", 0)
		}
		return "read", nil
	})
	if got != "read" || err != nil || calls != 2 {
		t.Errorf("Get = %q, %v after %d calls; want \"read\", nil after 2", got, err, calls)
	}
}
