package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// getOptions are get's flags.
type getOptions struct {
	view string
}

// getCmd is the get command.
func getCmd(ctx context.Context, c *client) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print a task as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(ctx, c, args[0], o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.view, "view", "BASIC", "MINIMAL (id and state), BASIC (the task without contents and output) or FULL")
	return cmd
}

// runGet prints the task id in the view o.view as indented JSON on out.
func runGet(ctx context.Context, c *client, id string, o getOptions, out io.Writer) error {
	v := strings.ToUpper(o.view)
	if v != "MINIMAL" && v != "BASIC" && v != "FULL" {
		return fmt.Errorf("--view %q: MINIMAL, BASIC or FULL", o.view)
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id)+"?view="+v, nil, &raw); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := out.Write(b.Bytes())
	return err
}
