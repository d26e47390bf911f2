package taskspec

import (
	"encoding/json"
	"strings"
)

// OutputFileLogsPrefix starts the line of the outputs filer's log that lists
// the files it uploaded; the handler reads it back.
const OutputFileLogsPrefix = "TESK_OUTPUT_FILE_LOGS"

// UploadedFile is one entry of that line: which output (an index into
// Task.Outputs) the file was uploaded for, its path in the executors and its
// size. The URL is left out of the log, as URLs may hold credentials; the
// handler derives it with Output.URLFor, as the upload did.
type UploadedFile struct {
	Output    int    `json:"output"`
	Path      string `json:"path"`
	SizeBytes string `json:"size_bytes"`
}

// FormatOutputFileLogs renders the line, without a trailing newline.
func FormatOutputFileLogs(files []UploadedFile) string {
	if files == nil {
		files = []UploadedFile{}
	}
	b, _ := json.Marshal(files)
	return OutputFileLogsPrefix + " " + string(b)
}

// ParseOutputFileLogs parses one such line.
func ParseOutputFileLogs(line string) ([]UploadedFile, error) {
	rest, ok := strings.CutPrefix(line, OutputFileLogsPrefix)
	if !ok {
		return nil, schemaErr("not a %s line", OutputFileLogsPrefix)
	}
	var files []UploadedFile
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(rest)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&files); err != nil {
		return nil, schemaErr("%s: %v", OutputFileLogsPrefix, err)
	}
	return files, nil
}
