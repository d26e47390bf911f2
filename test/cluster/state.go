package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// State records a detached cluster so that another program can find and
// stop it (cmd/cluster up and down).
type State struct {
	// Dir is the cluster's state directory.
	Dir string `json:"dir"`
	// Kubeconfig is the admin kubeconfig written for users.
	Kubeconfig string    `json:"kubeconfig"`
	CacheDir   string    `json:"cacheDir"`
	Server     string    `json:"server"`
	Started    time.Time `json:"started"`
	Processes  []Process `json:"processes"`
	// Node is the real node, if the cluster has one.
	Node *RealNode `json:"node,omitempty"`
}

// State describes the running cluster.
func (c *Cluster) State(kubeconfig string) State {
	s := State{Dir: c.Dir, Kubeconfig: kubeconfig, CacheDir: c.CacheDir, Server: c.Server, Started: time.Now().UTC()}
	for _, p := range c.Processes() {
		s.Processes = append(s.Processes, *p)
	}
	s.Node = c.RealNode()
	return s
}

// WriteState writes s as JSON to path.
func WriteState(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadState reads a state file; it returns an error wrapping fs.ErrNotExist
// when there is none.
func ReadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w", path, err)
	}
	return &s, nil
}

// Alive returns the recorded processes that still run.
func (s *State) Alive() []*Process {
	var out []*Process
	for i := range s.Processes {
		if s.Processes[i].Alive() {
			out = append(out, &s.Processes[i])
		}
	}
	return out
}

// Stop stops every recorded process that still runs (etcd last) and
// removes the state directory.
func (s *State) Stop() error {
	var ps, etcd []*Process
	for _, p := range s.Alive() {
		if p.Name == "etcd" {
			etcd = append(etcd, p)
		} else {
			ps = append(ps, p)
		}
	}
	err := stopAll(ps, 10*time.Second)
	if e := stopRealNode(s.Node); e != nil {
		err = errors.Join(err, fmt.Errorf("real node: %w", e))
	}
	if err = errors.Join(err, stopAll(etcd, 10*time.Second)); err != nil {
		return err
	}
	if s.Dir != "" && filepath.IsAbs(s.Dir) {
		if err := os.RemoveAll(s.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Names lists processes as "name (pid N)".
func Names(ps []*Process) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s (pid %d)", p.Name, p.Pid))
	}
	return strings.Join(out, ", ")
}

// Attach returns a Cluster for the running cluster that s describes, to use
// its helpers (StartAdapter, SetPodLogs, ServiceAccountKubeconfig, ...) from
// another program. Its Stop stops only what this program started
// (adapters); stop the cluster itself with State.Stop.
func Attach(s *State) (*Cluster, error) {
	if alive := s.Alive(); len(alive) != len(s.Processes) || len(alive) == 0 {
		return nil, fmt.Errorf("the cluster in %s is not running (alive: %s)", s.Dir, Names(alive))
	}
	c := &Cluster{
		Dir:        s.Dir,
		CacheDir:   s.CacheDir,
		Kubeconfig: filepath.Join(s.Dir, "kubeconfig"),
		Server:     s.Server,
		logf:       func(string, ...any) {},
		attached:   true,
		node:       s.Node,
	}
	if err := c.connect(); err != nil {
		return nil, err
	}
	return c, nil
}
