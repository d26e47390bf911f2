package steps

import (
	"fmt"
	"net/url"
	"path"
	"strconv"
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
// Its error names the URL in full: for the task's creator only (the TES
// API's answer); NotifyURLAllowedRedacted is for the rest.
func NotifyURLAllowed(raw string, prefixes []string) error {
	return checkNotifyURL(raw, strconv.Quote(raw), prefixes)
}

// NotifyURLAllowedRedacted is NotifyURLAllowed with an error that names the
// URL as RedactNotifyURL does: for logs and for answers to anyone but the
// task's creator.
func NotifyURLAllowedRedacted(raw string, prefixes []string) error {
	return checkNotifyURL(raw, RedactNotifyURL(raw), prefixes)
}

// RedactNotifyURL is how a log line, or an answer to anyone but the task's
// creator, names a task's notification URL: its scheme, host and port, then
// "/…" (e.g. "https://hooks.example.org/…"), never its path, query,
// fragment or user, which may hold a token. What is not a URL of a host
// is "…".
func RedactNotifyURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "…"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// checkNotifyURL is NotifyURLAllowed, its errors naming the URL as shown.
func checkNotifyURL(raw, shown string, prefixes []string) error {
	if len(prefixes) == 0 {
		return invalid.Errorf("this service posts no state changes to a task's own address (its operator allows none: NOTIFY_URL_PREFIXES)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return invalid.Errorf("%s is not an http or https URL (without a user or fragment)", shown)
	}
	p := u.Path
	if p != "" && p != "/" && path.Clean(p) != strings.TrimSuffix(p, "/") {
		return invalid.Errorf("%s: its path is not in its plain form (no dot segments or repeated slashes)", shown)
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
	return invalid.Errorf("%s is not among the addresses this service posts state changes to (%s)", shown, strings.Join(prefixes, ", "))
}
