package steps

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Bounds of the executors' logs.
const (
	// DefaultLogTailBytes is how much of the end of each of an executor's
	// streams is kept (TES_LOG_TAIL_BYTES).
	DefaultLogTailBytes = 64 << 10
	// MaxLogTailBytes bounds TES_LOG_TAIL_BYTES.
	MaxLogTailBytes = 1 << 20
	// MaxRecordedLogBytes bounds the executor's record on its Job: with the
	// Job's other annotations it must stay under the API server's 256 KiB.
	MaxRecordedLogBytes = 200000
)

// TailBuffer keeps the last Limit bytes written to it, holding at most twice
// that however much is written.
type TailBuffer struct {
	Limit int
	buf   []byte
}

// Write keeps p's end.
func (t *TailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.Limit {
		t.buf = append(t.buf[:0], p[len(p)-t.Limit:]...)
		return n, nil
	}
	if len(t.buf)+len(p) > 2*t.Limit {
		keep := t.Limit - len(p)
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is the kept end, at most Limit bytes of valid UTF-8 (a character cut
// by the start is left out).
func (t *TailBuffer) String() string {
	b := t.buf
	if len(b) > t.Limit {
		b = b[len(b)-t.Limit:]
	}
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "")
}

// RecordedLog is an executor's log as the step that saw it end recorded it
// on its Job; false if none was.
func RecordedLog(j *batchv1.Job) (tesv1.ExecutorLog, bool) {
	var l tesv1.ExecutorLog
	v, ok := j.Annotations[taskmeta.AnnotationExecutorLog]
	if !ok || json.Unmarshal([]byte(v), &l) != nil {
		return tesv1.ExecutorLog{}, false
	}
	return l, true
}

// EncodeRecord is the record's annotation value, at most max bytes: the
// starts of the streams are cut until it fits.
func EncodeRecord(l tesv1.ExecutorLog, limit int) string {
	for {
		b, _ := json.Marshal(l)
		if len(b) <= limit || (l.Stdout == "" && l.Stderr == "") {
			return string(b)
		}
		// Cut a quarter of the longer stream from its start.
		s := &l.Stdout
		if len(l.Stderr) > len(l.Stdout) {
			s = &l.Stderr
		}
		cut := max(len(*s)/4, 1)
		t := &TailBuffer{Limit: len(*s) - cut}
		_, _ = t.Write([]byte(*s))
		*s = t.String()
	}
}

// UnknownExitCode is the exit code reported for an executor whose container
// never reported one: it never started (its image could not be pulled, its
// pod was never scheduled), or its pod was deleted before the service read
// it.
const UnknownExitCode = -1

func DescribeLog(l tesv1.ExecutorLog) string {
	return fmt.Sprintf("exit code %d, %d bytes of stdout, %d of stderr", l.ExitCode, len(l.Stdout), len(l.Stderr))
}
