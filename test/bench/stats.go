package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
)

// sortedDurations returns a sorted copy.
func sortedDurations(ds []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// percentileSamples is the fewest samples whose percentiles are given;
// fewer are given as their minimum, median and maximum (a p99 of fewer
// samples is their maximum).
const percentileSamples = 100

// pct describes a set of durations with its count: percentiles from
// percentileSamples up, below that the minimum, median and maximum.
func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := sortedDurations(ds)
	r := func(d time.Duration) string { return fmt.Sprintf("%.1fms", ms(d)) }
	if len(s) < percentileSamples {
		return fmt.Sprintf("n=%d min %s median %s max %s", len(s), r(s[0]), r(benchkit.Percentile(s, 0.5)), r(s[len(s)-1]))
	}
	return fmt.Sprintf("n=%d p50 %s p90 %s p99 %s max %s", len(s), r(benchkit.Percentile(s, 0.5)), r(benchkit.Percentile(s, 0.9)), r(benchkit.Percentile(s, 0.99)), r(s[len(s)-1]))
}

func ipct(v []int64) string {
	if len(v) == 0 {
		return "no samples"
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("median %d max %d", s[len(s)/2], s[len(s)-1])
}

func median(ds []time.Duration) time.Duration {
	return benchkit.Percentile(sortedDurations(ds), 0.5)
}

func medianInt(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// round2 rounds to two decimals, as the summary gives API requests per
// event.
func round2(v float64) float64 { return math.Round(v*100) / 100 }
