package filer

import (
	"net/url"
	"sort"
	"strings"
)

// Redact renders a URL for logs and errors: scheme, host and path, without
// user info, query or fragment, which may hold credentials (presigned URLs,
// tokens). A string that does not parse is cut at the first '?' or '#' and
// stripped of anything before an '@' in its authority.
func Redact(raw string) string {
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
	if !ok || schemeOf(scheme+":") == "" {
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

// scrubber removes known secrets from text that comes from libraries (error
// messages), as a second line of defence: the filer itself only ever formats
// redacted URLs.
type scrubber struct{ secrets []string }

// minSecret is the shortest secret that is scrubbed: shorter ones would
// mangle every message and are not worth the protection.
const minSecret = 4

func (s *scrubber) add(v string) {
	if len(v) < minSecret {
		return
	}
	for _, x := range s.secrets {
		if x == v {
			return
		}
	}
	s.secrets = append(s.secrets, v)
	// Longest first, so that a secret containing another is removed whole.
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
}

// addURL registers the parts of a URL that may hold credentials.
func (s *scrubber) addURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		// Whatever follows '?' and whatever precedes '@' may be secret.
		if _, q, ok := strings.Cut(raw, "?"); ok {
			s.add(q)
		}
		if i := strings.Index(raw, "://"); i >= 0 {
			auth, _, _ := strings.Cut(raw[i+3:], "/")
			if j := strings.LastIndex(auth, "@"); j >= 0 {
				s.add(auth[:j])
			}
		}
		return
	}
	if u.User != nil {
		s.add(u.User.String())
		if p, ok := u.User.Password(); ok {
			s.add(p)
			s.add(url.QueryEscape(p))
			s.add(url.PathEscape(p))
		}
	}
	if u.RawQuery != "" {
		s.add(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				s.add(v)
				s.add(url.QueryEscape(v))
			}
		}
	}
	if u.Fragment != "" {
		s.add(u.Fragment)
		s.add(u.EscapedFragment())
	}
}

func (s *scrubber) scrub(text string) string {
	if s == nil {
		return text
	}
	for _, x := range s.secrets {
		text = strings.ReplaceAll(text, x, "REDACTED")
	}
	return text
}
