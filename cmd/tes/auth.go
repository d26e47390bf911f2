package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/elixir-cloud-aai/tesk-knative/internal/settings"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// Access control modes (TES_AUTH, a comma-separated list).
const (
	authOIDC  = "oidc"
	authBasic = "basic"
	authNone  = "none"
)

// notConfigured is the access control of a TES API whose mode is not set:
// it serves nothing but says why it is not ready.
type notConfigured struct{ reason string }

func (n notConfigured) Authenticate(*http.Request) (tes.Caller, error) {
	return tes.Caller{}, echo.NewHTTPError(http.StatusServiceUnavailable, "not ready: "+n.reason)
}

func (n notConfigured) Ready() error { return errors.New(n.reason) }

// authModes reads TES_AUTH: none (also --no-auth), or oidc, basic, or
// both ("oidc,basic"). Without TES_AUTH, the modes whose settings are there
// (OIDC_ISSUER, TES_BASIC_AUTH_FILE); none of them is an empty list.
func authModes(getenv func(string) string, noAuth bool) ([]string, error) {
	if noAuth {
		return []string{authNone}, nil
	}
	v := strings.ToLower(strings.TrimSpace(getenv("TES_AUTH")))
	if v == "" {
		var modes []string
		if strings.TrimSpace(getenv("TES_BASIC_AUTH_FILE")) != "" {
			modes = append(modes, authBasic)
		}
		if strings.TrimSpace(getenv("OIDC_ISSUER")) != "" {
			modes = append(modes, authOIDC)
		}
		return modes, nil
	}
	var modes []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case authOIDC, authBasic, authNone:
		default:
			return nil, fmt.Errorf("TES_AUTH=%q: use oidc, basic, oidc,basic or none", v)
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	if slices.Contains(modes, authNone) && len(modes) > 1 {
		return nil, fmt.Errorf("TES_AUTH=%q: none goes alone", v)
	}
	slices.Sort(modes) // basic before oidc: one order for the dashboard
	return modes, nil
}

// authenticator is the access control, as TES_AUTH says (authModes): none,
// OIDC bearer tokens of OIDC_ISSUER for OIDC_AUDIENCE (JWTs, and opaque
// tokens through the issuer's userinfo endpoint as OIDC_OPAQUE_TOKENS says),
// the issuer read in the background until it answers; HTTP Basic against
// the users file TES_BASIC_AUTH_FILE (bcrypt hashes), read again when it
// changes; or both, by the request's scheme (then the API is ready once the
// issuer was read, as with OIDC alone). A mode that is not set or
// lacks a setting is not an exit: the API serves /healthz and answers
// /readyz and every request with 503 and the reason, so that a first deploy
// says what is missing. A setting that is wrong (a users file that does
// not parse) is.
func authenticator(ctx context.Context, getenv func(string) string, noAuth bool, log *zap.SugaredLogger) (tes.Authenticator, func() error, error) {
	modes, err := authModes(getenv, noAuth)
	if err != nil {
		return nil, nil, err
	}
	if slices.Equal(modes, []string{authNone}) {
		log.Warnw("Serving without access control (TES_AUTH=none): every caller sees and cancels every task")
		return nil, nil, nil
	}
	c, shared, err := oidcSettings(getenv)
	if err != nil {
		return nil, nil, err
	}
	usersFile := strings.TrimSpace(getenv("TES_BASIC_AUTH_FILE"))
	var reasons []string
	if len(modes) == 0 {
		reasons = append(reasons, "access control is not set: TES_AUTH=oidc with OIDC_ISSUER and OIDC_AUDIENCE, TES_AUTH=basic with TES_BASIC_AUTH_FILE, both (oidc,basic), or TES_AUTH=none on a trusted network")
	}
	if slices.Contains(modes, authOIDC) && (c.Issuer == "" || c.Audience == "") {
		reasons = append(reasons, "TES_AUTH=oidc needs OIDC_ISSUER and OIDC_AUDIENCE")
	}
	if slices.Contains(modes, authBasic) && usersFile == "" {
		reasons = append(reasons, "TES_AUTH=basic needs TES_BASIC_AUTH_FILE, a users file of bcrypt hashes (htpasswd -B)")
	}
	if len(reasons) > 0 {
		reason := strings.Join(reasons, "; ")
		log.Errorw("Not ready", "reason", reason)
		n := notConfigured{reason: reason}
		return n, n.Ready, nil
	}
	s := tes.Schemes{SharedOwners: shared}
	var ready func() error
	if slices.Contains(modes, authBasic) {
		var admins []string
		for _, a := range strings.Split(getenv("TES_BASIC_AUTH_ADMINS"), ",") {
			if a = strings.TrimSpace(a); a != "" {
				admins = append(admins, a)
			}
		}
		// The sign-in limits are tes.DefaultSignInLimits: a password that
		// checked out is taken again without bcrypt for 5 min; 10 failures
		// a minute of a user name, or 100 from an address (behind Knative,
		// the pod's queue-proxy: the whole pod), lock it out for 1 s,
		// doubled by each next lockout up to 5 min.
		b, err := tes.NewBasic(tes.BasicConfig{File: usersFile, Admins: admins, Logf: log.Warnw})
		if err != nil {
			return nil, nil, fmt.Errorf("TES_BASIC_AUTH_FILE: %w", err)
		}
		log.Infow("Users file read", "file", usersFile, "users", b.Users(), "admins", len(admins))
		go b.Watch(ctx, tes.DefaultBasicReload, log.Infow)
		s.Basic = b
	}
	if slices.Contains(modes, authOIDC) {
		o := tes.NewRetryingOIDC(ctx, c, log.Infow)
		s.Bearer, ready = o, o.Ready
	}
	return s, ready, nil
}

// oidcSettings reads the OIDC settings and TES_AUTH_SHARED_OWNERS.
func oidcSettings(getenv func(string) string) (tes.OIDCConfig, bool, error) {
	var c tes.OIDCConfig
	var shared bool
	var groups, subjects string
	err := settings.Check(getenv, []settings.Setting{
		settings.Text("OIDC_ISSUER", "", &c.Issuer),
		settings.Text("OIDC_AUDIENCE", "", &c.Audience),
		settings.Text("OIDC_GROUPS_CLAIM", "", &c.GroupsClaim),
		settings.Text("OIDC_ADMIN_GROUP", "", &c.AdminGroup),
		// Who may create tasks: with neither set, everyone the issuer
		// knows.
		settings.RawText("OIDC_ALLOWED_GROUPS", &groups),
		settings.RawText("OIDC_ALLOWED_SUBJECTS", &subjects),
		settings.Bool("TES_AUTH_SHARED_OWNERS", &shared, "a boolean"),
		{Name: "OIDC_OPAQUE_TOKENS", Set: func(v string) error {
			if v = strings.ToLower(v); v != tes.OpaqueUserInfo && v != tes.OpaqueOff {
				return fmt.Errorf("%q: use %s or %s", v, tes.OpaqueUserInfo, tes.OpaqueOff)
			}
			c.OpaqueTokens = v
			return nil
		}},
	})
	c.AllowedGroups, c.AllowedSubjects = strings.Split(groups, ","), strings.Split(subjects, ",")
	if strings.TrimSpace(groups) != "" && c.GroupsClaim == "" {
		return c, shared, errors.New("OIDC_ALLOWED_GROUPS needs OIDC_GROUPS_CLAIM, the token claim that names a caller's groups")
	}
	return c, shared, err
}
