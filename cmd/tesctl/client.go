package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// basePath is where a TES API lives under its URL.
const basePath = "/ga4gh/tes/v1"

// client speaks to one TES API.
type client struct {
	base  string // ends in /ga4gh/tes/v1
	token string
	http  *http.Client
}

// apiError is an answer other than 200.
type apiError struct {
	Status  int
	Message string
}

// Error is the answer's status and the API's message.
func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// do sends a request to the API's path, with body ([]byte as it is, any
// other value as JSON; nil: none), and reads the JSON answer into out (nil:
// the answer is not read). An answer other than 200 is an *apiError.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			r = bytes.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				return err
			}
			r = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &apiError{Status: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %v", method, path, err)
	}
	return nil
}

// get reads a task in a view (MINIMAL, BASIC or FULL).
func (c *client) get(ctx context.Context, id, view string) (*task, error) {
	var t task
	err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id)+"?view="+view, nil, &t)
	return &t, err
}

// baseURL is the API's base from what the user gave: a server
// (http://host:8081) or the API itself (.../ga4gh/tes/v1).
func baseURL(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if s == "" {
		return "", errors.New("no TES API: give --url or set TES_URL (e.g. http://localhost:8081)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q is not an http(s) URL", s)
	}
	if !strings.HasSuffix(u.Path, basePath) {
		s += basePath
	}
	return s, nil
}
