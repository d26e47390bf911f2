// Package dashboard is the TES API's dashboard: a task list, a task page
// with the task's timeline and Events, and the API's OpenAPI document made
// browsable. Its static files (plain HTML, CSS and JavaScript, no build
// step, nothing fetched from elsewhere) are embedded in the binary; in the
// browser it speaks the TES API with the same credentials as any client (a
// bearer token, or a user name and password the page asks for itself).
package dashboard

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// Path is where the dashboard is served.
const Path = "/dashboard/"

//go:embed static
var static embed.FS

// Config is what the dashboard's page needs to know of the service.
type Config struct {
	// API is the TES API's base path (e.g. /ga4gh/tes/v1).
	API string `json:"api"`
	// Auth is "none" without access control, else the modes accepted:
	// "oidc", "basic" (the page asks for a user name and password, keeps
	// them in the tab and sends them itself), or both, "basic,oidc".
	Auth string `json:"auth"`
	// Issuer and ClientID, with OIDC: the page logs in through the
	// issuer's authorization code flow with PKCE as this public client, and
	// sends the ID token it gets (whose audience is ClientID, the API's
	// OIDC_AUDIENCE).
	Issuer   string `json:"issuer,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// Scopes asked for at login ("openid" at least).
	Scopes string `json:"scopes,omitempty"`
}

// oidc reports whether the API accepts OIDC bearer tokens.
func (c Config) oidc() bool {
	for m := range strings.SplitSeq(c.Auth, ",") {
		if strings.TrimSpace(m) == "oidc" {
			return true
		}
	}
	return false
}

// Handler serves the dashboard's files under Path, and its configuration
// as Path+"config.json".
func Handler(cfg Config) http.Handler {
	if cfg.Auth == "" {
		cfg.Auth = "none"
	}
	if cfg.oidc() && cfg.Scopes == "" {
		cfg.Scopes = "openid profile"
	}
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix(Path, http.FileServer(http.FS(sub)))
	conf, _ := json.Marshal(cfg)
	csp := contentSecurityPolicy(cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		// The authorization code is in the URL after a login: it goes to no
		// other site.
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == Path+"config.json" {
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(conf)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy lets the page run its own scripts and styles only,
// and talk to the API and, with OIDC, the issuer (its discovery document
// and token endpoint).
func contentSecurityPolicy(cfg Config) string {
	connect := "'self'"
	if u, err := url.Parse(cfg.Issuer); err == nil && cfg.oidc() && u.Scheme != "" && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// Mount serves the dashboard on e under Path, and redirects / to it.
func Mount(e *echo.Echo, cfg Config) {
	h := echo.WrapHandler(Handler(cfg))
	e.GET(Path+"*", h)
	e.HEAD(Path+"*", h)
	e.GET(strings.TrimSuffix(Path, "/"), func(c echo.Context) error { return c.Redirect(http.StatusFound, Path) })
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, Path) })
}
