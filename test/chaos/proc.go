package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// service is a binary of the product (the handler or the TES API) that the
// run starts, stops and may kill and restart on the same port.
type service struct {
	bin   string
	args  []string
	env   []string
	url   string
	ready string // readiness path (default /readyz)
	log   io.Writer
	cmd   *exec.Cmd
	exit  chan struct{}
}

func (p *service) start(ctx context.Context) error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	p.cmd, p.exit = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.exit) }()
	ready := p.ready
	if ready == "" {
		ready = "/readyz"
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.url + ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exit:
			return fmt.Errorf("%s exited before it was ready (%s)", p.bin, cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: not ready at %s within 30 s", p.bin, p.url+ready)
}

// stop sends SIGTERM (the process finishes what is in flight) and, if it has
// not exited after 30 s, SIGKILL.
func (p *service) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exit:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exit
	}
	p.cmd = nil
}

// kill SIGKILLs the process, as a node failure or an OOM kill would, and
// starts it again after a second, as Knative would schedule a new pod.
func (p *service) kill(ctx context.Context) error {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		<-p.exit
		p.cmd = nil
	}
	time.Sleep(time.Second)
	return p.start(ctx)
}

// tesCall does one TES API request and decodes a 200 answer into out. A
// refused connection, 429 and 503 are retried with bounded backoff (the
// request was not served); any other failure is returned.
func (r *run) tesCall(ctx context.Context, method, url string, body []byte, out any) error {
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		retry := false
		if err != nil {
			retry = errors.Is(err, syscall.ECONNREFUSED)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				if out == nil {
					return nil
				}
				return json.Unmarshal(b, out)
			case http.StatusTooManyRequests, http.StatusServiceUnavailable:
				retry = true
			}
			err = fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(b))
		}
		if !retry || attempt == 8 {
			return err
		}
		r.retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// submit creates the task through the TES API and returns its id.
func (r *run) submit(ctx context.Context, tesURL string, t Task) (string, error) {
	body, err := json.Marshal(t.Spec)
	if err != nil {
		return "", err
	}
	var created tesv1.CreateTaskResponse
	if err := r.tesCall(ctx, http.MethodPost, tesURL+tes.BasePath+"/tasks", body, &created); err != nil {
		return "", fmt.Errorf("submit %s: %w", t.Name, err)
	}
	if created.ID == "" {
		return "", fmt.Errorf("submit %s: no id in the answer", t.Name)
	}
	return created.ID, nil
}

// cancelWhenRunning waits until the TES API reports the task RUNNING and
// cancels it. A cancelled task's last executor runs until stopped, so it
// cannot end first.
func (r *run) cancelWhenRunning(ctx context.Context, tesURL, id string, deadline time.Time) error {
	for {
		var v struct {
			State string `json:"state"`
		}
		if err := r.tesCall(ctx, http.MethodGet, tesURL+tes.BasePath+"/tasks/"+id+"?view=MINIMAL", nil, &v); err != nil {
			return err
		}
		switch v.State {
		case "RUNNING":
			return r.tesCall(ctx, http.MethodPost, tesURL+tes.BasePath+"/tasks/"+id+":cancel", []byte(`{}`), nil)
		case "QUEUED", "INITIALIZING", "UNKNOWN", "":
		default:
			return fmt.Errorf("task %s ended %s before it was cancelled", id, v.State)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s not RUNNING by the run's timeout", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
