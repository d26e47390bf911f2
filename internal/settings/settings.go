// Package settings reads a command's settings from its environment (a
// Knative Service sets env) through a table: each setting's name, its
// default, how its value is read into where it goes, and the error that
// names it and says what it accepts. The handler and the TES API read
// theirs through it.
package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Setting is a variable of the environment a command reads.
type Setting struct {
	// Name is the variable's.
	Name string
	// Default is the value taken when the variable is unset or blank; ""
	// leaves the destination as it is, unless EvenEmpty.
	Default string
	// Raw keeps the value's spaces (a password's); otherwise the value is
	// trimmed, and one of only spaces is unset.
	Raw bool
	// EvenEmpty: Set gets an empty value too.
	EvenEmpty bool
	// Set checks the value and puts it where it goes, or says what is
	// wrong with it (`"x" is not a boolean`) and leaves the destination as
	// it was. An error that is a *Problem names a setting of its own; one
	// that joins several (errors.Join) is a problem each.
	Set func(v string) error
}

// Problem is a value refused: the setting's name and what is wrong with it.
type Problem struct {
	Name string
	Err  error
}

// Error reads `PORT="http" is not a port number`.
func (p *Problem) Error() string { return p.Name + "=" + p.Err.Error() }

func (p *Problem) Unwrap() error { return p.Err }

// Load reads the table's settings from getenv, in its order, and sets each
// whose value its Set takes; it returns the problems of the others, which
// keep their defaults, in the table's order.
func Load(getenv func(string) string, table []Setting) []*Problem {
	var problems []*Problem
	for _, s := range table {
		v := getenv(s.Name)
		if !s.Raw {
			v = strings.TrimSpace(v)
		}
		if v == "" {
			v = s.Default
		}
		if v == "" && !s.EvenEmpty {
			continue
		}
		if err := s.Set(v); err != nil {
			problems = append(problems, problemsOf(s.Name, err)...)
		}
	}
	return problems
}

// problemsOf is an error of Set as problems: one naming the setting, or
// the problem it is; one each of the errors it joins (errors.Join).
func problemsOf(name string, err error) []*Problem {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var problems []*Problem
		for _, e := range joined.Unwrap() {
			problems = append(problems, problemsOf(name, e)...)
		}
		return problems
	}
	var p *Problem
	if !errors.As(err, &p) {
		p = &Problem{Name: name, Err: err}
	}
	return []*Problem{p}
}

// Check is Load for a command that does not start on a bad value: the
// first problem, or nil.
func Check(getenv func(string) string, table []Setting) error {
	if problems := Load(getenv, table); len(problems) > 0 {
		return problems[0]
	}
	return nil
}

// Text is a variable taken as it is, trimmed, or def when unset.
func Text(name, def string, to *string) Setting {
	return Setting{Name: name, Default: def, EvenEmpty: true, Set: func(v string) error { *to = v; return nil }}
}

// RawText is a variable taken as it is, its spaces kept (a password's).
func RawText(name string, to *string) Setting {
	s := Text(name, "", to)
	s.Raw = true
	return s
}

// Bool is a variable of a boolean (strconv.ParseBool's); accepts says what
// holds when it is not one ("a boolean; events are not trusted").
func Bool(name string, to *bool, accepts string) Setting {
	return Setting{Name: name, Set: func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return notA(v, accepts)
		}
		*to = b
		return nil
	}}
}

// Port is a variable of an HTTP port.
func Port(name string, to *int) Setting {
	return Int(name, to, 1, 65535, "a port number")
}

// Int is a variable of a whole number from lo to hi; accepts says so ("a
// whole number from 0 (0: no limit)").
func Int[T ~int | ~int32 | ~int64](name string, to *T, lo, hi int64, accepts string) Setting {
	return IntFunc(name, lo, hi, accepts, func(n int64) { *to = T(n) })
}

// IntFunc is Int handing the number to set.
func IntFunc(name string, lo, hi int64, accepts string, set func(int64)) Setting {
	return Setting{Name: name, Set: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return notA(v, accepts)
		}
		set(n)
		return nil
	}}
}

// Float is a variable of a number from lo to hi (neither NaN nor beyond);
// accepts says so ("a price in US dollars from 0 to 1e6").
func Float(name string, to *float64, lo, hi float64, accepts string) Setting {
	return Setting{Name: name, Set: func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n >= lo && n <= hi) {
			return notA(v, accepts)
		}
		*to = n
		return nil
	}}
}

// notA says what a value is not: `"x" is not a boolean`.
func notA(v, accepts string) error { return fmt.Errorf("%q is not %s", v, accepts) }
