package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

// cancelCmd is the cancel command.
func cancelCmd(ctx context.Context, c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel tasks",
		Long:  "Cancel tasks: each goes CANCELING, then CANCELED (one that already ended stays as it is).",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCancel(ctx, c, args, cmd.OutOrStdout())
		},
	}
}

// runCancel asks the API to cancel each task of ids, printing each request
// taken on out; the errors of the others are joined in the one returned.
func runCancel(ctx context.Context, c *client, ids []string, out io.Writer) error {
	var errs []error
	for _, id := range ids {
		if err := c.do(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+":cancel", struct{}{}, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		fmt.Fprintf(out, "%s: cancel requested\n", id)
	}
	return errors.Join(errs...)
}
