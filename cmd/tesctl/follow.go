package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// followLogs prints the executors' output as it comes: an executor's
// output is in the API's answer once it ended, so each is printed whole when
// it ends, in order, until the task ends (or the one asked for ended).
func followLogs(ctx context.Context, c *client, id string, executor int, interval time.Duration, out, stderr io.Writer) error {
	next := 0
	if executor >= 0 {
		next = executor
	}
	announced := -1
	for {
		t, err := c.get(ctx, id, "FULL")
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || (ae.Status != http.StatusServiceUnavailable && ae.Status != http.StatusTooManyRequests) {
				return err
			}
		} else {
			if executor >= len(t.Executors) {
				return fmt.Errorf("%s has %d executors", id, len(t.Executors))
			}
			for next < t.endedExecutors() {
				l := t.Logs[0].Logs[next]
				if executor < 0 {
					fmt.Fprintf(out, "==> executor %d (exit code %d) <==\n", next, l.ExitCode)
				}
				fmt.Fprint(out, l.Stdout)
				if l.Stdout != "" && !strings.HasSuffix(l.Stdout, "\n") {
					fmt.Fprintln(out)
				}
				printStderr(stderr, next, l.Stderr)
				if next == executor {
					return nil
				}
				next++
			}
			if tesv1.IsFinal(t.State) {
				if next < len(t.Executors) && (executor < 0 || next <= executor) {
					fmt.Fprintf(stderr, "%s ended %s before executor %d ran\n", id, t.State, next)
				}
				return nil
			}
			if announced != next {
				fmt.Fprintf(stderr, "%s is %s: waiting for executor %d to end\n", id, t.State, next)
				announced = next
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
