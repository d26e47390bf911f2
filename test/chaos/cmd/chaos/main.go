// Command chaos runs a generated set of TES tasks on the local cluster
// twice, clean and under faults (events dropped, duplicated, reordered and
// delayed; the handler SIGKILLed and restarted; the API server's answers to
// the handler's writes failed, or done and answered 500; its reads
// delayed), and checks that every task ends in the same state, no job is
// created twice, nothing is left, and every kind of fault fired
// (`make chaos`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/elixir-cloud-aai/tesk-knative/test/chaos"
)

func main() {
	var o chaos.Options
	flag.IntVar(&o.Tasks, "tasks", 200, "tasks per run")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the task set and of the faults")
	flag.IntVar(&o.Kills, "kills", 3, "times the handler is SIGKILLed and restarted in the chaos run")
	flag.Float64Var(&o.DropRate, "drop", 0.1, "share of events never delivered")
	flag.Float64Var(&o.WriteFaultRate, "write-faults", 0.05, "share of the handler's writes answered 429, 500 and 409 in turn by the API fault proxy")
	flag.Float64Var(&o.LostAnswerRate, "lost-answers", 0.02, "share of the handler's writes done by the API server and answered 500 all the same")
	flag.Float64Var(&o.ReadDelayRate, "read-delays", 0.1, "share of the handler's reads held back up to 300 ms by the API fault proxy")
	flag.DurationVar(&o.TTL, "ttl", 0, "the handler's TASK_TTL_SECONDS (default 30s)")
	flag.DurationVar(&o.Timeout, "timeout", 0, "longest each run may take (default 20m)")
	flag.StringVar(&o.Root, "root", ".", "the repository")
	bin := flag.String("bin", "bin", "where cmd/handler and cmd/tes are built (make build)")
	flag.Parse()
	if o.Tasks < 1 || o.Kills < 0 || o.DropRate < 0 || o.DropRate >= 1 || o.WriteFaultRate < 0 || o.LostAnswerRate < 0 || o.WriteFaultRate+o.LostAnswerRate >= 1 || o.ReadDelayRate < 0 || o.ReadDelayRate > 1 {
		fmt.Fprintln(os.Stderr, "chaos: -tasks must be 1 or more, -kills 0 or more, -drop, -write-faults and -lost-answers from 0 to below 1 (the last two together), -read-delays from 0 to 1")
		os.Exit(2)
	}
	o.Handler, o.TES = filepath.Join(*bin, "handler"), filepath.Join(*bin, "tes")
	dir, err := os.MkdirTemp("", "tesk-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	o.Dir = dir
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v (logs in %s)\n", err, dir)
		os.Exit(1)
	}
	rep.Print(os.Stdout)
	if !rep.Passed() {
		fmt.Printf("logs: %s\n", dir)
		os.Exit(1)
	}
	_ = os.RemoveAll(dir)
}
