package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// waitFor asks for each task of ids in turn, every o.interval, until it
// ends, with a progress line on stderr, and prints why one that did not
// complete stopped. It returns nil when all completed, else an *exitError
// with the worst outcome (ExitTimeout once o.timeout passed).
func waitFor(ctx context.Context, c *client, ids []string, o waitOptions, stderr io.Writer) error {
	start := time.Now()
	p := newProgress(stderr)
	defer p.done()
	worst := ExitComplete
	for _, id := range ids {
		lastState := "unknown"
		for {
			t, err := c.get(ctx, id, "BASIC")
			if err != nil {
				var ae *apiError
				// A moment when the cluster is busy passes.
				if !errors.As(err, &ae) || (ae.Status != http.StatusServiceUnavailable && ae.Status != http.StatusTooManyRequests) {
					p.done()
					return err
				}
			} else {
				lastState = t.State
				elapsed := time.Since(start).Round(time.Second)
				state := fmt.Sprintf("%s: %s", id, t.State)
				detail := ""
				if n := len(t.Executors); n > 0 && (t.State == "RUNNING" || t.State == "INITIALIZING") {
					detail = fmt.Sprintf(" · %d of %d executors done", t.endedExecutors(), n)
				}
				p.show(state+detail, fmt.Sprintf("%s%s · %s", state, detail, elapsed))
				if tesv1.IsFinal(t.State) {
					p.done()
					code := exitCode(t.State)
					if code != ExitComplete {
						if full, err := c.get(ctx, id, "FULL"); err == nil {
							for i := 0; i < full.endedExecutors(); i++ {
								if ec := full.Logs[0].Logs[i].ExitCode; ec != 0 {
									fmt.Fprintf(stderr, "%s: executor %d exited with code %d\n", id, i, ec)
								}
							}
							for _, l := range full.systemLogs() {
								fmt.Fprintf(stderr, "%s: %s\n", id, l)
							}
						}
					}
					if code > worst {
						worst = code
					}
					break
				}
			}
			if o.timeout > 0 && time.Since(start) > o.timeout {
				p.done()
				return &exitError{code: ExitTimeout, msg: fmt.Sprintf("%s: still %s after %s", id, lastState, o.timeout)}
			}
			select {
			case <-ctx.Done():
				p.done()
				return ctx.Err()
			case <-time.After(o.interval):
			}
		}
	}
	if worst != ExitComplete {
		return &exitError{code: worst}
	}
	return nil
}

// exitCode is wait's exit code for a final state.
func exitCode(state string) int {
	switch state {
	case "COMPLETE":
		return ExitComplete
	case "EXECUTOR_ERROR":
		return ExitExecutorError
	case "SYSTEM_ERROR":
		return ExitSystemError
	}
	return ExitCanceled
}
