// Command probe tries to reach each address it is given and prints one
// JSON line per attempt: whether anything answered (any HTTP status, or a
// TCP connection) or why not. The trust boundaries' test runs it as a TES
// executor and as a pod outside the tasks' namespace, so that "blocked"
// means the policy, not a dead address.
//
//	probe [-rounds N] [-pause D] [-timeout D] KIND=TARGET...
//
// KIND is post (an HTTP POST of a CloudEvent in binary mode, type
// task.cancelled), get (an HTTP GET; https is not verified) or tcp (a
// connection to host:port).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Result is one attempt.
type Result struct {
	Kind     string `json:"kind"`
	Target   string `json:"target"`
	Round    int    `json:"round"`
	Answered bool   `json:"answered"`
	Status   int    `json:"status,omitempty"`
	Error    string `json:"error,omitempty"`
}

func main() {
	rounds := flag.Int("rounds", 3, "attempts per target")
	timeout := flag.Duration("timeout", 3*time.Second, "time allowed per attempt")
	pause := flag.Duration("pause", 0, "time between rounds")
	flag.Parse()
	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the answer matters, not who gives it
			// Each attempt a new connection: one that is open stays open
			// whatever a NetworkPolicy says later.
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	enc := json.NewEncoder(os.Stdout)
	bad := 0
	for r := 1; r <= *rounds; r++ {
		if r > 1 {
			time.Sleep(*pause)
		}
		for _, arg := range flag.Args() {
			kind, target, ok := strings.Cut(arg, "=")
			res := Result{Kind: kind, Target: target, Round: r}
			if !ok {
				fmt.Fprintf(os.Stderr, "probe: %q: want KIND=TARGET\n", arg)
				os.Exit(2)
			}
			switch kind {
			case "post", "get":
				res.Status, res.Error = request(client, kind, target)
			case "tcp":
				c, err := net.DialTimeout("tcp", target, *timeout)
				if err == nil {
					c.Close()
				} else {
					res.Error = err.Error()
				}
			default:
				fmt.Fprintf(os.Stderr, "probe: %q: KIND is post, get or tcp\n", kind)
				os.Exit(2)
			}
			res.Answered = res.Error == ""
			if err := enc.Encode(res); err != nil {
				bad++
			}
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func request(client *http.Client, kind, target string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), client.Timeout)
	defer cancel()
	method, body := http.MethodGet, []byte(nil)
	if kind == "post" {
		method, body = http.MethodPost, []byte(`{"task":"task-00000000"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if kind == "post" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", fmt.Sprintf("probe-%d", time.Now().UnixNano()))
		req.Header.Set("Ce-Source", "probe")
		req.Header.Set("Ce-Type", "task.cancelled")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode, ""
}
