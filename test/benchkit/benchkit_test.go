package benchkit

import (
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 10; i++ {
		s = append(s, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{0: 1, 0.5: 5, 0.9: 9, 0.95: 10, 0.99: 10, 1: 10} {
		if got := Percentile(s, p); got != want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("no samples gave a value")
	}
}

func TestProcStatusKiB(t *testing.T) {
	rss, err := ProcStatusKiB(os.Getpid(), "VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS of this process: %d, %v", rss, err)
	}
	if _, err := ProcStatusKiB(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("a missing field gave no error")
	}
}
