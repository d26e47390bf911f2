// Command rsslaunch runs a command and writes its wall time, CPU time (user
// and system) and peak RSS (from its os.ProcessState) as JSON to the file
// named by its first argument. The filer's benchmark measures processes
// through it: a child's ru_maxrss starts from the RSS of the process that
// spawned it (Linux keeps the spawner's high-water mark across the exec of
// a vfork'd child), and this small process takes far less memory than the
// benchmark.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rsslaunch OUT.json COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	seconds := time.Since(start).Seconds()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	raw, _ := json.Marshal(map[string]any{"Seconds": seconds, "CPUSeconds": cpu.Seconds(), "MaxRSS": ru.Maxrss})
	if err := os.WriteFile(os.Args[1], raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
