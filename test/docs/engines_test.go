package docs

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// route is a route of the TES API: its method and its path as a pattern.
type route struct {
	method string
	path   *regexp.Regexp
}

// routes are the TES API's routes as tes.Server registers them (":id" a
// path segment).
func routes(t *testing.T) []route {
	t.Helper()
	var out []route
	for _, r := range (&tes.Server{}).Echo().Routes() {
		pattern := regexp.MustCompile(`:[a-z]+`).ReplaceAllString(regexp.QuoteMeta(r.Path), `[^/]+`)
		out = append(out, route{r.Method, regexp.MustCompile("^" + pattern + "$")})
	}
	if len(out) < 5 {
		t.Fatalf("the TES API registers %d routes, want TES 1.1's", len(out))
	}
	return out
}

// served says whether the TES API serves method at the path.
func served(rs []route, method, path string) bool {
	for _, r := range rs {
		if r.method == method && r.path.MatchString(path) {
			return true
		}
	}
	return false
}

// storage is service-info's storage of a TES API whose transfer volume is
// at base.
func storage(t *testing.T, base string) []string {
	t.Helper()
	s := &tes.Server{}
	s.Config.Steps.HostBasePath = base
	rec := httptest.NewRecorder()
	s.Echo().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tes.BasePath+"/service-info", nil))
	var info struct{ Storage []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("service-info: %d %v %s", rec.Code, err, rec.Body)
	}
	return info.Storage
}

// offered says whether a URL of the engine's storage is under an entry of
// service-info's storage.
func offered(st []string, u string) bool {
	for _, s := range st {
		if strings.HasPrefix(u, s) {
			return true
		}
	}
	return false
}

// engine is one engine's section of docs/workflow-engines.md: its first
// fenced block (the configuration to copy) and every fenced block.
func engine(t *testing.T, doc, name string) (string, []block) {
	t.Helper()
	sec := section(doc, "## "+name)
	bs := blocks(sec)
	if len(bs) == 0 {
		t.Fatalf("docs/workflow-engines.md has no section %q with a fenced block", name)
	}
	return bs[0].text, bs
}

// one is the first submatch of re in text, or a failure naming what.
func one(t *testing.T, re, text, what string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(text)
	if m == nil {
		t.Errorf("%s: no match of %s in\n%s", what, re, text)
		return ""
	}
	return m[1]
}

// pathOf is the path of an engine's URL, which must be absolute, http(s),
// with a host and no trailing slash, query or fragment.
func pathOf(t *testing.T, raw, what string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "/") {
		t.Errorf("%s: %q is not the TES API's URL (http(s), a host, no trailing slash, query or fragment)", what, raw)
		return ""
	}
	return u.Path
}

// pyTES checks a URL given to a client built on py-tes: py-tes before 1.1
// posts to the URL and /v1/tasks; 1.1 and later try /ga4gh/tes/v1, /v1
// and / after the URL in turn, going on past a 404, so the first of those
// the API serves must be the tasks' route.
func pyTES(t *testing.T, rs []route, raw, what string) {
	t.Helper()
	p := pathOf(t, raw, what)
	for _, sub := range []string{"/tasks", "/tasks/task-1", "/tasks/task-1:cancel", "/service-info"} {
		method := http.MethodGet
		if sub == "/tasks/task-1:cancel" {
			method = http.MethodPost
		}
		if sub != "/service-info" && !served(rs, method, p+"/v1"+sub) {
			t.Errorf("%s: py-tes before 1.1 would %s %s, which the TES API does not serve", what, method, p+"/v1"+sub)
		}
		found := false
		for _, prefix := range []string{"/ga4gh/tes/v1", "/v1", ""} {
			if served(rs, method, p+prefix+sub) {
				if got := p + prefix + sub; got != tes.BasePath+sub {
					t.Errorf("%s: py-tes 1.1 would %s %s, want %s", what, method, got, tes.BasePath+sub)
				}
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: py-tes 1.1 finds no route for %s %s", what, method, sub)
		}
	}
}

// docs/workflow-engines.md's configuration of each engine names what the
// engine needs, and its URL, with what the engine appends, is a route the
// TES API serves; the storage it names is storage the service offers.
func TestWorkflowEnginesConfiguration(t *testing.T) {
	doc := read(t, "docs/workflow-engines.md")
	rs := routes(t)
	st := storage(t, "/shared")

	t.Run("Nextflow", func(t *testing.T) {
		conf, _ := engine(t, doc, "Nextflow")
		one(t, `(?s)plugins\s*\{\s*id\s+'(nf-ga4gh)(@[0-9.]+)?'\s*\}`, conf, "the nf-ga4gh plugin")
		one(t, `(?m)^process\.executor\s*=\s*'(tes)'`, conf, "the tes executor")
		one(t, `(?m)^process\.container\s*=\s*'([^']+)'`, conf, "an image for every process")
		endpoint := one(t, `(?m)^tes\.endpoint\s*=\s*'([^']*)'`, conf, "tes.endpoint")
		// nf-ga4gh's TaskServiceApi: basePath + "/v1/tasks", "/v1/tasks/{id}",
		// "/v1/tasks/{id}:cancel".
		if p := pathOf(t, endpoint, "tes.endpoint"); p != "" || endpoint != "" {
			for _, c := range []struct{ method, path string }{{http.MethodPost, "/v1/tasks"}, {http.MethodGet, "/v1/tasks/task-1"}, {http.MethodPost, "/v1/tasks/task-1:cancel"}} {
				if !served(rs, c.method, p+c.path) {
					t.Errorf("nf-ga4gh would %s %s, which the TES API does not serve", c.method, p+c.path)
				}
			}
		}
		one(t, `(?m)^tes\.(oauthToken|basicUsername)\s*=`, conf, "the credentials")
		if w := one(t, `(?m)^workDir\s*=\s*'([^']+)'`, conf, "workDir"); w != "" && !offered(st, w) {
			t.Errorf("workDir %s is not storage the service offers (%v)", w, st)
		}
	})

	t.Run("Cromwell", func(t *testing.T) {
		conf, _ := engine(t, doc, "Cromwell")
		one(t, `(?s)backend\s*\{.*providers\s*\{.*TES\s*\{.*actor-factory = "(cromwell\.backend\.impl\.tes\.TesBackendLifecycleActorFactory)"`, conf, "the TES backend's actor factory")
		if strings.Count(conf, "{") != strings.Count(conf, "}") {
			t.Errorf("the HOCON's braces do not balance:\n%s", conf)
		}
		endpoint := one(t, `(?m)^\s*endpoint = "([^"]*)"`, conf, "endpoint")
		if !strings.HasSuffix(endpoint, tes.BasePath+"/tasks") {
			t.Errorf("Cromwell's endpoint %q does not end in %s/tasks", endpoint, tes.BasePath)
		}
		// Cromwell posts to the endpoint, reads endpoint/{id} and cancels at
		// endpoint/{id}:cancel.
		if p := pathOf(t, endpoint, "endpoint"); p != "" {
			for _, c := range []struct{ method, path string }{{http.MethodPost, p}, {http.MethodGet, p + "/task-1"}, {http.MethodPost, p + "/task-1:cancel"}} {
				if !served(rs, c.method, c.path) {
					t.Errorf("Cromwell would %s %s, which the TES API does not serve", c.method, c.path)
				}
			}
		}
		if r := one(t, `(?m)^\s*root = "([^"]+)"`, conf, "root"); r != "" && !offered(st, r) {
			t.Errorf("Cromwell's root %s is not storage the service offers (%v)", r, st)
		}
		one(t, `(?m)^\s*dockerRoot = "(/[^"]*)"`, conf, "dockerRoot")
	})

	// the URL after flag in a command of the section, each command checked.
	commands := func(t *testing.T, name, program, flag string) []string {
		_, bs := engine(t, doc, name)
		var urls []string
		for _, b := range bs {
			cmd := strings.ReplaceAll(b.text, "\\\n", " ")
			if b.lang != "sh" || !strings.Contains(cmd, program+" ") {
				continue
			}
			urls = append(urls, one(t, flag+` (\S+)`, cmd, name+"'s "+flag))
		}
		if len(urls) == 0 {
			t.Fatalf("%s: no sh block runs %s", name, program)
		}
		return urls
	}

	t.Run("Snakemake", func(t *testing.T) {
		for _, u := range commands(t, "Snakemake 7", "snakemake", "--tes") {
			pyTES(t, rs, u, "snakemake --tes")
		}
		// The first form: the working directory on the transfer volume,
		// whose inputs and outputs are file:// URLs of its paths.
		_, bs := engine(t, doc, "Snakemake 7")
		if dir := one(t, `(?m)^cd (/\S+)`, bs[0].text, "the working directory"); dir != "" && !offered(st, "file://"+dir) {
			t.Errorf("Snakemake's working directory %s is not under the transfer volume's storage %v", dir, st)
		}
		if len(bs) < 2 || !strings.Contains(bs[1].text, "--default-remote-provider S3") {
			t.Error("Snakemake's second form is not S3 remote files")
		}
	})

	t.Run("cwl-tes", func(t *testing.T) {
		for _, u := range commands(t, "cwl-tes", "cwl-tes", "--tes") {
			pyTES(t, rs, u, "cwl-tes --tes")
		}
		_, bs := engine(t, doc, "cwl-tes")
		if r := one(t, `--remote-storage-url (\S+)`, bs[0].text, "--remote-storage-url"); r != "" && !offered(st, r) {
			t.Errorf("cwl-tes's remote storage %s is not storage the service offers (%v)", r, st)
		}
	})

	t.Run("Toil", func(t *testing.T) {
		for _, u := range commands(t, "Toil", "toil-cwl-runner", "--tesEndpoint") {
			pyTES(t, rs, u, "toil --tesEndpoint")
		}
		_, bs := engine(t, doc, "Toil")
		one(t, `--batchSystem (tes)\b`, bs[0].text, "the tes batch system")
		one(t, `--jobStore ((aws|google):\S+)`, bs[0].text, "a job store the workers reach")
	})

	t.Run("py-tes", func(t *testing.T) {
		conf, _ := engine(t, doc, "py-tes")
		ms := regexp.MustCompile(`tes\.HTTPClient\("([^"]*)"`).FindAllStringSubmatch(conf, -1)
		if len(ms) == 0 {
			t.Fatalf("no tes.HTTPClient(...) in\n%s", conf)
		}
		for _, m := range ms {
			pyTES(t, rs, m[1], "tes.HTTPClient")
		}
	})

	// The table at the top gives each engine the URL of its section.
	t.Run("table", func(t *testing.T) {
		for _, name := range []string{"Nextflow", "Cromwell", "Snakemake 7", "cwl-tes", "Toil", "py-tes"} {
			row := one(t, `(?m)^\| \[`+regexp.QuoteMeta(name)+`\]\(#[^)]+\)[^|]*\| ([^|]+) \|`, doc, "the table's row of "+name)
			u := one(t, `(https?://[^\s'"`+"`"+`)]+)`, row, "the URL of "+name+"'s row")
			if conf, _ := engine(t, doc, name); u != "" && !strings.Contains(conf, u) {
				t.Errorf("the table gives %s the URL %s, its section does not", name, u)
			}
		}
	})
}

// Wherever the README and docs/ give an engine a URL, it has the shape the
// engine needs: Nextflow's tes.endpoint, the --tes, --tesEndpoint and
// tes.HTTPClient of clients built on py-tes, Cromwell's endpoint.
func TestEngineURLsEverywhere(t *testing.T) {
	rs := routes(t)
	pages := []string{"README.md"}
	md, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range md {
		pages = append(pages, "docs/"+filepath.Base(p))
	}
	found := 0
	for _, page := range pages {
		doc := read(t, page)
		for _, m := range regexp.MustCompile(`tes\.endpoint\s*=\s*'([^']*)'`).FindAllStringSubmatch(doc, -1) {
			found++
			if p := pathOf(t, m[1], page+": tes.endpoint"); !served(rs, http.MethodPost, p+"/v1/tasks") {
				t.Errorf("%s: nf-ga4gh would POST %s/v1/tasks, which the TES API does not serve", page, p)
			}
		}
		for _, m := range regexp.MustCompile(`(?:--tes|--tesEndpoint|tes\.HTTPClient\(")[ =]?(https?://[^\s"'`+"`"+`)]+)`).FindAllStringSubmatch(doc, -1) {
			found++
			pyTES(t, rs, m[1], page+": "+m[0])
		}
		for _, m := range regexp.MustCompile(`endpoint = "([^"]*)"`).FindAllStringSubmatch(doc, -1) {
			found++
			if p := pathOf(t, m[1], page+": Cromwell's endpoint"); !served(rs, http.MethodPost, p) || !served(rs, http.MethodGet, p+"/task-1") {
				t.Errorf("%s: Cromwell's endpoint %s is not the TES API's tasks route", page, m[1])
			}
		}
	}
	if found < 12 {
		t.Fatalf("found %d engine URLs in the README and docs/, want the table's and the sections'", found)
	}
}
