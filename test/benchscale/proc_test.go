package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
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
	if _, err := cpuSeconds(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if kib, err := benchkit.ProcStatusKiB(os.Getpid(), "VmHWM"); err != nil || kib <= 0 {
		t.Fatalf("VmHWM = %d, %v", kib, err)
	}
}

func TestRoundRobin(t *testing.T) {
	var hits [2]int
	var backends []string
	for i := range hits {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i]++ }))
		defer s.Close()
		backends = append(backends, s.URL)
	}
	rr, err := newRoundRobin(backends...)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(rr)
	defer front.Close()
	for i := 0; i < 7; i++ {
		resp, err := http.Post(front.URL+"/", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if hits[0] != 4 || hits[1] != 3 {
		t.Errorf("backends got %v, want [4 3]", hits)
	}
	if c := rr.counts(); c[0] != 4 || c[1] != 3 {
		t.Errorf("counts = %v, want [4 3]", c)
	}
}
