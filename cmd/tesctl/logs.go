package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// logsOptions are logs' flags.
type logsOptions struct {
	executor int // -1: every executor
	follow   bool
	interval time.Duration // with follow, how often to ask
}

// logsCmd is the logs command.
func logsCmd(ctx context.Context, c *client) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the executors' output",
		Long: `Print the output of the task's executors that ended (the end of each one's
stdout on standard output and of its stderr on standard error, as the FULL
view gives them), or of one with --executor. Where the cluster does not serve
a container's streams apart, stdout holds both. With --follow, keep printing
what comes until the executor (or the task) ends.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogs(ctx, c, args[0], o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&o.executor, "executor", -1, "only this executor (0 is the first)")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing until the executor (or the task) ends")
	cmd.Flags().DurationVar(&o.interval, "interval", 2*time.Second, "with --follow, how often to ask")
	return cmd
}

// runLogs prints the output of the task id's executors that ended, or of
// o.executor alone: stdout on out, stderr on stderr. With o.follow, it
// follows them (see followLogs).
func runLogs(ctx context.Context, c *client, id string, o logsOptions, out, stderr io.Writer) error {
	if o.follow {
		return followLogs(ctx, c, id, o.executor, o.interval, out, stderr)
	}
	t, err := c.get(ctx, id, "FULL")
	if err != nil {
		return err
	}
	if o.executor >= 0 {
		if o.executor >= len(t.Executors) {
			return fmt.Errorf("%s has %d executors", id, len(t.Executors))
		}
		if o.executor < t.endedExecutors() {
			fmt.Fprint(out, t.Logs[0].Logs[o.executor].Stdout)
			fmt.Fprint(stderr, t.Logs[0].Logs[o.executor].Stderr)
		}
		return nil
	}
	for i := 0; i < t.endedExecutors(); i++ {
		l := t.Logs[0].Logs[i]
		fmt.Fprintf(out, "==> executor %d (exit code %d) <==\n%s", i, l.ExitCode, l.Stdout)
		if l.Stdout != "" && !strings.HasSuffix(l.Stdout, "\n") {
			fmt.Fprintln(out)
		}
		printStderr(stderr, i, l.Stderr)
	}
	if t.endedExecutors() < len(t.Executors) && !tesv1.IsFinal(t.State) {
		fmt.Fprintf(stderr, "%s is %s: executor %d has not ended (its output comes once it has; --follow waits)\n", id, t.State, t.endedExecutors())
	}
	return nil
}

// printStderr prints an executor's stderr, each line marked with the
// executor, on the command's standard error.
func printStderr(w io.Writer, executor int, stderr string) {
	if stderr == "" {
		return
	}
	for _, line := range strings.SplitAfter(strings.TrimSuffix(stderr, "\n"), "\n") {
		fmt.Fprintf(w, "executor %d stderr: %s\n", executor, strings.TrimSuffix(line, "\n"))
	}
}
