package steps

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The cases check behaviour §1.7 (docs/behaviour.md): the last line that
// starts with TESK_OUTPUT_FILE_LOGS among the last 1,000 lines of the outputs
// filer's log, checked, each file's URL and path added, stored as compact
// JSON with the keys url, path and size_bytes, at most 200,000 bytes.

func outputsTask() *taskspec.Task {
	return taskWith(1, func(t *taskspec.Task) {
		t.Outputs = []taskspec.Output{
			{URL: "s3://bucket/result.txt", Path: "/data/result.txt", Type: taskspec.TypeFile},
			{URL: "https://store.example.org/dir/", Path: "/data/outdir", Type: taskspec.TypeDirectory},
			{URL: "ftp://ftp.example.org/runs", Path: "/work/*/run-?.log", PathPrefix: "/work"},
		}
	})
}

func line(files ...taskspec.UploadedFile) string { return taskspec.FormatOutputFileLogs(files) }

func TestOutputFileLogs(t *testing.T) {
	valid := line(
		taskspec.UploadedFile{Output: 0, Path: "/data/result.txt", SizeBytes: "12"},
		taskspec.UploadedFile{Output: 1, Path: "/data/outdir/a/b.txt", SizeBytes: "0"},
		taskspec.UploadedFile{Output: 2, Path: "/work/s1/run-1.log", SizeBytes: "345"},
	)
	validWant := []tesv1.OutputFileLog{
		{URL: "s3://bucket/result.txt", Path: "/data/result.txt", SizeBytes: "12"},
		{URL: "https://store.example.org/dir/a/b.txt", Path: "/data/outdir/a/b.txt", SizeBytes: "0"},
		{URL: "ftp://ftp.example.org/runs/s1/run-1.log", Path: "/work/s1/run-1.log", SizeBytes: "345"},
	}
	filler := func(n int) string { return strings.Repeat("uploading...\n", n) }

	cases := []struct {
		name string
		log  string
		want []tesv1.OutputFileLog // nil: an error
	}{
		{"URLs for a FILE, a DIRECTORY and a wildcard output", "start\n" + valid + "\ndone\n", validWant},
		{"the last line counts", line(taskspec.UploadedFile{Output: 0, Path: "/data/result.txt", SizeBytes: "1"}) + "\n" + valid + "\n", validWant},
		{"a line within the last 1,000 counts", valid + "\n" + filler(999), validWant},
		{"a line before the last 1,000 does not", valid + "\n" + filler(1000), nil},
		{"CRLF line ends", "a\r\n" + valid + "\r\nb\r\n", validWant},
		{"an empty list", "TESK_OUTPUT_FILE_LOGS []\n", []tesv1.OutputFileLog{}},
		{"no line", "nothing uploaded\n", nil},
		{"a line that is not JSON", "TESK_OUTPUT_FILE_LOGS [{\n", nil},
		{"the last line is invalid, an earlier valid one is not used", valid + "\nTESK_OUTPUT_FILE_LOGS {}\n", nil},
		{"an unknown key", `TESK_OUTPUT_FILE_LOGS [{"output":0,"path":"/data/result.txt","size_bytes":"1","url":"x"}]`, nil},
		{"a line that only contains the prefix elsewhere", "log: TESK_OUTPUT_FILE_LOGS []\n", nil},
		{"an output that the task doesn't have", line(taskspec.UploadedFile{Output: 3, Path: "/data/result.txt", SizeBytes: "1"}), nil},
		{"a negative output", line(taskspec.UploadedFile{Output: -1, Path: "/data/result.txt", SizeBytes: "1"}), nil},
		{"a file that is not the FILE output's", line(taskspec.UploadedFile{Output: 0, Path: "/data/other.txt", SizeBytes: "1"}), nil},
		{"a file outside the DIRECTORY output", line(taskspec.UploadedFile{Output: 1, Path: "/data/outdir2/x", SizeBytes: "1"}), nil},
		{"a file that doesn't match the wildcard", line(taskspec.UploadedFile{Output: 2, Path: "/work/s1/run-10.log", SizeBytes: "1"}), nil},
		{"a relative path", line(taskspec.UploadedFile{Output: 0, Path: "data/result.txt", SizeBytes: "1"}), nil},
		{"a path that is not clean", line(taskspec.UploadedFile{Output: 1, Path: "/data/outdir/../../etc/passwd", SizeBytes: "1"}), nil},
		{"a size that is not a byte count", line(taskspec.UploadedFile{Output: 0, Path: "/data/result.txt", SizeBytes: "12 kB"}), nil},
		{"a negative size", line(taskspec.UploadedFile{Output: 0, Path: "/data/result.txt", SizeBytes: "-1"}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			value, notes, err := OutputFileLogs(outputsTask(), c.log)
			if c.want == nil {
				if err == nil {
					t.Fatalf("no error; value %s", value)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 0 {
				t.Errorf("notes %v", notes)
			}
			got, err := ParseFileLogs(value)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("file logs %+v, want %+v", got, c.want)
			}
			if compact, _ := json.Marshal(got); string(compact) != value {
				t.Errorf("value %s is not compact JSON (%s)", value, compact)
			}
		})
	}
}

func TestOutputFileLogsKeys(t *testing.T) {
	value, _, err := OutputFileLogs(outputsTask(), line(taskspec.UploadedFile{Output: 0, Path: "/data/result.txt", SizeBytes: "12"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"url":"s3://bucket/result.txt","path":"/data/result.txt","size_bytes":"12"}]`; value != want {
		t.Errorf("value %s, want %s", value, want)
	}
}

func TestOutputFileLogsCap(t *testing.T) {
	task := outputsTask()
	var files []taskspec.UploadedFile
	for i := 0; i < 5000; i++ {
		files = append(files, taskspec.UploadedFile{Output: 1, Path: fmt.Sprintf("/data/outdir/sample-%05d/reads.fastq.gz", i), SizeBytes: "1048576"})
	}
	value, notes, err := OutputFileLogs(task, "x\n"+line(files...)+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(value) > MaxOutputFileLogsBytes {
		t.Errorf("value of %d bytes, more than %d", len(value), MaxOutputFileLogsBytes)
	}
	got, err := ParseFileLogs(value)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) >= len(files) {
		t.Fatalf("%d entries kept of %d", len(got), len(files))
	}
	for i, f := range got {
		if f.Path != files[i].Path {
			t.Fatalf("entry %d is %s, want %s: the first entries are kept, in order", i, f.Path, files[i].Path)
		}
	}
	// The next entry would not have fitted.
	next, _ := json.Marshal(tesv1.OutputFileLog{URL: "https://store.example.org/dir/" + strings.TrimPrefix(files[len(got)].Path, "/data/outdir/"), Path: files[len(got)].Path, SizeBytes: "1048576"})
	if len(value)+1+len(next) <= MaxOutputFileLogsBytes {
		t.Errorf("%d entries in %d bytes: entry %d would have fitted", len(got), len(value), len(got))
	}
	if len(notes) != 1 || notes[0].Level != "warn" || !strings.Contains(notes[0].Msg, fmt.Sprintf("the last %d entries are left out", len(files)-len(got))) {
		t.Errorf("notes %+v, want one warning of the entries left out", notes)
	}
}
