// Package apicheck holds the TES API's answers to its OpenAPI document
// (tes/openapi, as the service serves it) with kin-openapi: a round tripper
// for test clients validates every answer they receive.
package apicheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/elixir-cloud-aai/tesk-knative/tes/openapi"
)

// Checker validates answers against the document.
type Checker struct {
	Doc    *openapi3.T
	router routers.Router

	mu     sync.Mutex
	counts map[string]int
}

// Load reads and validates the document.
func Load() (*Checker, error) {
	raw, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI document does not load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Checker{Doc: doc, router: r, counts: map[string]int{}}, nil
}

// Check validates one answer to a request: its route and method must be in
// the document, and its status, headers and body as the operation declares
// them.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: not in the OpenAPI document: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true},
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		return fmt.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %v\nbody: %.2000s", req.Method, req.URL.RequestURI(), status, err, body)
	}
	c.mu.Lock()
	c.counts[fmt.Sprintf("%s %d", route.Operation.OperationID, status)]++
	c.mu.Unlock()
	return nil
}

// Counts are the answers validated so far, by operation and status.
func (c *Checker) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Summary is the counts as one line, sorted.
func (c *Checker) Summary() string {
	counts := c.Counts()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k, counts[k])
	}
	return b.String()
}

// Transport validates every answer that passes through it; report gets
// each one that the document does not allow (e.g. t.Errorf).
func (c *Checker) Transport(base http.RoundTripper, report func(error)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, base: base, report: report}
}

type transport struct {
	c      *Checker
	base   http.RoundTripper
	report func(error)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	// A stream of logs or an answer to something else than the API passes
	// unchecked.
	if !strings.Contains(req.URL.Path, "/ga4gh/tes/v1/") {
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	if err := t.c.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.report(err)
	}
	return resp, nil
}

// Handler validates every answer next gives under the API's base path
// before it is sent, reporting those that the document does not allow:
// put in front of a TES API, it checks the answers whoever the client is (a
// test, the dashboard in a browser, tesctl).
func (c *Checker) Handler(next http.Handler, report func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/ga4gh/tes/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if err := c.Check(r, rec.status, rec.header, rec.body.Bytes()); err != nil {
			report(err)
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	})
}

type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// Flush lets handlers that flush write through the recorder.
func (r *recorder) Flush() {}
