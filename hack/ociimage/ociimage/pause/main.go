// Command pause is the process of a pod's sandbox container, as Kubernetes'
// pause: it holds the pod's namespaces open, doing nothing, until SIGTERM or
// SIGINT, on which it exits 0. As the pod's first process it reaps the
// children that end up under it (wait4 on SIGCHLD), so that none stays a
// zombie. -v prints its version.
//
// It is built into the pause image (hack/ociimage/ociimage, PauseImage).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the Kubernetes pause release this program stands for.
const version = "3.10.2"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-v" {
		fmt.Printf("pause.go %s\n", version)
		return
	}
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "usage: %s [-v]\n", os.Args[0])
		os.Exit(2)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	os.Exit(run(sigs))
}

// run waits on sigs: SIGCHLD reaps every ended child, SIGINT and SIGTERM
// return 0.
func run(sigs <-chan os.Signal) int {
	for s := range sigs {
		switch s {
		case syscall.SIGCHLD:
			reap()
		case syscall.SIGINT, syscall.SIGTERM:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
			return 0
		}
	}
	return 0
}

// reap collects every child that has ended, without blocking. Signals
// coalesce, so one SIGCHLD may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
