package taskspec

import (
	"path"
	"strings"
)

// A wildcard output's path is a POSIX pattern (TES 1.1: "pattern matching
// wildcards (POSIX)"), matched one path component at a time as a shell's
// filename expansion does it (POSIX.1-2017 XCU 2.13.3): `*`, `?` and a
// bracket expression never match the `/` between components, nor the
// leading period of a name, which only a period written at the start of the
// component matches (`*.txt` leaves `.hidden.txt` alone, `.*` takes it); a
// bracket expression that starts with `!` matches what the rest does not.
// TESK's filer (Python's glob) and Nextflow's own glob of a work directory
// read patterns the same way.

// MatchPattern reports whether the executor path p matches pattern, both
// absolute paths. An error says the pattern is malformed.
func MatchPattern(pattern, p string) (bool, error) {
	pp := strings.Split(strings.TrimPrefix(path.Clean(pattern), "/"), "/")
	ps := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	ok := len(pp) == len(ps)
	for i, part := range pp {
		var m bool
		var err error
		if i < len(ps) {
			m, err = MatchName(part, ps[i])
		} else {
			_, err = MatchName(part, "")
		}
		if err != nil {
			return false, err
		}
		ok = ok && m
	}
	return ok, nil
}

// MatchName reports whether a name (one path component) matches one
// component of a pattern.
func MatchName(part, name string) (bool, error) {
	goPart := goPattern(part)
	ok, err := path.Match(goPart, name)
	if err != nil || !ok {
		return false, err
	}
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(part, ".") && !strings.HasPrefix(part, `\.`) {
		// Only a period written first matches a leading period.
		return false, nil
	}
	return true, nil
}

// goPattern writes a POSIX pattern component in path.Match's syntax: a
// bracket expression's leading `!` (POSIX) is `^` there.
func goPattern(part string) string {
	if !strings.Contains(part, "[!") {
		return part
	}
	var b strings.Builder
	for i := 0; i < len(part); i++ {
		c := part[i]
		b.WriteByte(c)
		switch {
		case c == '\\' && i+1 < len(part):
			i++
			b.WriteByte(part[i])
		case c == '[' && i+1 < len(part) && part[i+1] == '!':
			i++
			b.WriteByte('^')
		}
	}
	return b.String()
}
