package main

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// As a child of the test with PAUSE_TEST_CHILDREN=n, the test binary is
// pause with n children of its own that end at once.
func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv("PAUSE_TEST_CHILDREN")); err == nil {
		sigs := make(chan os.Signal, 16)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
		for i := 0; i < n; i++ {
			// Started and never waited for: only pause's reaping collects them.
			if _, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{}); err != nil {
				os.Exit(3)
			}
		}
		os.Stdout.WriteString("started\n")
		os.Exit(run(sigs))
	}
	os.Exit(m.Run())
}

// children returns the states (R, S, Z, ...) of pid's children.
func children(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			states = append(states, f[0])
		}
	}
	return states
}

func TestPauseReapsChildrenAndExitsOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "PAUSE_TEST_CHILDREN=5")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			if _, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf), "started") {
				t.Fatalf("pause did not start its children: %q %v", buf, err)
			}
			pid := cmd.Process.Pid
			// Each child ends at once; pause must collect every one. Poll
			// until no zombie is left (a deadline, not a measured speed).
			deadline := time.Now().Add(20 * time.Second)
			var states []string
			for time.Now().Before(deadline) {
				if states = children(t, pid); len(states) == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(states) != 0 {
				t.Fatalf("pause left children in states %q, want them reaped", states)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: %v, want exit 0", sig, err)
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("pause still runs 20 s after %v", sig)
			}
		})
	}
}
