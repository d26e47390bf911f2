package steps

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
)

// Notification URLs (behaviour §5.8): a task may name, in its tag
// taskmeta.TagNotifyURL, an address to which each of its state changes is
// posted, through a Trigger with retries and a dead letter sink. Only the
// destinations the operator lists (NOTIFY_URL_PREFIXES) may be named: the
// service would otherwise post wherever a user asks, from inside the
// cluster.

// ParseNotifyPrefixes reads NOTIFY_URL_PREFIXES: http or https URLs
// separated by commas or spaces, each a scheme, a host (and port) and
// optionally a path that the task's URL must start with.
func ParseNotifyPrefixes(s string) ([]string, error) {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%q is not an http or https URL of a host and path (no user, query or fragment)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// NotifyURLAllowed checks a task's notification URL against the
// operator's prefixes: the same scheme and host (with its port), and a path
// that is the prefix's or below it (a prefix path "/hooks" allows
// "/hooks" and "/hooks/x", not "/hooks2"). No prefixes: no URL is allowed.
func NotifyURLAllowed(raw string, prefixes []string) error {
	if len(prefixes) == 0 {
		return invalid.Errorf("this service posts no state changes to a task's own address (its operator allows none: NOTIFY_URL_PREFIXES)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return invalid.Errorf("%q is not an http or https URL (without a user or fragment)", raw)
	}
	p := u.Path
	if p != "" && p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/") {
		return invalid.Errorf("%q: its path is not in its plain form (no dot segments or repeated slashes)", raw)
	}
	for _, prefix := range prefixes {
		a, err := url.Parse(prefix)
		if err != nil || !strings.EqualFold(a.Scheme, u.Scheme) || !strings.EqualFold(a.Host, u.Host) {
			continue
		}
		if base := strings.TrimSuffix(a.Path, "/"); base == "" || p == base || strings.HasPrefix(p, base+"/") {
			return nil
		}
	}
	return invalid.Errorf("%q is not among the addresses this service posts state changes to (%s)", raw, strings.Join(prefixes, ", "))
}
