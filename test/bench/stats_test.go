package main

import (
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := benchkit.Percentile(s, c.p); got != c.want {
			t.Errorf("benchkit.Percentile(1..100ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	three := []time.Duration{1, 2, 3}
	if got := benchkit.Percentile(three, 0.5); got != 2 {
		t.Errorf("benchkit.Percentile([1 2 3], 0.5) = %v, want 2", got)
	}
	if got := benchkit.Percentile(three, 0.99); got != 3 {
		t.Errorf("benchkit.Percentile([1 2 3], 0.99) = %v, want 3", got)
	}
	if got := benchkit.Percentile(nil, 0.5); got != 0 {
		t.Errorf("benchkit.Percentile(nil) = %v, want 0", got)
	}
}

func TestMedianUnsorted(t *testing.T) {
	if got := median([]time.Duration{9, 1, 5, 3, 7}); got != 5 {
		t.Errorf("median = %v, want 5", got)
	}
	if got := medianInt([]int64{4, 1, 3}); got != 3 {
		t.Errorf("medianInt = %v, want 3", got)
	}
}
