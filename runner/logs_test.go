package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// logServer is an API server's pod log endpoint: it serves the streams apart
// or, split false, refuses a stream as an API server without
// PodLogsQuerySplitStreams does; ignoring, it serves the whole log whatever
// stream is asked for, as kwok does.
func logServer(t *testing.T, split bool, stdout, stderr string, ignoring ...bool) (kubernetes.Interface, *[]string) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/ns/pods/waiting/log" {
			// A container that has not started: no log, whatever is asked.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest,
				Message: `container "executor" in pod "waiting" is waiting to start: ContainerCreating`})
			return
		}
		if r.URL.Path != "/api/v1/namespaces/ns/pods/p/log" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		mu.Lock()
		asked = append(asked, q.Encode())
		mu.Unlock()
		stream := q.Get("stream")
		if len(ignoring) > 0 && ignoring[0] {
			stream = ""
		}
		switch {
		case stream != "" && !split:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
				Message: `PodLogOptions "p" is invalid: stream: Forbidden: may not be specified`})
		case stream == "Stdout":
			fmt.Fprint(w, stdout)
		case stream == "Stderr":
			fmt.Fprint(w, stderr)
		default:
			fmt.Fprint(w, stdout+stderr)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, &asked
}

func TestExecutorLogStreams(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { splitRefusedUntil.Store(0) })

	splitRefusedUntil.Store(0)
	c, _ := logServer(t, true, strings.Repeat("o", 100)+"OUT", "ERR")
	out, errs, split, err := ExecutorLog(ctx, c, "ns", "p", "executor", 10)
	if err != nil || !split || out != "ooooooo"+"OUT" || errs != "ERR" {
		t.Errorf("split streams: %q %q %v %v", out, errs, split, err)
	}

	// The same line on both streams is told from a node that ignores the
	// stream asked for.
	c, _ = logServer(t, true, "same\n", "same\n")
	if out, errs, split, err := ExecutorLog(ctx, c, "ns", "p", "executor", 1024); err != nil || !split || out != "same\n" || errs != "same\n" {
		t.Errorf("equal streams: %q %q %v %v", out, errs, split, err)
	}
	c, _ = logServer(t, true, "out\n", "err\n", true)
	if out, errs, split, err := ExecutorLog(ctx, c, "ns", "p", "executor", 1024); err != nil || split || out != "out\nerr\n" || errs != "" {
		t.Errorf("a node that ignores the stream: %q %q %v %v", out, errs, split, err)
	}

	c, asked := logServer(t, false, "out\n", "err\n")
	out, errs, split, err = ExecutorLog(ctx, c, "ns", "p", "executor", 1024)
	if err != nil || split || out != "out\nerr\n" || errs != "" {
		t.Errorf("interleaved: %q %q %v %v", out, errs, split, err)
	}
	// Once refused, the streams are not asked for apart again.
	*asked = nil
	if _, _, split, err = ExecutorLog(ctx, c, "ns", "p", "executor", 1024); err != nil || split || len(*asked) != 1 || strings.Contains((*asked)[0], "stream") {
		t.Errorf("after a refusal: asked %v, split %v, %v", *asked, split, err)
	}
	if !strings.Contains((*asked)[0], "tailLines=65") {
		t.Errorf("the interleaved log is asked for by its last lines: %v", *asked)
	}

	splitRefusedUntil.Store(0)
	_, _, _, err = ExecutorLog(ctx, c, "ns", "gone", "executor", 1024)
	if err == nil {
		t.Error("a pod that is not there: no error")
	}
	if _, _, _, err = ExecutorLog(ctx, c, "ns", "waiting", "executor", 1024); err == nil {
		t.Error("a container that has not started: no error")
	}
	if splitRefusedUntil.Load() != 0 {
		t.Error("a missing pod or a container without a log turned the split streams off")
	}
}

// A running executor's log is read at a cost bounded by the tail's bytes:
// a short log is read as ExecutorLog reads it, its streams apart; a long
// one only by its last lines, its end answered as stdout, both streams
// together; neither is read whole. The server honours tailLines as a
// kubelet does, and counts the bytes it serves.
func TestLiveExecutorLogReadsNoMoreThanItsTail(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { splitRefusedUntil.Store(0) })
	serve := func(outLines, errLines []string) (kubernetes.Interface, *int) {
		served := 0
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			var lines []string
			switch q.Get("stream") {
			case "Stdout":
				lines = outLines
			case "Stderr":
				lines = errLines
			default:
				lines = append(append([]string{}, outLines...), errLines...)
			}
			if k, err := strconv.Atoi(q.Get("tailLines")); err == nil {
				lines = lines[max(0, len(lines)-k):]
			}
			body := strings.Join(lines, "")
			mu.Lock()
			served += len(body)
			mu.Unlock()
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return c, &served
	}
	const limit = 1024

	splitRefusedUntil.Store(0)
	c, served := serve([]string{"out 1\n", "out 2\n"}, []string{"err 1\n"})
	out, errs, err := LiveExecutorLog(ctx, c, "ns", "p", "executor", limit)
	if err != nil || out != "out 1\nout 2\n" || errs != "err 1\n" {
		t.Errorf("a short log: %q %q %v; want its streams apart", out, errs, err)
	}

	var long []string
	for i := range 200_000 {
		long = append(long, fmt.Sprintf("line %06d of a long log\n", i))
	}
	c, served = serve(long, []string{"the last error\n"})
	out, errs, err = LiveExecutorLog(ctx, c, "ns", "p", "executor", limit)
	if err != nil || len(out) > limit || !strings.HasSuffix(out, "line 199999 of a long log\nthe last error\n") || errs != "" {
		t.Errorf("a long log: %d bytes ending %q, stderr %q, %v; want its end as stdout", len(out), out[max(0, len(out)-60):], errs, err)
	}
	if whole := 200_000 * len(long[0]); *served > 8*limit {
		t.Errorf("served %d bytes for a tail of %d (the log holds %d)", *served, limit, whole)
	}
}
