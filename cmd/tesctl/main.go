// Command tesctl is a command-line client of a GA4GH TES 1.1 API (this
// service's, or any other): submit, get, list, cancel and wait for tasks,
// and read their executors' output.
//
//	tesctl submit task.json                  # a tesTask as JSON ("-": stdin); prints its id
//	tesctl submit --image alpine -- echo hi  # the short form
//	tesctl get ID [--view MINIMAL|BASIC|FULL]
//	tesctl list [--state S] [--name-prefix P] [--tag k=v]...
//	tesctl cancel ID...
//	tesctl wait ID...                        # exit code: the outcome (0 COMPLETE)
//	tesctl logs ID [--executor N] [--follow]
//
// The API's base URL comes from --url or TES_URL, a bearer token from
// --token or TES_TOKEN.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
)

// Exit codes of wait (and submit --wait): the task's outcome.
const (
	ExitComplete      = 0
	ExitFailed        = 1 // tesctl itself failed: usage, the API's error, no answer
	ExitExecutorError = 2
	ExitSystemError   = 3
	ExitCanceled      = 4 // CANCELED or PREEMPTED
	ExitTimeout       = 5 // wait --timeout passed first
)

// main runs tesctl with the process's arguments, streams and environment,
// until it ends or a signal (SIGINT, SIGTERM) stops it, and exits with its
// code.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// exitError ends the command with a code of its own.
type exitError struct {
	code int
	msg  string
}

// Error is the message printed for the error ("" prints none).
func (e *exitError) Error() string { return e.msg }

// run runs the command line args with the given streams and environment
// and returns the exit code: 0, an exitError's code, or ExitFailed for any
// other error, which it prints on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	var (
		flagURL, flagToken string
		flagTimeout        time.Duration
		c                  = &client{}
	)
	root := &cobra.Command{
		Use:   "tesctl",
		Short: "A client of a GA4GH TES 1.1 API",
		Long: `tesctl submits, reads, lists, cancels and waits for the tasks of a GA4GH TES
1.1 API, and prints their executors' output.

The API's URL comes from --url or TES_URL (a server, such as
http://localhost:8081, or the API's base, .../ga4gh/tes/v1); a bearer token,
if the API needs one, from --token or TES_TOKEN.

wait exits with the task's outcome: 0 COMPLETE, 2 EXECUTOR_ERROR,
3 SYSTEM_ERROR, 4 CANCELED or PREEMPTED, 5 when --timeout passed first;
every command exits 1 when it fails itself (a usage error, an error of the
API, no answer).`,
		Version:       version.Get(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			b, err := baseURL(flagURL)
			if err != nil {
				return err
			}
			c.base, c.token = b, strings.TrimSpace(flagToken)
			c.http = &http.Client{Timeout: flagTimeout}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&flagURL, "url", getenv("TES_URL"), "the TES API's URL (env TES_URL)")
	root.PersistentFlags().StringVar(&flagToken, "token", getenv("TES_TOKEN"), "a bearer token (env TES_TOKEN)")
	root.PersistentFlags().DurationVar(&flagTimeout, "request-timeout", 60*time.Second, "how long one request to the API may take")
	root.AddCommand(submitCmd(ctx, c), getCmd(ctx, c), listCmd(ctx, c), cancelCmd(ctx, c), waitCmd(ctx, c), logsCmd(ctx, c))

	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "tesctl:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "tesctl:", err)
	return ExitFailed
}
