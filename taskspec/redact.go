package taskspec

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact renders a URL for logs and errors: scheme, host and path, without
// user info, query or fragment, which may hold credentials (presigned URLs,
// tokens). A string that does not parse is cut at the first '?' or '#' and
// stripped of anything before an '@' in its authority.
func Redact(raw string) string {
	s := redact(raw)
	// An empty path segment can make what is left read as an authority again
	// ("//@//@" leaves "//@"): such a rest holds no host, so keep only what
	// follows its last '@'.
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if i := strings.LastIndex(s, "@"); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Opaque != "" {
		// scheme:opaque, e.g. user:password@host parsed as a URL with
		// the scheme "user": keep what follows the last '@'.
		o, _, _ := strings.Cut(u.Opaque, "?")
		if i := strings.LastIndex(o, "@"); i >= 0 {
			return o[i+1:]
		}
		return u.Scheme + ":" + o
	}
	if err == nil && (u.Scheme != "" || u.Host != "" || u.User != nil) {
		r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
		return r.String()
	}
	s := raw
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !validScheme(scheme) {
		// Not a URL: keep what follows the last '@', so that a
		// user:password@ prefix never shows.
		if i := strings.LastIndex(s, "@"); i >= 0 {
			s = s[i+1:]
		}
		return s
	}
	auth, p, slash := strings.Cut(rest, "/")
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		auth = auth[i+1:]
	}
	if slash {
		return scheme + "://" + auth + "/" + p
	}
	return scheme + "://" + auth
}

// urlRE finds URLs within text (a command line, say).
var urlRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>]+`)

// RedactURLs renders text for logs with each URL in it redacted.
func RedactURLs(text string) string {
	return urlRE.ReplaceAllStringFunc(text, Redact)
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' and '.').
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range strings.ToLower(s) {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}
