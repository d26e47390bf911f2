package invalid

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestIs(t *testing.T) {
	base := errors.New("state: \"X\" is not a TES state")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"transient", context.DeadlineExceeded, false},
		{"Errorf", Errorf("page_size: %q is not a positive integer", "0"), true},
		{"Wrap", Wrap(base), true},
		{"wrapped again", fmt.Errorf("task t: %w", Wrap(base)), true},
		{"Wrap of nil", Wrap(nil), false},
	}
	for _, c := range cases {
		if got := Is(c.err); got != c.want {
			t.Errorf("%s: Is(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	if !errors.Is(Wrap(base), base) {
		t.Error("Wrap hides the error it wraps from errors.Is")
	}
	if got := Errorf("x: %w", base).Error(); got != "x: "+base.Error() {
		t.Errorf("Errorf message %q", got)
	}
	if e := Wrap(Wrap(base)); e.(*Error).Err != base {
		t.Error("Wrap of an Error wraps it a second time")
	}
}
