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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
)

// basePath is where a TES API lives under its URL.
const basePath = "/ga4gh/tes/v1"

// Exit codes of wait (and submit --wait): the task's outcome.
const (
	ExitComplete      = 0
	ExitFailed        = 1 // tesctl itself failed: usage, the API's error, no answer
	ExitExecutorError = 2
	ExitSystemError   = 3
	ExitCanceled      = 4 // CANCELED or PREEMPTED
	ExitTimeout       = 5 // wait --timeout passed first
)

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

func (e *exitError) Error() string { return e.msg }

// client speaks to one TES API.
type client struct {
	base  string // ends in /ga4gh/tes/v1
	token string
	http  *http.Client
}

// apiError is an answer other than 200.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			r = bytes.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				return err
			}
			r = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &apiError{Status: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %v", method, path, err)
	}
	return nil
}

// task is what tesctl reads of a tesTask.
type task struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Name         string            `json:"name"`
	CreationTime string            `json:"creation_time"`
	Executors    []json.RawMessage `json:"executors"`
	Tags         map[string]string `json:"tags"`
	Logs         []struct {
		Logs []struct {
			ExitCode  int    `json:"exit_code"`
			Stdout    string `json:"stdout"`
			Stderr    string `json:"stderr"`
			StartTime string `json:"start_time"`
			EndTime   string `json:"end_time"`
		} `json:"logs"`
		SystemLogs []string `json:"system_logs"`
	} `json:"logs"`
}

// endedExecutors is how many executors ended: the task log has one entry
// per executor started, in order, and one that ended has its end time.
func (t *task) endedExecutors() int {
	if len(t.Logs) == 0 {
		return 0
	}
	n := 0
	for _, l := range t.Logs[0].Logs {
		if l.EndTime == "" {
			break
		}
		n++
	}
	return n
}

func (t *task) systemLogs() []string {
	if len(t.Logs) == 0 {
		return nil
	}
	return t.Logs[0].SystemLogs
}

func (c *client) get(ctx context.Context, id, view string) (*task, error) {
	var t task
	err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id)+"?view="+view, nil, &t)
	return &t, err
}

// final reports whether a task never leaves its state.
func final(state string) bool {
	switch state {
	case "COMPLETE", "EXECUTOR_ERROR", "SYSTEM_ERROR", "CANCELED", "PREEMPTED":
		return true
	}
	return false
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

// baseURL is the API's base from what the user gave: a server
// (http://host:8081) or the API itself (.../ga4gh/tes/v1).
func baseURL(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if s == "" {
		return "", errors.New("no TES API: give --url or set TES_URL (e.g. http://localhost:8081)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q is not an http(s) URL", s)
	}
	if !strings.HasSuffix(u.Path, basePath) {
		s += basePath
	}
	return s, nil
}

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

// shortTask is the short form of submit: one executor and its files.
type shortTask struct {
	name, description, image, workdir string
	inputs, outputs, env, tags        []string
	cpu                               int
	ram, disk                         float64
}

// build makes the tesTask of the short form.
func (s shortTask) build(command []string) (map[string]any, error) {
	if s.image == "" {
		return nil, errors.New("the short form needs --image and a command after --")
	}
	if len(command) == 0 {
		return nil, errors.New("no command: give it after --, e.g. tesctl submit --image alpine -- echo hello")
	}
	ex := map[string]any{"image": s.image, "command": command}
	if s.workdir != "" {
		ex["workdir"] = s.workdir
	}
	if len(s.env) > 0 {
		env, err := pairs("--env", s.env, false)
		if err != nil {
			return nil, err
		}
		ex["env"] = env
	}
	t := map[string]any{"executors": []any{ex}}
	if s.name != "" {
		t["name"] = s.name
	}
	if s.description != "" {
		t["description"] = s.description
	}
	var ins, outs []any
	for _, in := range s.inputs {
		// URL=PATH: the path is after the last "=" (a URL may hold one).
		i := strings.LastIndex(in, "=")
		if i <= 0 || i == len(in)-1 {
			return nil, fmt.Errorf("--input %q: want URL=PATH, e.g. s3://bucket/in.txt=/data/in.txt", in)
		}
		ins = append(ins, map[string]any{"url": in[:i], "path": in[i+1:]})
	}
	for _, out := range s.outputs {
		// PATH=URL: the path is before the first "=".
		i := strings.Index(out, "=")
		if i <= 0 || i == len(out)-1 {
			return nil, fmt.Errorf("--output %q: want PATH=URL, e.g. /data/out.txt=s3://bucket/out.txt", out)
		}
		outs = append(outs, map[string]any{"path": out[:i], "url": out[i+1:]})
	}
	if ins != nil {
		t["inputs"] = ins
	}
	if outs != nil {
		t["outputs"] = outs
	}
	if len(s.tags) > 0 {
		tags, err := pairs("--tag", s.tags, true)
		if err != nil {
			return nil, err
		}
		t["tags"] = tags
	}
	res := map[string]any{}
	if s.cpu > 0 {
		res["cpu_cores"] = s.cpu
	}
	if s.ram > 0 {
		res["ram_gb"] = s.ram
	}
	if s.disk > 0 {
		res["disk_gb"] = s.disk
	}
	if len(res) > 0 {
		t["resources"] = res
	}
	return t, nil
}

// pairs reads K=V flags; emptyValue allows K alone (the value "").
func pairs(flag string, list []string, emptyValue bool) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || (!ok && !emptyValue) {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func submitCmd(ctx context.Context, c *client) *cobra.Command {
	var s shortTask
	var wait bool
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
			var body any
			if s.image != "" {
				command := args
				if dash := cmd.ArgsLenAtDash(); dash > 0 {
					return fmt.Errorf("with --image, the command comes after -- (got %q before it)", args[:dash])
				}
				t, err := s.build(command)
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
					raw, err = io.ReadAll(cmd.InOrStdin())
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
			fmt.Fprintln(cmd.OutOrStdout(), created.ID)
			if wait {
				return waitFor(ctx, c, []string{created.ID}, 2*time.Second, 0, cmd.ErrOrStderr())
			}
			return nil
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
	f.BoolVar(&wait, "wait", false, "wait for the task, as wait does (exit code: its outcome)")
	return cmd
}

func getCmd(ctx context.Context, c *client) *cobra.Command {
	var view string
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print a task as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := strings.ToUpper(view)
			if v != "MINIMAL" && v != "BASIC" && v != "FULL" {
				return fmt.Errorf("--view %q: MINIMAL, BASIC or FULL", view)
			}
			var raw json.RawMessage
			if err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(args[0])+"?view="+v, nil, &raw); err != nil {
				return err
			}
			var out bytes.Buffer
			if err := json.Indent(&out, raw, "", "  "); err != nil {
				return err
			}
			out.WriteByte('\n')
			_, err := cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	cmd.Flags().StringVar(&view, "view", "BASIC", "MINIMAL (id and state), BASIC (the task without contents and output) or FULL")
	return cmd
}

func listCmd(ctx context.Context, c *client) *cobra.Command {
	var state, prefix, token, output string
	var tags []string
	var size int
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: `List tasks, newest first: one page (--page-size), or every page with --all.
The table has each task's id, state, name, creation time and executor count;
-o json prints the tasks as the API gives them (BASIC view).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"view": {"BASIC"}}
			if state != "" {
				q.Set("state", strings.ToUpper(state))
			}
			if prefix != "" {
				q.Set("name_prefix", prefix)
			}
			if size > 0 {
				q.Set("page_size", strconv.Itoa(size))
			}
			for _, kv := range tags {
				k, v, _ := strings.Cut(kv, "=")
				if k == "" {
					return fmt.Errorf("--tag %q: want KEY=VALUE or KEY", kv)
				}
				q.Add("tag_key", k)
				q.Add("tag_value", v)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: table or json", output)
			}
			var tasks []json.RawMessage
			next := token
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
				if next == "" || !all {
					break
				}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if tasks == nil {
					tasks = []json.RawMessage{}
				}
				b, err := json.MarshalIndent(map[string]any{"tasks": tasks}, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(b))
			} else {
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
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more tasks: --all, or --page-token %s\n", next)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only tasks in this state (QUEUED, RUNNING, COMPLETE, ...)")
	f.StringVar(&prefix, "name-prefix", "", "only tasks whose name starts with this")
	f.StringArrayVar(&tags, "tag", nil, "only tasks with this tag, KEY=VALUE, or KEY for any value (repeatable)")
	f.IntVar(&size, "page-size", 0, "tasks per page (the API's default: 256)")
	f.StringVar(&token, "page-token", "", "start at this page (the token a list printed)")
	f.BoolVar(&all, "all", false, "every page")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cancelCmd(ctx context.Context, c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel tasks",
		Long:  "Cancel tasks: each goes CANCELING, then CANCELED (one that already ended stays as it is).",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, id := range args {
				if err := c.do(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+":cancel", struct{}{}, nil); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: cancel requested\n", id)
			}
			return errors.Join(errs...)
		},
	}
}

func waitCmd(ctx context.Context, c *client) *cobra.Command {
	var interval, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID...",
		Short: "Wait until tasks end; the exit code is the outcome",
		Long: `Wait until the tasks end, with a progress line on stderr. The exit code is
the outcome (of the worst task, with several): 0 COMPLETE, 2 EXECUTOR_ERROR,
3 SYSTEM_ERROR, 4 CANCELED or PREEMPTED, 5 when --timeout passed first.
Why a task stopped (its system logs) is printed on stderr.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 100*time.Millisecond {
				return errors.New("--interval: at least 100ms")
			}
			return waitFor(ctx, c, args, interval, timeout, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "how often to ask")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// progress writes the progress line: rewritten in place on a terminal, a
// line per change elsewhere.
type progress struct {
	w        io.Writer
	terminal bool
	last     string
	width    int
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// show writes a line; key is what must change for a new line off a
// terminal (the elapsed time alone does not make one).
func (p *progress) show(key, line string) {
	if p.terminal {
		pad := ""
		if n := p.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		p.width = len(line)
		return
	}
	if key != p.last {
		fmt.Fprintln(p.w, line)
	}
	p.last = key
}

func (p *progress) done() {
	if p.terminal && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}

func waitFor(ctx context.Context, c *client, ids []string, interval, timeout time.Duration, stderr io.Writer) error {
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
				if final(t.State) {
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
			if timeout > 0 && time.Since(start) > timeout {
				p.done()
				return &exitError{code: ExitTimeout, msg: fmt.Sprintf("%s: still %s after %s", id, lastState, timeout)}
			}
			select {
			case <-ctx.Done():
				p.done()
				return ctx.Err()
			case <-time.After(interval):
			}
		}
	}
	if worst != ExitComplete {
		return &exitError{code: worst}
	}
	return nil
}

func logsCmd(ctx context.Context, c *client) *cobra.Command {
	var executor int
	var follow bool
	var interval time.Duration
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
			if follow {
				return followLogs(ctx, c, args[0], executor, interval, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			t, err := c.get(ctx, args[0], "FULL")
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if executor >= 0 {
				if executor >= len(t.Executors) {
					return fmt.Errorf("%s has %d executors", args[0], len(t.Executors))
				}
				if executor < t.endedExecutors() {
					fmt.Fprint(out, t.Logs[0].Logs[executor].Stdout)
					fmt.Fprint(cmd.ErrOrStderr(), t.Logs[0].Logs[executor].Stderr)
				}
				return nil
			}
			for i := 0; i < t.endedExecutors(); i++ {
				l := t.Logs[0].Logs[i]
				fmt.Fprintf(out, "==> executor %d (exit code %d) <==\n%s", i, l.ExitCode, l.Stdout)
				if l.Stdout != "" && !strings.HasSuffix(l.Stdout, "\n") {
					fmt.Fprintln(out)
				}
				printStderr(cmd.ErrOrStderr(), i, l.Stderr)
			}
			if t.endedExecutors() < len(t.Executors) && !final(t.State) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s is %s: executor %d has not ended (its output comes once it has; --follow waits)\n", args[0], t.State, t.endedExecutors())
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&executor, "executor", -1, "only this executor (0 is the first)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the executor (or the task) ends")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --follow, how often to ask")
	return cmd
}

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
			if final(t.State) {
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
