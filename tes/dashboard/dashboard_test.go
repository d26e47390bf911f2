package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The page, its scripts and style sheet are served from the binary, each
// with its type; config.json says how to reach the API and log in.
func TestServesTheFilesAndTheConfiguration(t *testing.T) {
	e := echo.New()
	Mount(e, Config{API: "/ga4gh/tes/v1", Auth: "oidc", Issuer: "https://login.example.org/realms/x", ClientID: "tesk"})
	for path, want := range map[string]string{
		"/dashboard/":            "text/html",
		"/dashboard/app.js":      "text/javascript",
		"/dashboard/timeline.js": "text/javascript",
		"/dashboard/apidoc.js":   "text/javascript",
		"/dashboard/auth.js":     "text/javascript",
		"/dashboard/format.js":   "text/javascript",
		"/dashboard/app.css":     "text/css",
	} {
		resp, body := get(t, e, path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(body) < 500 {
			t.Errorf("%s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self' https://login.example.org") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: Referrer-Policy %q", path, resp.Header.Get("Referrer-Policy"))
		}
	}
	resp, body := get(t, e, "/dashboard/config.json")
	var cfg map[string]string
	if err := json.Unmarshal([]byte(body), &cfg); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("config.json: %d %v %s", resp.StatusCode, err, body)
	}
	if cfg["api"] != "/ga4gh/tes/v1" || cfg["auth"] != "oidc" || cfg["issuer"] != "https://login.example.org/realms/x" || cfg["client_id"] != "tesk" || cfg["scopes"] != "openid profile" {
		t.Errorf("config.json %v", cfg)
	}
	for _, path := range []string{"/", "/dashboard"} {
		if resp, _ := get(t, e, path); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != Path {
			t.Errorf("%s: %d to %q, want a redirect to %s", path, resp.StatusCode, resp.Header.Get("Location"), Path)
		}
	}
	if resp, _ := get(t, e, "/dashboard/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown file: %d", resp.StatusCode)
	}
}

// Without access control the page is told so, and talks to the API only.
func TestWithoutAccessControl(t *testing.T) {
	h := Handler(Config{API: "/api"})
	resp, body := get(t, h, "/dashboard/config.json")
	if body != `{"api":"/api","auth":"none"}` {
		t.Errorf("config.json %s", body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

// Every file the page loads is embedded, and the page loads no other
// site's.
func TestThePageLoadsOnlyItsOwnFiles(t *testing.T) {
	_, page := get(t, Handler(Config{}), "/dashboard/")
	for _, ref := range []string{`src="timeline.js"`, `src="apidoc.js"`, `src="format.js"`, `src="auth.js"`, `src="app.js"`, `href="app.css"`} {
		if !strings.Contains(page, ref) {
			t.Errorf("index.html does not load %s", ref)
		}
	}
	for _, f := range []string{"index.html", "app.js", "auth.js", "format.js", "timeline.js", "apidoc.js", "app.css"} {
		_, body := get(t, Handler(Config{}), Path+f)
		// The SVG namespace is a name, not an address that is loaded.
		body = strings.ReplaceAll(body, "http://www.w3.org/2000/svg", "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//cdn") {
			t.Errorf("%s names another site", f)
		}
	}
}

// With OIDC and Basic both, the page is told both, and may talk to the
// issuer.
func TestWithOIDCAndBasic(t *testing.T) {
	h := Handler(Config{API: "/api", Auth: "basic,oidc", Issuer: "https://login.example.org/x", ClientID: "tesk"})
	resp, body := get(t, h, "/dashboard/config.json")
	var cfg map[string]string
	if err := json.Unmarshal([]byte(body), &cfg); err != nil || cfg["auth"] != "basic,oidc" || cfg["scopes"] != "openid profile" {
		t.Errorf("config.json %s %v", body, err)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://login.example.org;") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if resp, _ := get(t, Handler(Config{API: "/api", Auth: "basic"}), "/dashboard/config.json"); !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self';") {
		t.Errorf("basic: Content-Security-Policy %q", resp.Header.Get("Content-Security-Policy"))
	}
}
