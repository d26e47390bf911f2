package knative

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TES is a client of the deployed TES API, as a user with a token.
type TES struct {
	Base  string // the TES API's URL and tes.BasePath
	Token string
	HTTP  *http.Client
}

// TES is a client of the TES API of config/knative for user sub.
func (e *Env) TES(ctx context.Context, sub string) (*TES, error) {
	u, err := e.URL(ctx, ServiceGVR.Resource, "tesk-tes")
	if err != nil {
		return nil, err
	}
	return &TES{Base: u + tes.BasePath, Token: e.Issuer.Token(sub), HTTP: e.HTTPClient()}, nil
}

func (t *TES) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.Base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Create submits a task and returns its ID.
func (t *TES) Create(ctx context.Context, task *tesv1.Task) (string, error) {
	var created tesv1.CreateTaskResponse
	if err := t.do(ctx, http.MethodPost, "/tasks", task, &created); err != nil {
		return "", err
	}
	return created.ID, nil
}

// Get reads a task in a view (MINIMAL, BASIC or FULL).
func (t *TES) Get(ctx context.Context, id, view string) (*tesv1.Task, error) {
	var v tesv1.Task
	return &v, t.do(ctx, http.MethodGet, "/tasks/"+id+"?view="+view, nil, &v)
}

// ServiceInfo reads GET /service-info.
func (t *TES) ServiceInfo(ctx context.Context) (*tesv1.ServiceInfo, error) {
	var v tesv1.ServiceInfo
	return &v, t.do(ctx, http.MethodGet, "/service-info", nil, &v)
}

// Cancel cancels a task.
func (t *TES) Cancel(ctx context.Context, id string) error {
	return t.do(ctx, http.MethodPost, "/tasks/"+id+":cancel", nil, nil)
}

// Events reads the task's story (GET /tasks/{id}/events).
func (t *TES) Events(ctx context.Context, id string) (*tes.TaskKubeEvents, error) {
	var v tes.TaskKubeEvents
	return &v, t.do(ctx, http.MethodGet, "/tasks/"+id+"/events", nil, &v)
}

// Wait polls the task until its state is final (or want, if given) and
// returns it in the FULL view; each new state goes to seen, if set.
func (t *TES) Wait(ctx context.Context, id string, timeout time.Duration, seen func(state string)) (*tesv1.Task, error) {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		v, err := t.Get(ctx, id, "MINIMAL")
		if err == nil && v.State != last {
			last = v.State
			if seen != nil {
				seen(last)
			}
		}
		if err == nil && tesv1.IsFinal(v.State) {
			return t.Get(ctx, id, "FULL")
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("task %s: %s after %s (last error: %v)", id, last, timeout, err)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// RepeatTask is a task of n executors on ubuntu that each run command.
func RepeatTask(name string, n int, command ...string) *tesv1.Task {
	t := &tesv1.Task{Name: name, Resources: smallTask()}
	for range n {
		t.Executors = append(t.Executors, tesv1.Executor{Image: "ubuntu:24.04", Command: command})
	}
	return t
}

// smallTask is what the tests' tasks ask for: the node has 2 cores.
func smallTask() *tesv1.Resources { return &tesv1.Resources{CPUCores: 1, RAMGB: 0.25, DiskGB: 0.1} }

// TwoStepTask is the tests' task: an input, two executors on ubuntu (the
// busybox stand-in the node holds), an output to S3 at Bucket/key.
func TwoStepTask(name, key string) *tesv1.Task {
	return &tesv1.Task{
		Name:    name,
		Inputs:  []tesv1.Input{{Name: "greeting", Path: "/data/in/greeting.txt", Type: "FILE", Content: "Hello from TES on Knative\n"}},
		Outputs: []tesv1.Output{{Name: "result", Path: "/data/out/result.txt", Type: "FILE", URL: "s3://" + Bucket + "/" + key}},
		Executors: []tesv1.Executor{
			{Image: "ubuntu:24.04", Command: []string{"tr", "a-z", "A-Z"}, Stdin: "/data/in/greeting.txt", Stdout: "/data/out/result.txt"},
			{Image: "ubuntu:24.04", Command: []string{"cat", "/data/out/result.txt"}},
		},
		Resources: smallTask(),
	}
}
