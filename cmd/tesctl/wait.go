package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// waitOptions are wait's flags.
type waitOptions struct {
	interval time.Duration // how often to ask
	timeout  time.Duration // 0: never give up
}

// waitCmd is the wait command.
func waitCmd(ctx context.Context, c *client) *cobra.Command {
	var o waitOptions
	cmd := &cobra.Command{
		Use:   "wait ID...",
		Short: "Wait until tasks end; the exit code is the outcome",
		Long: `Wait until the tasks end, with a progress line on stderr. The exit code is
the outcome (of the worst task, with several): 0 COMPLETE, 2 EXECUTOR_ERROR,
3 SYSTEM_ERROR, 4 CANCELED or PREEMPTED, 5 when --timeout passed first.
Why a task stopped (its system logs) is printed on stderr.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWait(ctx, c, args, o, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().DurationVar(&o.interval, "interval", 2*time.Second, "how often to ask")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// runWait checks wait's flags and waits for the tasks of ids (see waitFor).
func runWait(ctx context.Context, c *client, ids []string, o waitOptions, stderr io.Writer) error {
	if o.interval < 100*time.Millisecond {
		return errors.New("--interval: at least 100ms")
	}
	return waitFor(ctx, c, ids, o, stderr)
}
