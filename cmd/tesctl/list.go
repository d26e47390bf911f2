package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// listOptions are list's flags.
type listOptions struct {
	state, namePrefix string
	tags              []string // KEY=VALUE, or KEY for any value
	pageSize          int
	pageToken         string
	all               bool
	output            string // table or json
}

// listCmd is the list command.
func listCmd(ctx context.Context, c *client) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: `List tasks, newest first: one page (--page-size), or every page with --all.
The table has each task's id, state, name, creation time and executor count;
-o json prints the tasks as the API gives them (BASIC view).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(ctx, c, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.state, "state", "", "only tasks in this state (QUEUED, RUNNING, COMPLETE, ...)")
	f.StringVar(&o.namePrefix, "name-prefix", "", "only tasks whose name starts with this")
	f.StringArrayVar(&o.tags, "tag", nil, "only tasks with this tag, KEY=VALUE, or KEY for any value (repeatable)")
	f.IntVar(&o.pageSize, "page-size", 0, "tasks per page (the API's default: 256)")
	f.StringVar(&o.pageToken, "page-token", "", "start at this page (the token a list printed)")
	f.BoolVar(&o.all, "all", false, "every page")
	f.StringVarP(&o.output, "output", "o", "table", "table or json")
	return cmd
}

// runList prints the tasks the API lists (one page, or every page with
// o.all) on out, as a table or as JSON; the token of a next page, if any,
// goes on stderr.
func runList(ctx context.Context, c *client, o listOptions, out, stderr io.Writer) error {
	q := url.Values{"view": {"BASIC"}}
	if o.state != "" {
		q.Set("state", strings.ToUpper(o.state))
	}
	if o.namePrefix != "" {
		q.Set("name_prefix", o.namePrefix)
	}
	if o.pageSize > 0 {
		q.Set("page_size", strconv.Itoa(o.pageSize))
	}
	for _, kv := range o.tags {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			return fmt.Errorf("--tag %q: want KEY=VALUE or KEY", kv)
		}
		q.Add("tag_key", k)
		q.Add("tag_value", v)
	}
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("-o %q: table or json", o.output)
	}
	var tasks []json.RawMessage
	next := o.pageToken
	for {
		if next != "" {
			q.Set("page_token", next)
		}
		var page struct {
			Tasks         []json.RawMessage `json:"tasks"`
			NextPageToken string            `json:"next_page_token"`
		}
		if err := c.do(ctx, http.MethodGet, "/tasks?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		tasks = append(tasks, page.Tasks...)
		next = page.NextPageToken
		if next == "" || !o.all {
			break
		}
	}
	if o.output == "json" {
		if tasks == nil {
			tasks = []json.RawMessage{}
		}
		b, err := json.MarshalIndent(map[string]any{"tasks": tasks}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(b))
	} else if err := printTable(out, tasks); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(stderr, "more tasks: --all, or --page-token %s\n", next)
	}
	return nil
}

// printTable prints tasks as a table: id, state, name, creation time,
// executor count and tags.
func printTable(out io.Writer, tasks []json.RawMessage) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tNAME\tCREATED\tEXECUTORS\tTAGS")
	for _, raw := range tasks {
		var t task
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		keys := make([]string, 0, len(t.Tags))
		for k := range t.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var tagList []string
		for _, k := range keys {
			tagList = append(tagList, k+"="+t.Tags[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", t.ID, t.State, dash(t.Name), dash(t.CreationTime), len(t.Executors), strings.Join(tagList, ","))
	}
	return tw.Flush()
}

// dash is s, or "-" for an empty s (a table's empty cell).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
