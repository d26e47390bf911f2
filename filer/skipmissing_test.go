package filer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// After an executor failed, the outputs filer uploads the outputs that
// exist and leaves out those the executors did not write, FILE and
// DIRECTORY alike, whatever their order; without the option a missing
// output fails the filer and names it.
func TestSkipMissingOutputs(t *testing.T) {
	task := newTask(nil, []taskspec.Output{
		{URL: "file:///transfer/host/out/.exitcode", Path: "/work/.exitcode"},
		{URL: "file:///transfer/host/out/result.txt", Path: "/work/result.txt"},
		{URL: "file:///transfer/host/out/dir", Path: "/work/dir", Type: taskspec.TypeDirectory},
		{URL: "file:///transfer/host/out/.command.err", Path: "/work/.command.err"},
	})
	opts, base := fileOptions(t)
	writeFile(t, inTask(opts, "/work/.command.err"), "boom\n")

	msg := runErr(t, ModeOutputs, task, opts)
	wantContains(t, "the filer's error", msg, "/work/.exitcode", "did not create it")

	opts.SkipMissingOutputs = true
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 1 || files[0].Path != "/work/.command.err" {
		t.Errorf("uploaded %+v, want .command.err alone", files)
	}
	if got := readFile(t, filepath.Join(base, "out/.command.err")); got != "boom\n" {
		t.Errorf("uploaded .command.err holds %q", got)
	}
	for _, p := range []string{"out/.exitcode", "out/result.txt", "out/dir"} {
		if _, err := os.Stat(filepath.Join(base, p)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want nothing uploaded", p, err)
		}
	}
	// Any other error still fails the filer.
	writeFile(t, inTask(opts, "/work/dir"), "a file where a directory is expected")
	wantContains(t, "a DIRECTORY output that is a file", runErr(t, ModeOutputs, task, opts), "not a directory")
}

func TestSkipMissingOutputsFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "true": true, " true ": true} {
		t.Setenv("TESK_OUTPUTS_SKIP_MISSING", v)
		o, err := OptionsFromEnv()
		if err != nil || o.SkipMissingOutputs != want {
			t.Errorf("TESK_OUTPUTS_SKIP_MISSING=%q: %v, %v; want %v", v, o.SkipMissingOutputs, err, want)
		}
	}
	t.Setenv("TESK_OUTPUTS_SKIP_MISSING", "yes")
	if _, err := OptionsFromEnv(); err == nil {
		t.Error("TESK_OUTPUTS_SKIP_MISSING=yes: no error")
	}
}
