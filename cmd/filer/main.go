// Command filer moves a TES task's inputs onto the task volume, or its
// outputs off it, as the inputs and outputs filer jobs run it:
//
//	filer [--debug] inputs|outputs [--file PATH] [JSON]
//
// The task JSON comes from --file (gzipped if the name ends in .gz; "-" for
// stdin), else the JSON argument, else the environment variable JSON_INPUT.
// The task volume is mounted at --task-dir (TESK_TASK_DIR, default
// /tesk/task). At most --parallel files move at once (FILER_PARALLELISM,
// default 8, at most 256). The rest of the configuration comes from the environment (see
// filer.OptionsFromEnv). Logs go to stderr, errors only unless --debug or
// DEBUG is set. Outputs mode ends by printing one line to stdout,
// "TESK_OUTPUT_FILE_LOGS [...]", listing the uploaded files.
//
// "filer file-writer BASE" is the file writer a root filer starts as the
// filer's own user to write its file:// uploads (filer.ServeFileWriter,
// FILER_WRITE_AS); it is not run by hand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/elixir-cloud-aai/tesk-knative/filer"
	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

const usage = `usage: filer [--debug] inputs|outputs [--file PATH] [--task-dir DIR] [--parallel N] [JSON]
       filer --version

The task JSON comes from --file (gzipped if PATH ends in .gz; - for stdin),
else the JSON argument, else the environment variable JSON_INPUT.
--parallel N (FILER_PARALLELISM, default 8) bounds the files moved at once.
`

type args struct {
	debug    bool
	version  bool
	file     string
	taskDir  string
	parallel int
	mode     string
	json     string
}

// parseArgs reads flags anywhere among the two positional arguments.
func parseArgs(argv []string, stderr io.Writer) (args, error) {
	var a args
	fs := flag.NewFlagSet("filer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	fs.BoolVar(&a.debug, "debug", false, "debug logs")
	fs.BoolVar(&a.debug, "d", false, "debug logs")
	fs.BoolVar(&a.version, "version", false, "print the filer's version and exit")
	fs.StringVar(&a.file, "file", "", "task JSON file (.gz: gzipped; -: stdin)")
	fs.StringVar(&a.file, "f", "", "task JSON file")
	fs.StringVar(&a.taskDir, "task-dir", "", "where the task volume is mounted")
	fs.Func("parallel", "files moved at once (1-256)", func(v string) error {
		n, err := filer.ParseParallelism(v)
		a.parallel = n
		return err
	})
	var pos []string
	for {
		if err := fs.Parse(argv); err != nil {
			return a, err
		}
		argv = fs.Args()
		if len(argv) == 0 {
			break
		}
		pos = append(pos, argv[0])
		argv = argv[1:]
	}
	if a.version {
		return a, nil
	}
	switch len(pos) {
	case 0:
		return a, errors.New("missing mode: inputs or outputs")
	case 1, 2:
	default:
		return a, fmt.Errorf("too many arguments (%d)", len(pos))
	}
	a.mode = pos[0]
	if a.mode != filer.ModeInputs && a.mode != filer.ModeOutputs {
		return a, fmt.Errorf("mode %q is neither inputs nor outputs", a.mode)
	}
	if len(pos) == 2 {
		a.json = pos[1]
	}
	return a, nil
}

func readTask(a args, stdin io.Reader) (*taskspec.Task, error) {
	switch {
	case a.file != "":
		var data []byte
		var err error
		if a.file == "-" {
			data, err = io.ReadAll(io.LimitReader(stdin, taskspec.MaxSize+1))
		} else {
			var f *os.File
			if f, err = os.Open(a.file); err == nil {
				data, err = io.ReadAll(io.LimitReader(f, taskspec.MaxSize+1))
				f.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("task JSON: %v", err)
		}
		if strings.HasSuffix(a.file, ".gz") {
			return taskspec.DecodeGzip(data)
		}
		return taskspec.Decode(data)
	case a.json != "":
		return taskspec.Decode([]byte(a.json))
	case os.Getenv("JSON_INPUT") != "":
		return taskspec.Decode([]byte(os.Getenv("JSON_INPUT")))
	}
	return nil, errors.New("no task JSON: pass --file, a JSON argument or JSON_INPUT")
}

func run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a, err := parseArgs(argv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "filer: %v\n%s", err, usage)
		return 2
	}
	if a.version {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	level := slog.LevelError
	if a.debug || filer.DebugFromEnv() {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts, err := filer.OptionsFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "filer: %v\n", err)
		return 1
	}
	if a.taskDir != "" {
		opts.TaskDir = a.taskDir
	}
	if a.parallel > 0 {
		opts.Parallelism = a.parallel
	}
	opts.Logger = log
	task, err := readTask(a, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "filer: %v\n", err)
		return 1
	}
	files, err := filer.Run(ctx, a.mode, task, opts)
	if err != nil {
		// One line, with URLs redacted (filer.Error).
		fmt.Fprintf(stderr, "filer: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		return 1
	}
	if a.mode == filer.ModeOutputs {
		fmt.Fprintln(stdout, taskspec.FormatOutputFileLogs(files))
	}
	return 0
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == filer.WriterCommand {
		os.Exit(filer.ServeFileWriter(os.Args[2:], os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
