package filer

import (
	"net/url"
	"sort"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Redact renders a URL for logs and errors, without user info, query or
// fragment (taskspec.Redact).
func Redact(raw string) string { return taskspec.Redact(raw) }

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
