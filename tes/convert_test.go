package tes

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func TestCommand(t *testing.T) {
	cases := []struct {
		name string
		ex   tesv1.Executor
		want []string
	}{
		{"without redirections the command is kept as it is",
			tesv1.Executor{Command: []string{"echo", "a b", "$HOME"}},
			[]string{"echo", "a b", "$HOME"}},
		{"stdout: through the shell, appended",
			tesv1.Executor{Command: []string{"echo", "hello"}, Stdout: "/out/stdout.txt"},
			[]string{"/bin/sh", "-c", "echo hello > /out/stdout.txt"}},
		{"all three redirections, in order",
			tesv1.Executor{Command: []string{"md5sum"}, Stdin: "/data/in", Stdout: "/data/out", Stderr: "/data/err"},
			[]string{"/bin/sh", "-c", "md5sum < /data/in > /data/out 2> /data/err"}},
		{"words with spaces and shell characters are single-quoted",
			tesv1.Executor{Command: []string{"sh", "-c", "echo $X | wc -l"}, Stderr: "/tmp/e"},
			[]string{"/bin/sh", "-c", "sh -c 'echo $X | wc -l' 2> /tmp/e"}},
		{"a single quote inside a word",
			tesv1.Executor{Command: []string{"echo", "it's"}, Stdout: "/o"},
			[]string{"/bin/sh", "-c", `echo 'it'"'"'s' > /o`}},
		{"an empty word stays a word",
			tesv1.Executor{Command: []string{"printf", ""}, Stdout: "/o"},
			[]string{"/bin/sh", "-c", "printf '' > /o"}},
		{"a redirection path with a space is quoted",
			tesv1.Executor{Command: []string{"cat"}, Stdin: "/data/my file"},
			[]string{"/bin/sh", "-c", "cat < '/data/my file'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Command(c.ex); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Command = %q, want %q", got, c.want)
			}
		})
	}
}

func TestConvert(t *testing.T) {
	base := func() *tesv1.Task {
		return &tesv1.Task{
			Name:      "hello",
			Executors: []tesv1.Executor{{Image: "alpine", Command: []string{"echo", "hi"}}},
		}
	}
	cases := []struct {
		name  string
		task  func() *tesv1.Task
		opts  ConvertOptions
		check func(t *testing.T, spec *taskspec.Task)
	}{
		{"names, labels and annotations as the TESK API's", base, ConvertOptions{User: "alice"}, func(t *testing.T, s *taskspec.Task) {
			j := s.Executors[0]
			if j.Name != "task-0000abcd-ex-00" {
				t.Errorf("name %q", j.Name)
			}
			want := map[string]string{"job-type": "executor", "taskmaster-name": "task-0000abcd", "executor-no": "0", "creator-user-id": "alice"}
			if !reflect.DeepEqual(j.Labels, want) {
				t.Errorf("labels %v, want %v", j.Labels, want)
			}
			if j.Annotations["tes-task-name"] != "hello" {
				t.Errorf("annotations %v", j.Annotations)
			}
			if _, ok := j.Annotations["ignore-error"]; ok {
				t.Errorf("ignore-error set without ignore_error")
			}
			c := j.Spec.Template.Spec.Containers[0]
			if c.Image != "alpine" || !reflect.DeepEqual(c.Command, []string{"echo", "hi"}) || c.Name != j.Name {
				t.Errorf("container %+v", c)
			}
			if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restartPolicy %q", j.Spec.Template.Spec.RestartPolicy)
			}
			if s.Resources.DiskGB != DefaultDiskGB {
				t.Errorf("disk_gb %v, want the default %v", s.Resources.DiskGB, DefaultDiskGB)
			}
			if len(c.Resources.Requests) != 0 {
				t.Errorf("requests without resources: %v", c.Resources.Requests)
			}
		}},
		{"executors in order, each its own number", func() *tesv1.Task {
			tk := base()
			tk.Executors = append(tk.Executors, tesv1.Executor{Image: "busybox", Command: []string{"true"}}, tesv1.Executor{Image: "busybox", Command: []string{"false"}, IgnoreError: true})
			return tk
		}, ConvertOptions{}, func(t *testing.T, s *taskspec.Task) {
			for i, j := range s.Executors {
				if want := "task-0000abcd-ex-0" + string(rune('0'+i)); j.Name != want || j.Labels["executor-no"] != string(rune('0'+i)) {
					t.Errorf("executor %d: %s %v", i, j.Name, j.Labels)
				}
				if _, ok := j.Labels["creator-user-id"]; ok {
					t.Errorf("creator-user-id without a user")
				}
			}
			if s.Executors[2].Annotations["ignore-error"] != "true" || s.Executors[1].Annotations["ignore-error"] != "" {
				t.Errorf("ignore-error: %v %v", s.Executors[1].Annotations, s.Executors[2].Annotations)
			}
		}},
		{"env sorted by name, workdir as workingDir", func() *tesv1.Task {
			tk := base()
			tk.Executors[0].Env = map[string]string{"B": "2", "A": "1 one"}
			tk.Executors[0].Workdir = "/data"
			return tk
		}, ConvertOptions{}, func(t *testing.T, s *taskspec.Task) {
			c := s.Executors[0].Spec.Template.Spec.Containers[0]
			want := []corev1.EnvVar{{Name: "A", Value: "1 one"}, {Name: "B", Value: "2"}}
			if !reflect.DeepEqual(c.Env, want) || c.WorkingDir != "/data" {
				t.Errorf("env %v workingDir %q", c.Env, c.WorkingDir)
			}
		}},
		{"cpu_cores and ram_gb become requests; disk_gb sizes the volume", func() *tesv1.Task {
			tk := base()
			tk.Resources = &tesv1.Resources{CPUCores: 2, RAMGB: 1.5, DiskGB: 3}
			return tk
		}, ConvertOptions{}, func(t *testing.T, s *taskspec.Task) {
			r := s.Executors[0].Spec.Template.Spec.Containers[0].Resources
			if q := r.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
				t.Errorf("cpu %s", q.String())
			}
			if q := r.Requests[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1536Mi")) != 0 {
				t.Errorf("memory %s", q.String())
			}
			if len(r.Limits) != 0 {
				t.Errorf("limits %v: the steps set them from the requests", r.Limits)
			}
			if s.Resources.DiskGB != 3 {
				t.Errorf("disk_gb %v", s.Resources.DiskGB)
			}
		}},
		{"DEFAULT_DISK_GB sizes a task without disk_gb", base, ConvertOptions{DiskGB: 5}, func(t *testing.T, s *taskspec.Task) {
			if s.Resources.DiskGB != 5 {
				t.Errorf("disk_gb %v, want DEFAULT_DISK_GB's 5", s.Resources.DiskGB)
			}
		}},
		{"DEFAULT_DISK_GB leaves a task's own disk_gb", func() *tesv1.Task {
			tk := base()
			tk.Resources = &tesv1.Resources{DiskGB: 3}
			return tk
		}, ConvertOptions{DiskGB: 5}, func(t *testing.T, s *taskspec.Task) {
			if s.Resources.DiskGB != 3 {
				t.Errorf("disk_gb %v, want the task's 3", s.Resources.DiskGB)
			}
		}},
		{"inputs, outputs and volumes as they are", func() *tesv1.Task {
			tk := base()
			tk.Inputs = []tesv1.Input{{Name: "in", Path: "/data/in.txt", Content: "hello"}, {URL: "s3://b/dir", Path: "/data/dir", Type: taskspec.TypeDirectory}}
			tk.Outputs = []tesv1.Output{{URL: "s3://b/out", Path: "/data/out/*.txt", PathPrefix: "/data/out"}}
			tk.Volumes = []string{"/scratch"}
			return tk
		}, ConvertOptions{}, func(t *testing.T, s *taskspec.Task) {
			if len(s.Inputs) != 2 || s.Inputs[0].Content != "hello" || s.Inputs[1].Type != "DIRECTORY" {
				t.Errorf("inputs %+v", s.Inputs)
			}
			if len(s.Outputs) != 1 || s.Outputs[0].PathPrefix != "/data/out" {
				t.Errorf("outputs %+v", s.Outputs)
			}
			if !reflect.DeepEqual(s.Volumes, []string{"/scratch"}) {
				t.Errorf("volumes %v", s.Volumes)
			}
		}},
		{"what the handler adds is not written: the executor secret, the security context, the ServiceAccount", base, ConvertOptions{User: "alice"}, func(t *testing.T, s *taskspec.Task) {
			ps := s.Executors[0].Spec.Template.Spec
			c := ps.Containers[0]
			if len(c.VolumeMounts) != 0 || len(ps.Volumes) != 0 || c.SecurityContext != nil || ps.SecurityContext != nil || ps.ServiceAccountName != "" {
				t.Errorf("pod spec %+v", ps)
			}
			cfg := steps.DefaultConfig()
			cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: "creds", MountPath: "/secret"}
			if err := steps.Admit(s, "tesk", cfg); err != nil {
				t.Errorf("the handler refuses the conversion: %v", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := c.task()
			if err := Validate(tk); err != nil {
				t.Fatal(err)
			}
			raw, err := Convert(tk, "task-0000abcd", c.opts)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := taskspec.Decode(raw)
			if err != nil {
				t.Fatalf("the steps cannot read the conversion: %v", err)
			}
			if err := steps.Admit(spec, "tesk", steps.DefaultConfig()); err != nil {
				t.Fatalf("the handler refuses the conversion: %v", err)
			}
			c.check(t, spec)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestValidate(t *testing.T) {
	ok := `"executors":[{"image":"alpine","command":["true"]}]`
	cases := []struct {
		name, body, want string // want: "" accepts; else a part of the message
	}{
		{"a minimal task", `{` + ok + `}`, ""},
		{"read-only fields are ignored", `{"id":"x","state":"COMPLETE","logs":[],"creation_time":"now",` + ok + `}`, ""},
		{"no executors", `{"name":"x"}`, "executors: at least one"},
		{"empty executors", `{"executors":[]}`, "executors: at least one"},
		{"no image", `{"executors":[{"command":["true"]}]}`, "executors[0].image: required"},
		{"no command", `{"executors":[{"image":"alpine"}]}`, "executors[0].command: required"},
		{"empty command", `{"executors":[{"image":"alpine","command":[]}]}`, "executors[0].command: required"},
		{"relative workdir", `{"executors":[{"image":"a","command":["x"],"workdir":"data"}]}`, "executors[0].workdir"},
		{"relative stdin", `{"executors":[{"image":"a","command":["x"],"stdin":"in"}]}`, "executors[0].stdin"},
		{"relative stdout", `{"executors":[{"image":"a","command":["x"],"stdout":"out"}]}`, "executors[0].stdout"},
		{"relative stderr", `{"executors":[{"image":"a","command":["x"],"stderr":"err"}]}`, "executors[0].stderr"},
		{"second executor", `{"executors":[{"image":"a","command":["x"]},{"image":"","command":["x"]}]}`, "executors[1].image"},
		{"input without url or content", `{` + ok + `,"inputs":[{"path":"/data/a"}]}`, "inputs[0]: url or content"},
		{"input relative path", `{` + ok + `,"inputs":[{"path":"data/a","url":"s3://b/a"}]}`, "inputs[0].path"},
		{"input without path", `{` + ok + `,"inputs":[{"url":"s3://b/a"}]}`, "inputs[0].path: required"},
		{"input unknown type", `{` + ok + `,"inputs":[{"path":"/data/a","url":"s3://b/a","type":"LINK"}]}`, "inputs[0].type"},
		{"directory with content", `{` + ok + `,"inputs":[{"path":"/data/a","content":"x","type":"DIRECTORY"}]}`, "inputs[0].content"},
		{"input at the root", `{` + ok + `,"inputs":[{"path":"/","url":"s3://b/a"}]}`, "inputs[0].path"},
		{"input directly under the root", `{` + ok + `,"inputs":[{"path":"/a.txt","url":"s3://b/a"}]}`, "inputs[0].path"},
		{"output without url", `{` + ok + `,"outputs":[{"path":"/data/a"}]}`, "outputs[0].url: required"},
		{"output relative path", `{` + ok + `,"outputs":[{"path":"a","url":"s3://b/a"}]}`, "outputs[0].path"},
		{"wildcard without path_prefix", `{` + ok + `,"outputs":[{"path":"/data/*.txt","url":"s3://b/"}]}`, "outputs[0].path_prefix: required"},
		{"wildcard in the first component", `{` + ok + `,"outputs":[{"path":"/d*/x.txt","path_prefix":"/","url":"s3://b/"}]}`, "first component"},
		{"a question mark without path_prefix", `{` + ok + `,"outputs":[{"path":"/data/a?.txt","url":"s3://b/"}]}`, "outputs[0].path_prefix: required"},
		{"a bracket without path_prefix names a file (nf-ga4gh 1.4.2)", `{` + ok + `,"outputs":[{"path":"/work/x[1].txt","url":"s3://b/w/x[1].txt"}]}`, ""},
		{"a bracket with path_prefix is a pattern", `{` + ok + `,"outputs":[{"path":"/work/x[12].txt","path_prefix":"/work","url":"s3://b/w"}]}`, ""},
		{"an input named with pattern characters (nf-ga4gh 1.4.2)", `{` + ok + `,"inputs":[{"path":"/work/sample[1]?*.fq","url":"s3://b/sample[1]?*.fq"}]}`, ""},
		{"output type", `{` + ok + `,"outputs":[{"path":"/data/a","url":"s3://b/a","type":"file"}]}`, "outputs[0].type"},
		{"relative volume", `{` + ok + `,"volumes":["scratch"]}`, "volumes[0]"},
		{"negative cpu", `{` + ok + `,"resources":{"cpu_cores":-1}}`, "resources.cpu_cores"},
		{"fractional cpu", `{` + ok + `,"resources":{"cpu_cores":1.5}}`, "resources.cpu_cores: 1.5 is not a whole number of cores"},
		{"whole cpu written as a float", `{` + ok + `,"resources":{"cpu_cores":2.0}}`, ""},
		{"whole cpu in exponent form", `{` + ok + `,"resources":{"cpu_cores":4e0}}`, ""},
		{"cpu beyond int32", `{` + ok + `,"resources":{"cpu_cores":3e9}}`, "resources.cpu_cores: 3e9 is not a whole number"},
		{"cpu as a string", `{` + ok + `,"resources":{"cpu_cores":"2"}}`, "resources.cpu_cores"},
		{"ram as a string", `{` + ok + `,"resources":{"ram_gb":"2"}}`, "resources.ram_gb: a JSON string where a number is expected"},
		{"unknown resources field", `{` + ok + `,"resources":{"gpus":1}}`, `unknown field "gpus"`},
		{"input url without scheme", `{` + ok + `,"inputs":[{"path":"/data/a","url":"/data/a"}]}`, "inputs[0].url: \"/data/a\" has no scheme"},
		{"a CWL literal Directory (cwl-tes 0.3)", `{` + ok + `,"inputs":[{"name":"dir1","description":"cwl_input:dir1","url":"_:5cb672c1-2c9b-4659-a5eb-24289b3a83ad","path":"/var/lib/cwl/stg1/cwl","type":"DIRECTORY"}]}`, "inputs[0].url: \"_:5cb672c1-2c9b-4659-a5eb-24289b3a83ad\" is the identifier of a CWL literal, which names no data"},
		{"input url a word", `{` + ok + `,"inputs":[{"path":"/data/a","url":"not a url"}]}`, "inputs[0].url"},
		{"input gs url", `{` + ok + `,"inputs":[{"path":"/data/a","url":"gs://b/a"}]}`, `inputs[0].url: the scheme "gs" is not supported (one of http, https, ftp, s3, file)`},
		{"input s3 without slashes", `{` + ok + `,"inputs":[{"path":"/data/a","url":"s3:b/a"}]}`, `inputs[0].url: "s3:b/a" is not of the form s3://...`},
		{"input s3 without bucket", `{` + ok + `,"inputs":[{"path":"/data/a","url":"s3:///a"}]}`, "names no bucket"},
		{"input http without host", `{` + ok + `,"inputs":[{"path":"/data/a","url":"http:///a"}]}`, "names no host"},
		{"input file url with a host", `{` + ok + `,"inputs":[{"path":"/data/a","url":"file://server/a"}]}`, `names the host "server"`},
		{"input file url", `{` + ok + `,"inputs":[{"path":"/data/a","url":"file:///transfer/a"}]}`, ""},
		{"input https url with user info", `{` + ok + `,"inputs":[{"path":"/data/a","url":"HTTPS://u:p@example.org/a?x=1"}]}`, ""},
		{"input ftp url", `{` + ok + `,"inputs":[{"path":"/data/a","url":"ftp://ftp.example.org/pub/a"}]}`, ""},
		{"output gs url", `{` + ok + `,"outputs":[{"path":"/data/a","url":"gs://b/a"}]}`, `outputs[0].url: the scheme "gs" is not supported`},
		{"output url with a bad escape", `{` + ok + `,"outputs":[{"path":"/data/a","url":"s3://b/%zz"}]}`, "outputs[0].url"},
		{"negative ram", `{` + ok + `,"resources":{"ram_gb":-1}}`, "resources.ram_gb"},
		{"unknown field", `{` + ok + `,"priority":1}`, `unknown field "priority"`},
		{"unknown executor field", `{"executors":[{"image":"a","command":["x"],"args":["y"]}]}`, `unknown field "args"`},
		{"command as a string", `{"executors":[{"image":"a","command":"echo hi"}]}`, "executors.command: a JSON string where an array is expected"},
		{"tags not strings", `{` + ok + `,"tags":{"a":1}}`, "tags"},
		{"not an object", `[1]`, "not a tesTask object"},
		{"two values", `{` + ok + `} {}`, "more than one JSON value"},
		{"not JSON", `{"executors":`, "not a complete JSON object"},
		{"a broken token", `{"executors":x}`, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk, err := DecodeTask([]byte(c.body))
			if err == nil {
				err = Validate(tk)
			}
			if err == nil {
				_, err = Convert(tk, "task-0000abcd", ConvertOptions{})
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q, want one with %q", err, c.want)
			}
			if err != nil {
				if !invalid.Is(err) {
					t.Fatalf("error %T is not a bad request", err)
				}
			}
		})
	}
}

func TestCheckBackendParameters(t *testing.T) {
	c, err := backendparams.Parse([]byte("zones: {allowed: [a, b]}\ngpu: {max: 2, types: {nvidia.com/gpu: {}}}"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		c         *backendparams.Config
		resources string
		kept      map[string]string
		ignored   []string
		err       string
	}{
		{"none", c, `{}`, nil, nil, ""},
		{"supported", c, `{"backend_parameters":{"zones":"b","GPU_count":"1"},"backend_parameters_strict":true}`, map[string]string{"zones": "b", "gpu_count": "1"}, nil, ""},
		{"unsupported, lenient", c, `{"backend_parameters":{"zones":"a","VmSize":"x"}}`, map[string]string{"zones": "a"}, []string{"VmSize"}, ""},
		{"only unsupported, lenient", c, `{"backend_parameters":{"VmSize":"x"}}`, nil, []string{"VmSize"}, ""},
		{"unsupported, strict", c, `{"backend_parameters":{"zones":"a","VmSize":"x"},"backend_parameters_strict":true}`, nil, nil,
			`resources.backend_parameters: "VmSize" is not supported (backend_parameters_strict is true; supported: gpu_count, gpu_type, zones)`},
		{"nothing enabled, strict", nil, `{"backend_parameters":{"zones":"a"},"backend_parameters_strict":true}`, nil, nil,
			`resources.backend_parameters: "zones" is not supported (backend_parameters_strict is true; supported: none)`},
		{"nothing enabled, lenient", nil, `{"backend_parameters":{"zones":"a"}}`, nil, []string{"zones"}, ""},
		{"value not allowed, lenient", c, `{"backend_parameters":{"zones":"c"}}`, nil, nil, `resources.backend_parameters.zones: "c" is not allowed (allowed: a, b)`},
		{"too many GPUs", c, `{"backend_parameters":{"gpu_count":"3"}}`, nil, nil, `resources.backend_parameters.gpu_count: "3" is not a whole number from 0 to 2`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task, err := DecodeTask([]byte(`{"executors":[{"image":"a","command":["x"]}],"resources":` + tc.resources + `}`))
			if err != nil {
				t.Fatal(err)
			}
			ignored, err := CheckBackendParameters(task, tc.c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !invalid.Is(err) {
					t.Fatalf("error %v, want a bad request with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(task.Resources.BackendParameters, tc.kept) || !reflect.DeepEqual(ignored, tc.ignored) {
				t.Errorf("kept %v, ignored %v; want %v, %v", task.Resources.BackendParameters, ignored, tc.kept, tc.ignored)
			}
			raw, err := Convert(task, "task-0000abcd", ConvertOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := taskspec.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(spec.Resources.BackendParameters, tc.kept) {
				t.Errorf("the task JSON holds %v, want %v", spec.Resources.BackendParameters, tc.kept)
			}
		})
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	// What ShellQuote makes, a POSIX shell reads back as one word: checked
	// here by the quoting rules (a safe word is unchanged; a quoted one
	// starts and ends with a quote and hides every quote inside).
	for _, s := range []string{"plain", "a b", "it's", "'", "''", "$(rm -rf /)", "a\nb", "ü"} {
		q := ShellQuote(s)
		if q == s {
			continue
		}
		if !strings.HasPrefix(q, "'") || !strings.HasSuffix(q, "'") {
			t.Errorf("%q quoted as %q", s, q)
		}
		inner := strings.ReplaceAll(q[1:len(q)-1], `'"'"'`, "")
		if strings.Contains(inner, "'") {
			t.Errorf("%q quoted as %q leaves a bare quote", s, q)
		}
	}
}

func FuzzDecodeTask(f *testing.F) {
	for _, s := range []string{
		`{"executors":[{"image":"alpine","command":["true"]}]}`,
		`{"name":"n","inputs":[{"path":"/data/a","content":"x"}],"outputs":[{"path":"/data/*.t","path_prefix":"/data","url":"s3://b/"}],"executors":[{"image":"a","command":["x"],"stdout":"/o","env":{"A":"b"}}],"resources":{"cpu_cores":1,"ram_gb":0.5,"disk_gb":2},"tags":{"k":"v"}}`,
		`[]`, `{}`, `null`, `{"executors":null}`,
		`{"executors":[{"image":"a","command":["x"]}],"resources":{"cpu_cores":2.0,"zones":["z"]}}`,
		`{"executors":[{"image":"a","command":["x"]}],"inputs":[{"path":"/d/a","url":"s3:b/k"}],"outputs":[{"path":"/d/b","url":"file:///t/b"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tk, err := DecodeTask(body)
		if err != nil {
			if !invalid.Is(err) {
				t.Fatalf("decode error %T %v is not a bad request", err, err)
			}
			return
		}
		if err := Validate(tk); err != nil {
			if !invalid.Is(err) {
				t.Fatalf("validation error %T", err)
			}
			return
		}
		raw, err := Convert(tk, "task-0000abcd", ConvertOptions{})
		if err != nil {
			if !invalid.Is(err) {
				t.Fatalf("conversion error %T", err)
			}
			return
		}
		// A task that passes is one the steps can read.
		spec, err := taskspec.Decode(raw)
		if err != nil {
			t.Fatalf("accepted task the steps refuse: %v", err)
		}
		if len(spec.Executors) != len(tk.Executors) {
			t.Fatalf("%d executors became %d", len(tk.Executors), len(spec.Executors))
		}
		if _, err := json.Marshal(tk); err != nil {
			t.Fatal(err)
		}
	})
}
