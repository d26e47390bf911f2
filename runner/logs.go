package runner

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// maxLogReadBytes bounds what one read of a stream transfers. The kubelet
// serves only a container's current log file (10 MiB unless the node's
// containerLogMaxSize says otherwise), so a stream is normally read whole
// and its end kept.
const maxLogReadBytes = 64 << 20

// ExecutorLog reads what an executor's container wrote, as TES reports it:
// the ends of its stdout and of its stderr, each at most limit bytes. The
// streams are read apart where the cluster serves them apart (the
// PodLogsQuerySplitStreams feature of the API server and the kubelet), each
// read by streaming with only its end kept; elsewhere stdout holds the end
// of both streams as the container's log interleaves them, and stderr is
// empty. split says which it was.
func ExecutorLog(ctx context.Context, client kubernetes.Interface, ns, pod, container string, limit int) (stdout, stderr string, split bool, err error) {
	if limit <= 0 {
		limit = steps.DefaultLogTailBytes
	}
	if time.Now().UnixNano() >= splitRefusedUntil.Load() {
		stdout, err = readLogTail(ctx, client, ns, pod, &corev1.PodLogOptions{Container: container, Stream: ptrTo(corev1.LogStreamStdout)}, limit)
		if err == nil {
			stderr, err = readLogTail(ctx, client, ns, pod, &corev1.PodLogOptions{Container: container, Stream: ptrTo(corev1.LogStreamStderr)}, limit)
		}
		switch {
		case err == nil && (stdout != stderr || stdout == ""):
			return stdout, stderr, true, nil
		case err == nil:
			// The same bytes on both streams: a node that ignores the
			// stream asked for (kwok, some virtual kubelets) serves the
			// whole log each time. The whole log then equals each.
			all, err := readLogTail(ctx, client, ns, pod, &corev1.PodLogOptions{Container: container}, limit)
			if err != nil {
				return "", "", false, err
			}
			if all != stdout {
				return stdout, stderr, true, nil
			}
			return stdout, "", false, nil
		case !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
			return "", "", false, err
		}
		// Refused: the API server or the kubelet does not serve the
		// streams apart, or the container has no log yet (a 400 too).
		// The interleaved log tells which.
		stdout, err2 := interleavedLog(ctx, client, ns, pod, container, limit)
		if err2 != nil {
			return "", "", false, err
		}
		splitRefusedUntil.Store(time.Now().Add(splitRetry).UnixNano())
		return stdout, "", false, nil
	}
	stdout, err = interleavedLog(ctx, client, ns, pod, container, limit)
	return stdout, "", false, err
}

// LiveExecutorLog is the end of a running executor's log at a cost bounded
// by limit, not by the log's length: the end of the log, both streams
// together, is read first by its last lines; a log shorter than that (the
// whole log came, under limit bytes) is then read as ExecutorLog reads it,
// its streams apart where the cluster serves them so, which costs as
// little. A longer log is answered with its end, both streams together, as
// stdout: reading a stream apart would read it whole (the API server takes
// no last lines of one stream).
func LiveExecutorLog(ctx context.Context, client kubernetes.Interface, ns, pod, container string, limit int) (stdout, stderr string, err error) {
	if limit <= 0 {
		limit = steps.DefaultLogTailBytes
	}
	lines := int64(limit/16 + 1)
	var c lineCounter
	tail, err := readLogTailCounting(ctx, client, ns, pod, &corev1.PodLogOptions{Container: container, TailLines: &lines}, limit, &c)
	if err != nil {
		return "", "", err
	}
	if c.lines() < lines && c.bytes < int64(limit) {
		stdout, stderr, _, err = ExecutorLog(ctx, client, ns, pod, container, limit)
		return stdout, stderr, err
	}
	return tail, "", nil
}

// lineCounter counts the bytes and lines written through it.
type lineCounter struct {
	bytes, newlines int64
	last            byte
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	c.newlines += int64(bytes.Count(p, []byte{'\n'}))
	if len(p) > 0 {
		c.last = p[len(p)-1]
	}
	return len(p), nil
}

// lines is how many lines were written, a last one without its newline
// included.
func (c *lineCounter) lines() int64 {
	if c.bytes > 0 && c.last != '\n' {
		return c.newlines + 1
	}
	return c.newlines
}

// interleavedLog is the end of a container's log, both streams as the log
// interleaves them: asked for by its last lines and bounded again in bytes,
// as the API server cannot cut a log from its end by bytes.
func interleavedLog(ctx context.Context, client kubernetes.Interface, ns, pod, container string, limit int) (string, error) {
	lines := int64(limit/16 + 1)
	return readLogTail(ctx, client, ns, pod, &corev1.PodLogOptions{Container: container, TailLines: &lines}, limit)
}

// splitRefusedUntil is when the streams are next asked for apart, after the
// cluster refused to serve one stream of a log it served whole
// (nanoseconds since 1970; 0: ask).
var splitRefusedUntil atomic.Int64

// splitRetry is how long the streams are not asked for apart after a
// refusal: a cluster whose API server and kubelets are upgraded serves
// them apart without the service restarting.
const splitRetry = 10 * time.Minute

// ptrTo points at a copy of v.
func ptrTo[T any](v T) *T { return &v }

// readLogTail streams a container's log and keeps its last limit bytes.
func readLogTail(ctx context.Context, client kubernetes.Interface, ns, pod string, opts *corev1.PodLogOptions, limit int) (string, error) {
	return readLogTailCounting(ctx, client, ns, pod, opts, limit, io.Discard)
}

// readLogTailCounting is readLogTail that also writes all it reads to w.
func readLogTailCounting(ctx context.Context, client kubernetes.Interface, ns, pod string, opts *corev1.PodLogOptions, limit int, w io.Writer) (string, error) {
	opts.LimitBytes = ptrTo(int64(maxLogReadBytes))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rc, err := client.CoreV1().Pods(ns).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	t := &steps.TailBuffer{Limit: limit}
	if _, err := io.Copy(io.MultiWriter(t, w), rc); err != nil {
		return "", err
	}
	return t.String(), nil
}
