package openapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/openapi"
	"github.com/elixir-cloud-aai/tesk-knative/test/apicheck"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func server(t *testing.T) (*httptest.Server, *echo.Echo) {
	t.Helper()
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tes"
	s := &tes.Server{Client: fake.NewSimpleClientset(), Log: zap.NewNop().Sugar(),
		Config: tes.Config{Namespace: "tes", Steps: cfg,
			Info: tesv1.ServiceInfo{ID: "org.example.tes", Name: "TES", Organization: tesv1.Organization{Name: "Example", URL: "https://example.org"}, Version: "1.0"}}}
	e := s.Echo()
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	return hs, e
}

// The document loads and is valid OpenAPI 3 (kin-openapi's checks, its
// examples among them).
func TestDocumentIsValid(t *testing.T) {
	c, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Doc.Info.Version; got != "1.1.0" {
		t.Errorf("version %q", got)
	}
}

// Every route the TES API serves under its base path is in the document,
// and every operation of the document is served.
func TestDocumentMatchesTheRoutes(t *testing.T) {
	c, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	_, e := server(t)
	served := map[string]bool{}
	for _, r := range e.Routes() {
		path, ok := strings.CutPrefix(r.Path, tes.BasePath)
		if !ok || r.Method == echo.RouteNotFound || strings.HasSuffix(path, "*") || path == "" {
			continue
		}
		// "{id}:cancel" is one path segment: echo's /tasks/:ref.
		if path == "/tasks/:ref" && r.Method == http.MethodPost {
			path = "/tasks/{id}:cancel"
		}
		path = strings.ReplaceAll(path, ":id", "{id}")
		served[r.Method+" "+path] = true
	}
	documented := map[string]bool{}
	for path, item := range c.Doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	if len(served) < 7 {
		t.Fatalf("found only %d routes: %v", len(served), served)
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("%s is served but not in the OpenAPI document", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("%s is in the OpenAPI document but not served", r)
		}
	}
}

// The document is served at /ga4gh/tes/v1/openapi.json as JSON, and the
// answers of a server on a fake cluster fit it: each operation, with its
// errors.
func TestServedAndAnswersFit(t *testing.T) {
	c, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := server(t)
	var failures []string
	client := &http.Client{Transport: c.Transport(nil, func(err error) { failures = append(failures, err.Error()) })}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+tes.BasePath+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do(http.MethodGet, openapi.Path, "")
	want, _ := openapi.JSON()
	if code != http.StatusOK || body != string(want) {
		t.Errorf("GET %s: %d, %d bytes, want the document", openapi.Path, code, len(body))
	}
	do(http.MethodGet, "/service-info", "")
	_, created := do(http.MethodPost, "/tasks", `{"name":"a","tags":{"k":"v"},"inputs":[{"path":"/data/in","content":"x"}],
		"outputs":[{"path":"/data/out","url":"s3://b/out"}],"executors":[{"image":"alpine","command":["true"],"env":{"A":"1"}}],
		"resources":{"cpu_cores":1,"ram_gb":1.5,"backend_parameters":{"x":"y"}}}`)
	id := strings.Split(created, `"`)[3]
	for _, v := range []string{"MINIMAL", "BASIC", "FULL"} {
		do(http.MethodGet, "/tasks/"+id+"?view="+v, "")
	}
	do(http.MethodGet, "/tasks/"+id+"/events", "")
	do(http.MethodPost, "/tasks/"+id+":cancel", "")
	// Errors: 400, 404.
	do(http.MethodPost, "/tasks", `{"executors":[]}`)
	do(http.MethodGet, "/tasks/"+id+"?view=ALL", "")
	do(http.MethodGet, "/tasks/task-ffffffff", "")
	do(http.MethodGet, "/tasks/task-ffffffff/events", "")
	do(http.MethodPost, "/tasks/task-ffffffff:cancel", "")
	for _, f := range failures {
		t.Error(f)
	}
	counts := c.Counts()
	var ops []string
	for k := range counts {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	for _, op := range []string{"GetOpenAPI 200", "GetServiceInfo 200", "CreateTask 200", "CreateTask 400", "GetTask 200", "GetTask 400", "GetTask 404",
		"GetTaskEvents 200", "GetTaskEvents 404", "CancelTask 200", "CancelTask 404"} {
		if counts[op] == 0 {
			t.Errorf("no answer of %s validated (validated: %v)", op, ops)
		}
	}
}

// An answer that the document does not allow is reported: a field outside
// tesTask, a status the operation does not declare.
func TestCheckerReportsWhatDoesNotFit(t *testing.T) {
	c, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "http://x"+tes.BasePath+"/tasks/task-1?view=MINIMAL", nil)
	h := http.Header{"Content-Type": []string{"application/json"}}
	if err := c.Check(req, 200, h, []byte(`{"id":"task-1","state":"QUEUED"}`)); err != nil {
		t.Errorf("a good answer: %v", err)
	}
	for _, bad := range []struct {
		status int
		body   string
	}{
		{200, `{"id":"task-1","state":"QUEUED","colour":"red"}`},
		{200, `{"id":"task-1","state":"DONE"}`},
		{200, `{"id":"task-1","logs":[{"logs":[{"start_time":"x"}],"outputs":[]}]}`},
		{418, `{"error":"teapot"}`},
		{404, `{"message":"no"}`},
	} {
		if err := c.Check(req, bad.status, h, []byte(bad.body)); err == nil {
			t.Errorf("%d %s: not reported", bad.status, bad.body)
		}
	}
	other := httptest.NewRequest(http.MethodDelete, "http://x"+tes.BasePath+"/tasks/task-1", nil)
	if err := c.Check(other, 200, h, []byte(`{}`)); err == nil {
		t.Errorf("an operation outside the document: not reported")
	}
}
