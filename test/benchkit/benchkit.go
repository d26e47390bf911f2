// Package benchkit holds what the benchmark programs (test/bench,
// test/benchscale, test/chaos) share: percentiles, a process's memory from
// /proc, and the API server's audit log.
package benchkit

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Percentile is the nearest-rank percentile of sorted s (p in [0,1]): the
// smallest sample with at least p of the samples at or below it.
func Percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	rank := int(p*float64(len(s))+0.999999999) - 1
	return s[max(0, min(len(s)-1, rank))]
}

// ProcStatusKiB reads a field of /proc/<pid>/status (VmRSS, VmHWM, ...), in
// KiB.
func ProcStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kib int64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kib)
			return kib, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
