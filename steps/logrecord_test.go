package steps

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func TestTailBuffer(t *testing.T) {
	cases := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"nothing", 4, nil, ""},
		{"under the limit", 8, []string{"ab", "cd"}, "abcd"},
		{"one write over", 4, []string{"abcdefgh"}, "efgh"},
		{"many small writes", 4, []string{"a", "b", "c", "d", "e", "f", "g"}, "defg"},
		{"a write that fills it", 3, []string{"ab", "cdef", "g"}, "efg"},
		{"a character cut by the start is left out", 4, []string{"aé€x"}, "€x"},
	}
	for _, c := range cases {
		b := &TailBuffer{Limit: c.limit}
		for _, w := range c.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: Write = %d, %v", c.name, n, err)
			}
			if len(b.buf) > 2*c.limit {
				t.Fatalf("%s: holds %d bytes, limit %d", c.name, len(b.buf), c.limit)
			}
		}
		if got := b.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzTailBuffer: whatever is written, the buffer holds at most twice its
// limit and gives the written bytes' end (as valid UTF-8).
func FuzzTailBuffer(f *testing.F) {
	f.Add([]byte("hello, world"), 5, 3)
	f.Add([]byte("aé€x"), 2, 1)
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk int) {
		if limit < 1 || limit > 1<<12 || chunk < 1 {
			return
		}
		b := &TailBuffer{Limit: limit}
		for i := 0; i < len(data); i += chunk {
			_, _ = b.Write(data[i:min(i+chunk, len(data))])
			if len(b.buf) > 2*limit {
				t.Fatalf("holds %d bytes, limit %d", len(b.buf), limit)
			}
		}
		got := b.String()
		end := data[len(data)-min(limit, len(data)):]
		if !utf8.ValidString(got) || len(got) > limit {
			t.Fatalf("%q: not valid UTF-8 or over %d bytes", got, limit)
		}
		if utf8.Valid(end) && !strings.HasSuffix(string(end), got) {
			t.Fatalf("%q is not the end of %q", got, end)
		}
	})
}

func TestEncodeRecordFits(t *testing.T) {
	big := strings.Repeat("\x01", 100000) // 6 bytes each in JSON
	l := tesv1.ExecutorLog{ExitCode: 1, Stdout: big + "out-end", Stderr: "err-end"}
	v := EncodeRecord(l, MaxRecordedLogBytes)
	if len(v) > MaxRecordedLogBytes {
		t.Fatalf("record of %d bytes, max %d", len(v), MaxRecordedLogBytes)
	}
	var back tesv1.ExecutorLog
	if err := json.Unmarshal([]byte(v), &back); err != nil {
		t.Fatal(err)
	}
	if back.ExitCode != 1 || !strings.HasSuffix(back.Stdout, "out-end") || back.Stderr != "err-end" {
		t.Errorf("record %d, stdout ends %q, stderr %q: the ends must be kept", back.ExitCode, back.Stdout[max(0, len(back.Stdout)-7):], back.Stderr)
	}
	small := tesv1.ExecutorLog{ExitCode: 0, Stdout: "hi"}
	if got := EncodeRecord(small, MaxRecordedLogBytes); got != `{"stdout":"hi","exit_code":0}` {
		t.Errorf("small record %s", got)
	}
}
