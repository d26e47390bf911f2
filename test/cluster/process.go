package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one started component. Pid and StartTime identify it even from
// another program (cmd/cluster down): a pid whose start time differs belongs
// to some other, later process and is left alone.
type Process struct {
	Name      string `json:"name"`
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Binary    string `json:"binary"`
	Log       string `json:"log"`

	done chan struct{} // closed when the child has been waited for; nil if not our child
}

// startProcess starts bin with args, output appended to logPath. With detach
// the process gets its own session and outlives the caller; otherwise it gets
// its own process group and is killed when the calling thread dies.
func startProcess(name, bin string, args, env []string, logPath string, detach bool) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = env
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Pid: cmd.Process.Pid, Binary: bin, Log: logPath, done: make(chan struct{})}
	p.StartTime, _ = procStartTime(p.Pid)
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// procStat returns the state letter and start time (in clock ticks since
// boot) of pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	// The command name is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0, 0, errors.New("malformed stat")
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	return fields[0][0], start, nil
}

func procStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// Alive reports whether the process is still running (a zombie counts as
// dead).
func (p *Process) Alive() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
		}
	}
	if p.Pid <= 0 {
		return false
	}
	state, start, err := procStat(p.Pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	return p.StartTime == 0 || start == p.StartTime
}

// signal sends sig to the process and to its process group (which it leads).
func (p *Process) signal(sig syscall.Signal) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.Pid, sig)
	_ = syscall.Kill(p.Pid, sig)
}

// waitExit waits up to timeout for the process to end.
func (p *Process) waitExit(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !p.Alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		if p.done != nil {
			select {
			case <-p.done:
			case <-time.After(20 * time.Millisecond):
			}
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) error {
	return stopAll([]*Process{p}, grace)
}

// stopAll sends SIGTERM to every process at once, waits up to grace, kills
// what is left and reports processes that survived even that.
func stopAll(ps []*Process, grace time.Duration) error {
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, p := range ps {
		p.waitExit(time.Until(deadline))
	}
	var alive []string
	for _, p := range ps {
		if p.Alive() {
			p.signal(syscall.SIGKILL)
			if !p.waitExit(5 * time.Second) {
				alive = append(alive, fmt.Sprintf("%s (pid %d)", p.Name, p.Pid))
			}
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("still running after SIGKILL: %s", strings.Join(alive, ", "))
	}
	return nil
}

// logTail returns the last n lines of the process log.
func (p *Process) logTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
