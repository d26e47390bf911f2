package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// submitOptions are submit's flags.
type submitOptions struct {
	short shortTask // the short form's flags; --image chooses it
	wait  bool
}

// submitCmd is the submit command.
func submitCmd(ctx context.Context, c *client) *cobra.Command {
	var o submitOptions
	s := &o.short
	cmd := &cobra.Command{
		Use:   "submit FILE | submit --image IMAGE [flags] -- COMMAND [ARG...]",
		Short: "Submit a task and print its id",
		Long: `Submit a task: a tesTask as JSON from FILE ("-" reads it from stdin), or the
short form: one executor of --image running the command given after --, with
its inputs (--input URL=PATH), outputs (--output PATH=URL), environment
(--env K=V), tags (--tag K=V) and resources. Prints the task's id; with
--wait, then waits for it as wait does.`,
		Example: `  tesctl submit examples/tes-task.json
  tesctl submit --image alpine --name hello --tag project=demo -- echo hello
  tesctl submit --image ubuntu:24.04 --input s3://bucket/in.txt=/data/in.txt \
    --output /data/out.txt=s3://bucket/out.txt -- sh -c 'tr a-z A-Z < /data/in.txt > /data/out.txt'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(ctx, c, o, args, cmd.ArgsLenAtDash(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.image, "image", "", "short form: the executor's image")
	f.StringVar(&s.name, "name", "", "short form: the task's name")
	f.StringVar(&s.description, "description", "", "short form: the task's description")
	f.StringVar(&s.workdir, "workdir", "", "short form: the executor's working directory")
	f.StringArrayVarP(&s.inputs, "input", "i", nil, "short form: an input, URL=PATH (repeatable)")
	f.StringArrayVarP(&s.outputs, "output", "o", nil, "short form: an output, PATH=URL (repeatable)")
	f.StringArrayVarP(&s.env, "env", "e", nil, "short form: an environment variable, K=V (repeatable)")
	f.StringArrayVar(&s.tags, "tag", nil, "short form: a tag, K=V (repeatable)")
	f.IntVar(&s.cpu, "cpu", 0, "short form: CPU cores")
	f.Float64Var(&s.ram, "ram", 0, "short form: RAM in GB")
	f.Float64Var(&s.disk, "disk", 0, "short form: disk in GB")
	f.BoolVar(&o.wait, "wait", false, "wait for the task, as wait does (exit code: its outcome)")
	return cmd
}

// runSubmit creates a task, the short form's or one of the file args[0]
// ("-": stdin), and prints its id on stdout; with o.wait, it then waits for
// the task, its progress on stderr. dash is where "--" was among args (-1:
// nowhere).
func runSubmit(ctx context.Context, c *client, o submitOptions, args []string, dash int, stdin io.Reader, stdout, stderr io.Writer) error {
	var body any
	if o.short.image != "" {
		command := args
		if dash > 0 {
			return fmt.Errorf("with --image, the command comes after -- (got %q before it)", args[:dash])
		}
		t, err := o.short.build(command)
		if err != nil {
			return err
		}
		body = t
	} else {
		if len(args) != 1 {
			return errors.New("give a task file (or - for stdin), or the short form: --image IMAGE -- COMMAND")
		}
		var raw []byte
		var err error
		if args[0] == "-" {
			raw, err = io.ReadAll(stdin)
		} else {
			raw, err = os.ReadFile(args[0])
		}
		if err != nil {
			return err
		}
		if !json.Valid(raw) {
			return fmt.Errorf("%s is not JSON", args[0])
		}
		body = raw
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, "/tasks", body, &created); err != nil {
		return err
	}
	fmt.Fprintln(stdout, created.ID)
	if o.wait {
		return waitFor(ctx, c, []string{created.ID}, waitOptions{interval: 2 * time.Second}, stderr)
	}
	return nil
}
