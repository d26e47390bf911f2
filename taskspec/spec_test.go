package taskspec

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
)

// The cases check the task JSON as the TESK API passes it (behaviour §1.1 in
// docs/behaviour.md: inputs, outputs, volumes, and the refusal of a wildcard
// in the first path component).

const executorJSON = `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"task-1-ex-00","labels":{"job-type":"executor"}},` +
	`"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"alpine:3","command":["true"]}]}}}}`

func taskJSON(rest string) string {
	if rest != "" {
		rest = "," + rest
	}
	return `{"executors":[` + executorJSON + `]` + rest + `}`
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name     string
		json     string
		ok       bool
		warnings []string // of a task that decodes
	}{
		{"executors only", taskJSON(""), true, nil},
		{"inputs, outputs, volumes and resources", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/data/in/a.txt","type":"FILE"},` +
			`{"content":"hello","path":"/data/in/hello.txt"},{"url":"s3://b/dir","path":"/data/ref","type":"DIRECTORY"}],` +
			`"outputs":[{"url":"s3://b/out","path":"/data/out/o.txt"},{"url":"s3://b/w","path":"/data/*/o.txt","path_prefix":"/data"}],` +
			`"volumes":["/scratch"],"resources":{"cpu_cores":2,"ram_gb":4,"disk_gb":10}`), true, nil},
		{"an executor's Job fields are checked by type only (the API server checks the rest)",
			`{"executors":[{"spec":{"template":{"spec":{"containers":[{"image":"a","futureField":1}]}}}}]}`, true,
			[]string{`unknown field "executors[0].spec.template.spec.containers[0].futureField"`}},
		{"not JSON", `{"executors":`, false, nil},
		{"not an object", `[]`, false, nil},
		// Unknown fields are warnings, not refusals (behaviour §8.5).
		{"an unknown field of the task", taskJSON(`"executer":[]`), true, []string{`unknown field "executer"`}},
		{"an unknown field of an input", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/a/b","mode":"r"}]`), true, []string{`unknown field "inputs[0].mode"`}},
		{"an unknown field of an output", taskJSON(`"outputs":[{"url":"s3://b/o","path":"/a/b","prefix":"/a"}]`), true, []string{`unknown field "outputs[0].prefix"`}},
		{"an unknown field of the resources", taskJSON(`"resources":{"disk_gb":1,"gpu":2}`), true, []string{`unknown field "resources.gpu"`}},
		{"a known field of the wrong type", taskJSON(`"resources":{"disk_gb":"1"}`), false, nil},
		{"an executor field of the wrong type", `{"executors":[{"spec":{"backoffLimit":"3","template":{"spec":{"containers":[{"image":"a"}]}}}}]}`, false, nil},
		{"no executors", `{"executors":[]}`, false, nil},
		{"an executor without containers", `{"executors":[{"spec":{"template":{"spec":{}}}}]}`, false, nil},
		{"a container without an image", `{"executors":[{"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}]}`, false, nil},
		{"a relative input path", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"data/a"}]`), false, nil},
		{"an input path with ..", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/data/../etc/a"}]`), false, nil},
		{"an input at the root", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/"}]`), false, nil},
		{"an input with neither url nor content", taskJSON(`"inputs":[{"path":"/data/a"}]`), false, nil},
		{"a DIRECTORY input with content", taskJSON(`"inputs":[{"content":"x","path":"/data/a","type":"DIRECTORY"}]`), false, nil},
		{"a DIRECTORY input without url", taskJSON(`"inputs":[{"path":"/data/a","type":"DIRECTORY"}]`), false, nil},
		{"an unknown file type", taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/data/a","type":"LINK"}]`), false, nil},
		{"an output without url", taskJSON(`"outputs":[{"path":"/data/o"}]`), false, nil},
		{"an output with a relative path_prefix", taskJSON(`"outputs":[{"url":"s3://b/","path":"/data/*.txt","path_prefix":"data"}]`), false, nil},
		{"a volume that is not clean", taskJSON(`"volumes":["/scratch//tmp"]`), false, nil},
		{"a negative disk size", taskJSON(`"resources":{"disk_gb":-1}`), false, nil},
		{"a path with a NUL", taskJSON(`"volumes":["/scratch\u0000x"]`), false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task, err := Decode([]byte(c.json))
			if c.ok {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if err := task.Validate(); err != nil {
					t.Errorf("a decoded task fails Validate: %v", err)
				}
				if !slices.Equal(task.Warnings, c.warnings) {
					t.Errorf("warnings %q, want %q", task.Warnings, c.warnings)
				}
				return
			}
			if !invalid.Is(err) {
				t.Fatalf("Decode = %+v, %v; want an invalid.Error", task, err)
			}
		})
	}

	t.Run("a task JSON over MaxSize", func(t *testing.T) {
		big := taskJSON(`"volumes":["/` + strings.Repeat("v", MaxSize) + `"]`)
		if _, err := Decode([]byte(big)); !invalid.Is(err) {
			t.Errorf("Decode: %v, want an invalid.Error", err)
		}
	})
}

func TestDecodeGzip(t *testing.T) {
	raw := []byte(taskJSON(`"volumes":["/scratch"]`))
	task, err := DecodeGzip(Gzip(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(task.Volumes, []string{"/scratch"}) || len(task.Executors) != 1 {
		t.Errorf("task %+v", task)
	}
	if _, err := DecodeGzip(raw); !invalid.Is(err) {
		t.Errorf("plain JSON as gzip: %v, want an invalid.Error", err)
	}
	if _, err := DecodeGzip(Gzip(raw)[:20]); !invalid.Is(err) {
		t.Errorf("truncated gzip: %v, want an invalid.Error", err)
	}
	// A small gzip that expands beyond MaxSize is refused without holding it
	// all.
	bomb := Gzip(append([]byte(taskJSON(`"volumes":["/`)), bytes.Repeat([]byte("v"), 4*MaxSize)...))
	if len(bomb) > MaxSize/10 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	if _, err := DecodeGzip(bomb); !invalid.Is(err) {
		t.Errorf("a gzip over MaxSize: %v, want an invalid.Error", err)
	}
}

func TestRefusalOfFilesUnderRoot(t *testing.T) {
	task := &Task{Inputs: []Input{{Path: "/in.txt", Content: "x"}}}
	if err := task.Refusal(); err == nil || !strings.Contains(err.Error(), "directly under /") {
		t.Errorf("Refusal = %v, want a file input directly under / refused", err)
	}
	// A DIRECTORY directly under / is mounted at its own path.
	task = &Task{
		Inputs:  []Input{{Path: "/ref", URL: "s3://b/ref", Type: TypeDirectory}},
		Outputs: []Output{{Path: "/outputs", URL: "s3://b/out", Type: TypeDirectory}},
	}
	if err := task.Refusal(); err != nil {
		t.Errorf("Refusal = %v, want DIRECTORY inputs and outputs under / accepted", err)
	}
}

func TestRefusal(t *testing.T) {
	cases := []struct {
		name string
		out  Output
		want string // part of the refusal; "" for none
	}{
		{"behaviour §1.1: a wildcard in the first component would need a mount at /", Output{URL: "s3://b/", Path: "/*.txt", PathPrefix: "/"}, "first component"},
		{"behaviour §1.1: a wildcard directory in the first component", Output{URL: "s3://b/", Path: "/da?a/out.txt", PathPrefix: "/"}, "first component"},
		{"behaviour §1.1: a character class in the first component", Output{URL: "s3://b/", Path: "/[abc]/out.txt", PathPrefix: "/"}, "first component"},
		{"behaviour §1.1: wildcards need a path_prefix (TES 1.1)", Output{URL: "s3://b/", Path: "/data/*.txt"}, "path_prefix"},
		{"a path_prefix that is not a prefix of the path", Output{URL: "s3://b/", Path: "/data/*.txt", PathPrefix: "/other"}, "not a prefix"},
		{"a path_prefix that only shares characters", Output{URL: "s3://b/", Path: "/data/*.txt", PathPrefix: "/da"}, "not a prefix"},
		{"a pattern that does not parse", Output{URL: "s3://b/", Path: "/data/[a-.txt", PathPrefix: "/data"}, "not a valid pattern"},
		{"behaviour §1.1: a wildcard below the first component with its prefix runs", Output{URL: "s3://b/", Path: "/data/*/out.txt", PathPrefix: "/data"}, ""},
		{"a root path_prefix below a static first component runs", Output{URL: "s3://b/", Path: "/data/*.txt", PathPrefix: "/"}, ""},
		{"a plain file runs", Output{URL: "s3://b/o", Path: "/data/o.txt"}, ""},
		{"an output directly under / would need a mount at /", Output{URL: "s3://b/o", Path: "/o.txt"}, "directly under /"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := &Task{Outputs: []Output{{URL: "s3://b/first", Path: "/data/first.txt"}, c.out}}
			err := task.Refusal()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Refusal = %v, want %q", err, c.want)
			case c.want != "" && !strings.Contains(err.Error(), "outputs[1]"):
				t.Errorf("Refusal = %v: it doesn't name the output", err)
			}
		})
	}
}

func TestMountDirs(t *testing.T) {
	task := &Task{
		Volumes: []string{"/scratch/", "/data/in"},
		Inputs: []Input{
			{URL: "https://e.org/a", Path: "/data/in/a.txt"},
			{URL: "https://e.org/b", Path: "/data/in/b.txt"},
			{URL: "s3://b/ref", Path: "/ref/genome", Type: TypeDirectory},
		},
		Outputs: []Output{
			{URL: "s3://b/o", Path: "/data/out/o.txt"},
			{URL: "s3://b/d", Path: "/results/dir/", Type: TypeDirectory},
			{URL: "s3://b/w", Path: "/work/run/*/x-?.log", PathPrefix: "/work"},
		},
	}
	// A DIRECTORY is mounted at its own path, a FILE at its parent.
	want := []string{"/data/in", "/data/out", "/ref/genome", "/results/dir", "/scratch", "/work/run"}
	if got := task.MountDirs(); !slices.Equal(got, want) {
		t.Errorf("MountDirs = %v, want %v", got, want)
	}
	if !task.NeedsVolume() {
		t.Error("NeedsVolume = false")
	}
	if (&Task{}).NeedsVolume() {
		t.Error("a task without inputs, outputs or volumes needs a volume")
	}
	for _, tk := range []*Task{{Inputs: task.Inputs[:1]}, {Outputs: task.Outputs[:1]}, {Volumes: task.Volumes[:1]}} {
		if !tk.NeedsVolume() {
			t.Errorf("%+v needs no volume", tk)
		}
	}
}

// FuzzDecode: Decode and DecodeGzip never panic; a task they return passes
// Validate, and one that is not refused mounts only clean absolute
// directories, none of them the root, for its volumes and wildcard outputs.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(taskJSON("")), false)
	f.Add([]byte(taskJSON(`"inputs":[{"url":"https://e.org/a","path":"/data/in/a.txt"},{"content":"x","path":"/x/y"}],`+
		`"outputs":[{"url":"s3://b/w","path":"/data/*/o.txt","path_prefix":"/data"},{"url":"s3://b/d","path":"/out","type":"DIRECTORY"}],`+
		`"volumes":["/scratch"],"resources":{"disk_gb":1.5}`)), false)
	f.Add([]byte(taskJSON(`"outputs":[{"url":"s3://b/","path":"/*.txt","path_prefix":"/"}]`)), false)
	f.Add([]byte(taskJSON(`"outputs":[{"url":"s3://b/","path":"/d/[a-","path_prefix":"/d"}]`)), false)
	f.Add(Gzip([]byte(taskJSON(`"volumes":["/v"]`))), true)
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, true)
	f.Add([]byte(`{"executors":[{"spec":{"template":{"spec":{"containers":[{"image":"a","resources":{"limits":{"cpu":"1e999"}}}]}}}}]}`), false)
	f.Add([]byte(`null`), false)
	f.Fuzz(func(t *testing.T, data []byte, gzipped bool) {
		var task *Task
		var err error
		if gzipped {
			task, err = DecodeGzip(data)
		} else {
			task, err = Decode(data)
		}
		if err != nil {
			if !invalid.Is(err) {
				t.Fatalf("error %v is not an invalid.Error", err)
			}
			if task != nil {
				t.Fatal("a task with an error")
			}
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatalf("a decoded task fails Validate: %v", err)
		}
		for _, o := range task.Outputs {
			o.URLFor(o.Path)
			o.URLFor(path.Join(o.MountDir(), "x"))
		}
		if task.Refusal() != nil {
			return
		}
		for _, d := range task.MountDirs() {
			if !path.IsAbs(d) || path.Clean(d) != d {
				t.Fatalf("mount dir %q is not a clean absolute path", d)
			}
		}
		for _, v := range task.Volumes {
			if path.Clean(v) == "/" {
				t.Fatalf("volume %q at the root", v)
			}
		}
		for _, o := range task.Outputs {
			if HasWildcard(o.Path) && o.MountDir() == "/" {
				t.Fatalf("wildcard output %q mounted at the root", o.Path)
			}
		}
	})
}
