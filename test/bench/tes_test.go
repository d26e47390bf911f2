package main

import (
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// The TES API of the benchmark bounds each user's unfinished tasks, as a
// deployed one does (so that a create makes the same requests), and admits
// the benchmark's creates.
func TestBenchBacklog(t *testing.T) {
	def := tes.DefaultBacklog()
	for _, creates := range []int{1, 150, tesCreates, 5000} {
		b := benchBacklog(creates)
		if b.Tasks <= 0 || b.Bytes <= 0 {
			t.Errorf("%d creates: %+v, want both bounds on, as deployed", creates, b)
		}
		if b.Tasks <= creates || b.Bytes < int64(creates)*(64<<10) {
			t.Errorf("%d creates: %+v does not admit them all", creates, b)
		}
		if b.Tasks < def.Tasks || b.Bytes < def.Bytes {
			t.Errorf("%d creates: %+v, below the default %+v", creates, b, def)
		}
	}
}
