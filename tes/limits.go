package tes

import (
	"strconv"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Limits are the most one task may ask for; a create over one is refused
// with 400 naming it, and nothing is written. 0 is no limit.
type Limits struct {
	Executors, Inputs, Outputs int
	CPUCores                   int
	RAMGB, DiskGB              float64
}

// DefaultLimits are the limits of a service whose operator set none: far
// above what workflow engines send (one executor, tens to thousands of
// files), low enough that no task asks for a cluster's worth.
func DefaultLimits() Limits {
	return Limits{Executors: 100, Inputs: 10000, Outputs: 10000, CPUCores: 128, RAMGB: 1024, DiskGB: 4096}
}

// Check refuses a task that asks for more than a limit.
func (l Limits) Check(t *tesv1.Task) error {
	for _, c := range []struct {
		field  string
		n, max int
	}{
		{"executors", len(t.Executors), l.Executors},
		{"inputs", len(t.Inputs), l.Inputs},
		{"outputs", len(t.Outputs), l.Outputs},
	} {
		if c.max > 0 && c.n > c.max {
			return bad("%s: %d of them, more than the %d this service allows a task", c.field, c.n, c.max)
		}
	}
	r := t.Resources
	if r == nil {
		return nil
	}
	if l.CPUCores > 0 && int(r.CPUCores) > l.CPUCores {
		return bad("resources.cpu_cores: %d, more than the %d this service allows a task", r.CPUCores, l.CPUCores)
	}
	for _, c := range []struct {
		field  string
		n, max float64
	}{
		{"ram_gb", r.RAMGB, l.RAMGB},
		{"disk_gb", r.DiskGB, l.DiskGB},
	} {
		if c.max > 0 && c.n > c.max {
			return bad("resources.%s: %s GB, more than the %s GB this service allows a task", c.field, shortNumber(c.n), shortNumber(c.max))
		}
	}
	return nil
}

// shortNumber prints a number as short as it goes.
func shortNumber(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// checkShare refuses a task that asks for more cores than a user's whole
// share of the cluster (QUOTA_CPU_PER_USER): it could never start.
func (s *Server) checkShare(t *tesv1.Task, caller Caller) error {
	q := s.Config.Steps.Quota
	if q.CPU <= 0 || caller.Label == "" || t.Resources == nil {
		return nil
	}
	if cores := float64(t.Resources.CPUCores); cores > q.CPU {
		return bad("resources.cpu_cores: %d, more than each user's share of the cluster, %s CPU cores at once", t.Resources.CPUCores, shortNumber(q.CPU))
	}
	return nil
}
