package tes

import (
	"fmt"
	"slices"
	"strings"
)

// allowList is who may create tasks: the members of its groups and the
// subjects it names. An empty list admits every caller.
type allowList struct {
	groups, subjects []string
}

// newAllowList keeps the non-empty names, trimmed.
func newAllowList(groups, subjects []string) allowList {
	return allowList{groups: trimmed(groups), subjects: trimmed(subjects)}
}

// trimmed is the non-empty names of a list, trimmed of spaces.
func trimmed(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// any reports whether the list restricts anyone.
func (a allowList) any() bool { return len(a.groups) > 0 || len(a.subjects) > 0 }

// admits reports whether a caller, with the groups claim it holds, may
// create tasks.
func (a allowList) admits(subject string, groups any) bool {
	if !a.any() || slices.Contains(a.subjects, subject) {
		return true
	}
	for _, g := range a.groups {
		if memberOf(groups, g) {
			return true
		}
	}
	return false
}

// refusal says why a caller the list leaves out may not create tasks.
func (a allowList) refusal(subject, groupsClaim string) string {
	var who []string
	if len(a.groups) > 0 {
		who = append(who, fmt.Sprintf("the members of the groups %s (token claim %q)", strings.Join(a.groups, ", "), groupsClaim))
	}
	if len(a.subjects) > 0 {
		who = append(who, fmt.Sprintf("%d named users", len(a.subjects)))
	}
	return fmt.Sprintf("%q may not create tasks here: this service admits %s; ask its operator for access", subject, strings.Join(who, " and "))
}
