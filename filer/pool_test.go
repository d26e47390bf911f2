package filer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestFirstFailure(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	for _, tc := range []struct {
		name string
		in   []failure
		want error
	}{
		{"none", nil, nil},
		{"one", []failure{{seq: 4, err: a}}, a},
		{"the earliest file, whatever order they ended in", []failure{{seq: 9, err: b}, {seq: 2, err: a}, {seq: 5, err: c}}, a},
		{"a cause before a cancellation", []failure{{seq: 1, after: true, err: a}, {seq: 7, err: b}}, b},
		{"the earliest cause among cancellations", []failure{{seq: 3, after: true, err: a}, {seq: 8, err: b}, {seq: 6, err: c}, {seq: 0, after: true, err: a}}, c},
		{"only cancellations: the earliest", []failure{{seq: 5, after: true, err: b}, {seq: 2, after: true, err: a}}, a},
	} {
		if got := firstFailure(tc.in); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Many files through the pool over file:// URLs, each with its own bytes.
func TestPoolManyFiles(t *testing.T) {
	for _, par := range []int{1, 3, 16} {
		t.Run(fmt.Sprint(par), func(t *testing.T) {
			opts, base := fileOptions(t)
			opts.Parallelism = par
			const n = 300
			var ins []taskspec.Input
			for i := range n {
				writeFile(t, filepath.Join(base, fmt.Sprintf("in/tree/d%d/f%d", i%7, i)), strings.Repeat(fmt.Sprint(i), i))
				if i%10 == 0 {
					ins = append(ins, taskspec.Input{URL: fmt.Sprintf("file:///transfer/host/in/tree/d%d/f%d", i%7, i), Path: fmt.Sprintf("/data/single/f%d", i)})
				}
			}
			ins = append(ins, taskspec.Input{URL: "file:///transfer/host/in/tree", Path: "/data/tree", Type: taskspec.TypeDirectory})
			task := newTask(ins, []taskspec.Output{
				{URL: "file:///transfer/host/out/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
				{URL: "file:///transfer/host/out/single", Path: "/data/single/*", PathPrefix: "/data/single"},
			})
			mustRun(t, ModeInputs, task, opts)
			files := mustRun(t, ModeOutputs, task, opts)
			if len(files) != n+n/10 {
				t.Fatalf("%d files uploaded, want %d", len(files), n+n/10)
			}
			// In the order of the outputs, and of the files of each.
			for k, f := range files {
				wantOut := 0
				if k >= n {
					wantOut = 1
				}
				if f.Output != wantOut || (k > 0 && files[k-1].Output == f.Output && files[k-1].Path >= f.Path) {
					t.Fatalf("files out of order at %d: %+v after %+v", k, f, files[max(k-1, 0)])
				}
			}
			for i := range n {
				want := strings.Repeat(fmt.Sprint(i), i)
				if got := readFile(t, filepath.Join(base, fmt.Sprintf("out/tree/d%d/f%d", i%7, i))); got != want {
					t.Fatalf("f%d: %d bytes, want %d", i, len(got), len(want))
				}
				if i%10 == 0 {
					if got := readFile(t, filepath.Join(base, fmt.Sprintf("out/single/f%d", i))); got != want {
						t.Fatalf("single f%d: %d bytes, want %d", i, len(got), len(want))
					}
				}
			}
		})
	}
}

// One failing file among many fails the run, naming that file, and stops
// the other transfers.
func TestPoolOneFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		// setup writes what the task needs into base (the transfer volume)
		// and the task directory, and returns the task.
		setup func(t *testing.T, base, taskDir string) *taskspec.Task
		want  []string
		total int // files to move
	}{
		{
			name: "one missing input of many",
			mode: ModeInputs,
			setup: func(t *testing.T, base, _ string) *taskspec.Task {
				var ins []taskspec.Input
				for i := range 500 {
					if i != 37 {
						writeFile(t, filepath.Join(base, fmt.Sprintf("in/f%d", i)), "x")
					}
					ins = append(ins, taskspec.Input{URL: fmt.Sprintf("file:///transfer/host/in/f%d", i), Path: fmt.Sprintf("/data/f%d", i)})
				}
				return newTask(ins, nil)
			},
			want:  []string{"inputs[37]", "file:///transfer/host/in/f37", "/data/f37", "no such file"},
			total: 500,
		},
		{
			name: "one file of a DIRECTORY output that cannot be written",
			mode: ModeOutputs,
			setup: func(t *testing.T, base, taskDir string) *taskspec.Task {
				for i := range 500 {
					writeFile(t, filepath.Join(taskDir, fmt.Sprintf("data/out/f%03d", i)), "x")
				}
				// A directory where file f123 should go.
				if err := os.MkdirAll(filepath.Join(base, "out/f123/x"), 0o755); err != nil {
					t.Fatal(err)
				}
				return newTask(nil, []taskspec.Output{{URL: "file:///transfer/host/out", Path: "/data/out", Type: taskspec.TypeDirectory}})
			},
			want:  []string{"outputs[0]", "/data/out/f123", "file:///transfer/host/out/f123", "existing directory"},
			total: 500,
		},
		{
			name: "two failures: the earlier file is named",
			mode: ModeInputs,
			setup: func(t *testing.T, base, _ string) *taskspec.Task {
				var ins []taskspec.Input
				for i := range 50 {
					if i != 3 && i != 4 {
						writeFile(t, filepath.Join(base, fmt.Sprintf("in/f%d", i)), "x")
					}
					ins = append(ins, taskspec.Input{URL: fmt.Sprintf("file:///transfer/host/in/f%d", i), Path: fmt.Sprintf("/data/f%d", i)})
				}
				return newTask(ins, nil)
			},
			want:  []string{"inputs[3]", "/data/f3"},
			total: 50,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, base := fileOptions(t)
			var lb *logBuffer
			opts2, lb2 := testOptions(t)
			opts.Logger, lb = opts2.Logger, lb2
			opts.Parallelism = 4
			if tc.name == "two failures: the earlier file is named" {
				opts.Parallelism = 1
			}
			task := tc.setup(t, base, opts.TaskDir)
			files, err := Run(context.Background(), tc.mode, task, opts)
			if err == nil {
				t.Fatal("no error")
			}
			if files != nil {
				t.Errorf("files reported after a failure: %d", len(files))
			}
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *filer.Error", err, err)
			}
			wantContains(t, "error", err.Error(), tc.want...)
			if strings.Contains(lb.String(), "msg=done") {
				t.Error("the log reports the run done")
			}
			// The other transfers stopped: not all the others ran.
			moved := strings.Count(lb.String(), "msg=downloaded") + strings.Count(lb.String(), "msg=uploaded")
			if moved >= tc.total-1 {
				t.Errorf("%d of the other %d files moved: the failure did not stop them", moved, tc.total-1)
			}
			if opts.Parallelism == 1 && moved != 3 {
				t.Errorf("%d files moved one at a time before the failure of the fourth", moved)
			}
		})
	}
}
