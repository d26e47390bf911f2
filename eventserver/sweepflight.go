package eventserver

import (
	"context"
	"sync"

	"github.com/elixir-cloud-aai/tesk-knative/runner"
)

// sweepFlight runs one sweep of a namespace at a time: a ping that comes
// while one runs waits for it and takes its result, so that a burst of
// pings (a PingSource's retries, or anyone who can post to the handler)
// costs one sweep, not one each. Pings that come after it ended start the
// next.
type sweepFlight struct {
	mu      sync.Mutex
	running map[string]*flight
}

type flight struct {
	done   chan struct{}
	res    runner.SweepResult
	err    error
	joined int // pings that took this sweep's result
}

// do runs sweep, or waits for the sweep of ns already running. shared
// reports that the result is another ping's sweep.
func (f *sweepFlight) do(ctx context.Context, ns string, sweep func() (runner.SweepResult, error)) (res runner.SweepResult, shared bool, err error) {
	f.mu.Lock()
	if f.running == nil {
		f.running = map[string]*flight{}
	}
	if fl := f.running[ns]; fl != nil {
		fl.joined++
		f.mu.Unlock()
		select {
		case <-fl.done:
			return fl.res, true, fl.err
		case <-ctx.Done():
			return runner.SweepResult{}, true, ctx.Err()
		}
	}
	fl := &flight{done: make(chan struct{})}
	f.running[ns] = fl
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, ns)
		f.mu.Unlock()
		close(fl.done)
	}()
	fl.res, fl.err = sweep()
	return fl.res, false, fl.err
}

// waiting is how many pings wait for the running sweep of ns.
func (f *sweepFlight) waiting(ns string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.running[ns]; fl != nil {
		return fl.joined
	}
	return 0
}
