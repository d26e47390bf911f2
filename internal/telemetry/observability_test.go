package telemetry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	k8smetrics "k8s.io/client-go/tools/metrics"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// exposed serves every instrument of the handler and the TES API through
// the Prometheus exporter that metrics-protocol prometheus sets up, each
// with a value, and returns the metric names and label names it exposes: a
// histogram's as its _bucket, _sum and _count series.
func exposed(t *testing.T) (metrics, labels map[string]bool) {
	t.Helper()
	p, addr := prometheusProvider(t)
	ctx := context.Background()

	s, err := eventserver.NewTelemetry(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	sctx, st := s.StartStep(ctx, nil, nil, "sweep")
	st.Actions(sctx, []string{"create-job"}, "COMPLETE")
	st.End(sctx, http.StatusOK, false, nil)
	s.SweptTasks(map[string]int{"QUEUED": 1}, 1, map[string]time.Time{"QUEUED": time.Now()})

	a, err := tes.NewTelemetry(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	a.TaskCreated(ctx)
	e := echo.New()
	e.Use(a.Middleware)
	e.GET("/ga4gh/tes/v1/tasks", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ga4gh/tes/v1/tasks", nil))

	// Through client-go's hooks, which Setup took.
	k8smetrics.RequestResult.Increment(ctx, "200", "get", "h")
	k8smetrics.RequestLatency.Observe(ctx, "get", url.URL{}, time.Millisecond)

	body := scrape(t, addr)
	metrics, labels = map[string]bool{}, map[string]bool{}
	label := regexp.MustCompile(`[{,]([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			metrics[f[2]] = true
			if f[3] == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					metrics[f[2]+suffix] = true
				}
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, m := range label.FindAllStringSubmatch(line, -1) {
			labels[m[1]] = true
		}
	}
	if !metrics["tesk_events_total"] {
		t.Fatalf("no tesk_events_total at /metrics:\n%s", body)
	}
	return metrics, labels
}

// Prefix of the names the project owns: its metrics and its attributes.
const ownPrefix = "tesk_"

var (
	ownName  = regexp.MustCompile(`\b` + ownPrefix + `[a-zA-Z0-9_]*`)
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcher  = regexp.MustCompile(`\b([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
)

// namesIn splits the names of the project's in a PromQL expression into
// metric names and label names (in by and without, and in matchers).
func namesIn(expr string) (metrics, labels []string) {
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, ownPrefix) {
				labels = append(labels, l)
			}
		}
	}
	expr = grouping.ReplaceAllString(expr, " ")
	for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
		if strings.HasPrefix(m[1], ownPrefix) {
			labels = append(labels, m[1])
		}
	}
	expr = matcher.ReplaceAllString(expr, `"`)
	return ownName.FindAllString(expr, -1), labels
}

func TestNamesIn(t *testing.T) {
	m, l := namesIn(`sum by (tesk_task_state, le) (rate(tesk_events_total{tesk_outcome="failed", x!~"a"}[5m])) / max(tesk_tasks)`)
	sort.Strings(m)
	sort.Strings(l)
	if strings.Join(m, " ") != "tesk_events_total tesk_tasks" || strings.Join(l, " ") != "tesk_outcome tesk_task_state" {
		t.Fatalf("metrics %v labels %v", m, l)
	}
}

// expressions are the PromQL expressions of the Grafana dashboard (its
// panels' targets) and of the alert rules, by where they are.
func expressions(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "config", "observability")
	out := map[string]string{}

	b, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				if s, ok := sub.(string); ok && k == "expr" {
					out["dashboard "+path+"."+k] = s
					continue
				}
				walk(path+"."+k, sub)
			}
		case []any:
			for i, sub := range x {
				walk(path+"["+strconv.Itoa(i)+"]", sub)
			}
		}
	}
	walk("", dash)

	b, err = os.ReadFile(filepath.Join(dir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &rule); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Fatalf("alerts.yaml: %s %s, want a monitoring.coreos.com/v1 PrometheusRule", rule.APIVersion, rule.Kind)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alerts.yaml %s: rule %q lacks its name, expression, severity or summary", g.Name, r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alerts.yaml %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

// Every metric and label of the project's that the dashboard and the alert
// rules name is one the exporter serves, under the name it serves it by:
// they cannot drift from the instruments (eventserver's, tes's and the client-go
// metrics of internal/telemetry).
func TestDashboardAndAlertsNameExposedMetrics(t *testing.T) {
	metrics, labels := exposed(t)
	exprs := expressions(t)
	if len(exprs) < 10 {
		t.Fatalf("%d expressions in the dashboard and the rules, want at least 10", len(exprs))
	}
	used := map[string]bool{}
	for where, e := range exprs {
		ms, ls := namesIn(e)
		for _, m := range ms {
			used[m] = true
			if !metrics[m] {
				t.Errorf("%s: metric %s is not one the handler or the TES API serves", where, m)
			}
		}
		for _, l := range ls {
			if !labels[l] {
				t.Errorf("%s: label %s is not one the handler or the TES API serves", where, l)
			}
		}
	}
	// The signals of docs/operations.md are on the dashboard or in the
	// rules.
	for _, m := range []string{"tesk_tasks", "tesk_tasks_queued", "tesk_tasks_step_age_seconds", "tesk_events_total", "tesk_step_duration_seconds_bucket", "tesk_tasks_ended_total"} {
		if !used[m] {
			t.Errorf("%s is neither on the dashboard nor in the rules", m)
		}
	}
}
