// Package filer moves a TES task's inputs onto its volume and its outputs off
// it: inline content, http(s), ftp, s3 and file URLs, files and directories,
// and outputs with wildcards. It is what the inputs and outputs filer jobs
// run (cmd/filer), and can run in-process (Run).
//
// Safety: nothing is written outside the task directory (no "..", no
// symbolic link that leads out of it, no remote name that would), and URLs
// show in logs and errors without user info or query (Redact).
package filer

import "fmt"

// Modes of Run.
const (
	ModeInputs  = "inputs"
	ModeOutputs = "outputs"
)

// Error is the first failure of a run: which input or output, the file's URL
// (redacted) and path in the executors, and why.
type Error struct {
	Mode  string // ModeInputs or ModeOutputs
	Index int    // into Task.Inputs or Task.Outputs
	URL   string // redacted; empty for inline content
	Path  string // in the executors
	Err   error
	msg   string // Err's text, scrubbed of secrets, on one line
}

// Error reads mode[index] URL -> path: why (path -> URL for outputs), with
// what is known of the URL and the path.
func (e *Error) Error() string {
	var where string
	switch {
	case e.URL == "" && e.Path == "":
		where = ""
	case e.URL == "":
		where = " " + e.Path
	case e.Path == "":
		where = " " + e.URL
	case e.Mode == ModeInputs:
		where = " " + e.URL + " -> " + e.Path
	default:
		where = " " + e.Path + " -> " + e.URL
	}
	return fmt.Sprintf("%s[%d]%s: %s", e.Mode, e.Index, where, e.msg)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
