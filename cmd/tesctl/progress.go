package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress writes the progress line: rewritten in place on a terminal, a
// line per change elsewhere.
type progress struct {
	w        io.Writer
	terminal bool
	last     string
	width    int
}

// newProgress is a progress line on w, rewritten in place if w is a
// terminal.
func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// show writes a line; key is what must change for a new line off a
// terminal (the elapsed time alone does not make one).
func (p *progress) show(key, line string) {
	if p.terminal {
		pad := ""
		if n := p.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		p.width = len(line)
		return
	}
	if key != p.last {
		fmt.Fprintln(p.w, line)
	}
	p.last = key
}

// done ends the line being rewritten on a terminal, so that what follows
// starts on a line of its own.
func (p *progress) done() {
	if p.terminal && p.width > 0 {
		fmt.Fprintln(p.w)
		p.width = 0
	}
}
