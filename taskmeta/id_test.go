package taskmeta

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewIDSortsNewestFirst(t *testing.T) {
	shape := regexp.MustCompile(`^task-[0-9a-v]{9}[0-9a-f]{8}$`)
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var ids []string
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, 24 * time.Hour, 365 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
		id := NewID(t0.Add(d))
		if !shape.MatchString(id) {
			t.Fatalf("%s is not of the id's shape", id)
		}
		if got, ok := IDTime(id); !ok || !got.Equal(t0.Add(d)) {
			t.Errorf("IDTime(%s) = %v %v, want %v", id, got, ok, t0.Add(d))
		}
		ids = append(ids, id)
	}
	// Newer ids sort first, as the API server lists names.
	if !slices.IsSortedFunc(ids, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("ids drawn later do not sort first: %v", ids)
	}
	// Far ends: the epoch and the last millisecond still have 9 digits.
	for _, at := range []time.Time{time.UnixMilli(0), time.UnixMilli(idTimeEnd)} {
		if id := NewID(at); !shape.MatchString(id) {
			t.Errorf("NewID(%v) = %s", at, id)
		}
	}
}

func TestIDTimeRefusesOtherIDs(t *testing.T) {
	for _, id := range []string{"", "task-1a2b3c4d", "task-0123456789abcdef", "task-uvuvuvuvuxyzxyzxy", "task-0000000000000000g",
		"task-ABCDEFGHI01234567", "job-0uvuvuvuv01234567", "task-wvuvuvuvu01234567"} {
		if got, ok := IDTime(id); ok {
			t.Errorf("IDTime(%q) = %v, want no time", id, got)
		}
	}
}
