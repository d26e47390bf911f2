package procstat

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// Field 2 with a space and a ')' in it; utime 250, stime 50 ticks.
	stat := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.0 {
		t.Errorf("parseStatCPU = %v, want 3.0", got)
	}
	if _, err := parseStatCPU("1234 (x) S 1 2"); err == nil {
		t.Error("a short line gave no error")
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Error("a line without ')' gave no error")
	}
}

func TestOwnProcess(t *testing.T) {
	// Burn a little CPU so that the figure is above zero.
	x := 0
	for i := range 50_000_000 {
		x ^= i
	}
	_ = x
	if s, err := CPUSeconds(os.Getpid()); err != nil || s <= 0 {
		t.Fatalf("CPUSeconds of this process = %v, %v", s, err)
	}
	if _, err := CPUSeconds(-1); err == nil {
		t.Error("a process that does not exist gave no error")
	}
	if l, err := LoadAvg(); err != nil || len(strings.Fields(l)) != 3 {
		t.Errorf("LoadAvg = %q, %v", l, err)
	}
}
