package filer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func fileOptions(t *testing.T) (Options, string) {
	opts, _ := testOptions(t)
	opts.HostBasePath = "/transfer/host"
	opts.ContainerBasePath = t.TempDir()
	return opts, opts.ContainerBasePath
}

func TestFileURLs(t *testing.T) {
	opts, base := fileOptions(t)
	writeFile(t, filepath.Join(base, "in/a.txt"), "file a")
	writeFile(t, filepath.Join(base, "in/tree/b.txt"), "B")
	writeFile(t, filepath.Join(base, "in/tree/sub/c.txt"), "C")
	os.MkdirAll(filepath.Join(base, "in/tree/empty"), 0o755)
	os.Symlink("b.txt", filepath.Join(base, "in/tree/link.txt"))
	task := newTask([]taskspec.Input{
		{URL: "file:///transfer/host/in/a.txt", Path: "/data/a.txt"},
		{URL: "file://localhost/transfer/host/in/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
	}, []taskspec.Output{
		{URL: "file:///transfer/host/out/a.txt", Path: "/data/a.txt"},
		{URL: "file:///transfer/host/out/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
	})
	mustRun(t, ModeInputs, task, opts)
	for p, want := range map[string]string{"/data/a.txt": "file a", "/data/tree/b.txt": "B", "/data/tree/sub/c.txt": "C", "/data/tree/link.txt": "B"} {
		if got := readFile(t, inTask(opts, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	if fi, err := os.Stat(inTask(opts, "/data/tree/empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory: %v", err)
	}
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 4 {
		t.Errorf("uploaded %+v", files)
	}
	for p, want := range map[string]string{"out/a.txt": "file a", "out/tree/b.txt": "B", "out/tree/sub/c.txt": "C", "out/tree/link.txt": "B"} {
		if got := readFile(t, filepath.Join(base, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	// The empty directory of the DIRECTORY output is created too.
	if fi, err := os.Stat(filepath.Join(base, "out/tree/empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty output directory: %v", err)
	}
}

// Empty directories of a DIRECTORY output, nested or the output itself,
// are created below the file:// URL.
func TestFileEmptyDirectories(t *testing.T) {
	opts, base := fileOptions(t)
	for _, d := range []string{"data/tree/e1", "data/tree/sub/e2/e3", "data/none"} {
		if err := os.MkdirAll(inTask(opts, "/"+d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, inTask(opts, "/data/tree/sub/f.txt"), "F")
	task := newTask(nil, []taskspec.Output{
		{URL: "file:///transfer/host/out/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
		{URL: "file:///transfer/host/out/none", Path: "/data/none", Type: taskspec.TypeDirectory},
	})
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 1 || files[0].Path != "/data/tree/sub/f.txt" {
		t.Errorf("uploaded %+v, want only /data/tree/sub/f.txt (directories are not files)", files)
	}
	for _, d := range []string{"out/tree/e1", "out/tree/sub/e2/e3", "out/none"} {
		if fi, err := os.Stat(filepath.Join(base, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	if got := readFile(t, filepath.Join(base, "out/tree/sub/f.txt")); got != "F" {
		t.Errorf("f.txt holds %q", got)
	}
	// A file where an empty directory should go: a clear error.
	writeFile(t, filepath.Join(base, "out2/e1"), "in the way")
	task = newTask(nil, []taskspec.Output{{URL: "file:///transfer/host/out2", Path: "/data/tree", Type: taskspec.TypeDirectory}})
	wantContains(t, "error", runErr(t, ModeOutputs, task, opts), "outputs[0]", "/data/tree/e1", "file exists")
}

func TestFileURLsStayBelowBasePath(t *testing.T) {
	opts, base := fileOptions(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "secret")
	symlink(t, outside, filepath.Join(base, "escape"))
	symlink(t, "../../../../../../../.."+outside, filepath.Join(base, "escape2"))
	writeFile(t, inTask(opts, "/data/o"), "o")
	for _, tc := range []struct {
		url, want string
	}{
		{"file:///etc/passwd", "not below HOST_BASE_PATH"},
		{"file:///transfer/hostile/x", "not below HOST_BASE_PATH"},
		{"file:///transfer/host/../host2/x", "'..'"},
		{"file://otherhost/transfer/host/x", "host \"otherhost\" is not allowed"},
		{"file:///transfer/host/escape/secret", "escape"},
		{"file:///transfer/host/escape2/secret", "escape"},
	} {
		task := newTask([]taskspec.Input{{URL: tc.url, Path: "/data/x"}}, nil)
		wantContains(t, "input error", runErr(t, ModeInputs, task, opts), "inputs[0]", tc.want)
		task = newTask(nil, []taskspec.Output{{URL: tc.url, Path: "/data/o"}})
		wantContains(t, "output error", runErr(t, ModeOutputs, task, opts), "outputs[0]", tc.want)
	}
	if entries := readDir(t, outside); len(entries) != 1 {
		t.Errorf("something was written outside the base path: %v", entries)
	}
	opts.HostBasePath, opts.ContainerBasePath = "", ""
	task := newTask([]taskspec.Input{{URL: "file:///transfer/host/x", Path: "/data/x"}}, nil)
	wantContains(t, "error", runErr(t, ModeInputs, task, opts), "HOST_BASE_PATH")
}

// Nextflow's nf-ga4gh (1.4.2, TesTaskHandler.inItem and outItem) stages
// and collects files by their names: a name with a bracket or a question
// mark is an input's path as it is, and an output's path as it is when the
// output has no path_prefix; with one it is a pattern.
func TestFileNamesWithPatternCharacters(t *testing.T) {
	opts, base := fileOptions(t)
	writeFile(t, filepath.Join(base, "in/sample[1]?.fq"), "reads")
	task := newTask([]taskspec.Input{
		{URL: "file:///transfer/host/in/sample%5B1%5D%3F.fq", Path: "/work/sample[1]?.fq"},
	}, []taskspec.Output{
		{URL: "file:///transfer/host/out/x[1].txt", Path: "/work/x[1].txt"},
		{URL: "file:///transfer/host/out/glob", Path: "/work/y[12].txt", PathPrefix: "/work"},
	})
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/work/sample[1]?.fq")); got != "reads" {
		t.Errorf("the input holds %q", got)
	}
	writeFile(t, inTask(opts, "/work/x[1].txt"), "literal")
	writeFile(t, inTask(opts, "/work/y1.txt"), "matched")
	writeFile(t, inTask(opts, "/work/y[12].txt"), "not matched")
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 2 {
		t.Errorf("uploaded %+v", files)
	}
	for p, want := range map[string]string{"out/x[1].txt": "literal", "out/glob/y1.txt": "matched"} {
		if got := readFile(t, filepath.Join(base, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "out/glob/y[12].txt")); err == nil {
		t.Error("the pattern's own name was uploaded")
	}
}
