package steps

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

const (
	// OutputLogTailLines is how many of the outputs filer's last log lines
	// are searched for the uploaded files.
	OutputLogTailLines = 1000
	// MaxOutputFileLogsBytes bounds the annotation: Kubernetes allows 256 KiB
	// for all of a job's annotations.
	MaxOutputFileLogsBytes = 200000
)

// OutputFileLogs reads the uploaded files from the outputs filer's log: the
// last line that starts with TESK_OUTPUT_FILE_LOGS among the last 1,000
// lines, checked against the task's outputs, each file's URL derived from its
// output as the upload derives it. It returns the annotation's value (compact
// JSON, at most MaxOutputFileLogsBytes: the last entries are left out, with a
// warning).
func OutputFileLogs(t *taskspec.Task, log string) (string, []Note, error) {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > OutputLogTailLines {
		lines = lines[len(lines)-OutputLogTailLines:]
	}
	line := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], taskspec.OutputFileLogsPrefix) {
			line = strings.TrimRight(lines[i], "\r")
			break
		}
	}
	if line == "" {
		return "", nil, fmt.Errorf("no %s line among the last %d lines of the outputs filer's log", taskspec.OutputFileLogsPrefix, OutputLogTailLines)
	}
	files, err := taskspec.ParseOutputFileLogs(line)
	if err != nil {
		return "", nil, err
	}
	logs := make([]tesv1.OutputFileLog, 0, len(files))
	for i, f := range files {
		if f.Output < 0 || f.Output >= len(t.Outputs) {
			return "", nil, fmt.Errorf("entry %d: output %d is not one of the task's %d outputs", i, f.Output, len(t.Outputs))
		}
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return "", nil, fmt.Errorf("entry %d: path %q is not a clean absolute path", i, f.Path)
		}
		if n, err := strconv.ParseInt(f.SizeBytes, 10, 64); err != nil || n < 0 {
			return "", nil, fmt.Errorf("entry %d: size_bytes %q is not a byte count", i, f.SizeBytes)
		}
		url, ok := t.Outputs[f.Output].URLFor(f.Path)
		if !ok {
			return "", nil, fmt.Errorf("entry %d: %q is not a file of output %d (%s)", i, f.Path, f.Output, t.Outputs[f.Output].Path)
		}
		logs = append(logs, tesv1.OutputFileLog{URL: url, Path: f.Path, SizeBytes: f.SizeBytes})
	}
	var notes []Note
	b, _ := json.Marshal(logs)
	if len(b) > MaxOutputFileLogsBytes {
		// Keep the longest prefix of entries that fits.
		size, kept := 2, 0 // "[]"
		for _, l := range logs {
			e, _ := json.Marshal(l)
			add := len(e)
			if kept > 0 {
				add++ // comma
			}
			if size+add > MaxOutputFileLogsBytes {
				break
			}
			size += add
			kept++
		}
		notes = append(notes, Note{Level: "warn", Msg: fmt.Sprintf("The output file logs of %d files take %d bytes, more than %d: the last %d entries are left out", len(logs), len(b), MaxOutputFileLogsBytes, len(logs)-kept)})
		b, _ = json.Marshal(logs[:kept])
	}
	return string(b), notes, nil
}

// ParseFileLogs reads the annotation back.
func ParseFileLogs(s string) ([]tesv1.OutputFileLog, error) {
	var logs []tesv1.OutputFileLog
	if err := json.Unmarshal([]byte(s), &logs); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", taskmeta.AnnotationOutputFileLogs, err)
	}
	return logs, nil
}
