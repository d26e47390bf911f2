//go:build integration

package filer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestS3FileRoundTrip(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	srv.put(t, b, "in/hello.txt", "hello s3")
	srv.put(t, b, "in/empty", "")
	opts, _ := testOptions(t)
	opts.AWS = srv.awsOptions()

	task := newTask([]taskspec.Input{
		{URL: "s3://" + b + "/in/hello.txt", Path: "/data/in/hello.txt"},
		{URL: "s3://" + b + "/in/empty", Path: "/data/in/empty"},
	}, []taskspec.Output{
		{URL: "s3://" + b + "/out/result.txt", Path: "/data/out/result.txt"},
	})
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/in/hello.txt")); got != "hello s3" {
		t.Errorf("downloaded %q", got)
	}
	if got := readFile(t, inTask(opts, "/data/in/empty")); got != "" {
		t.Errorf("downloaded %q", got)
	}
	writeFile(t, inTask(opts, "/data/out/result.txt"), "result!")
	files := mustRun(t, ModeOutputs, task, opts)
	want := []taskspec.UploadedFile{{Output: 0, Path: "/data/out/result.txt", SizeBytes: "7"}}
	if !uploadedEq(files, want) {
		t.Errorf("uploaded %+v, want %+v", files, want)
	}
	if got := srv.get(t, b, "out/result.txt"); got != "result!" {
		t.Errorf("object holds %q", got)
	}
}

func TestS3Directories(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	srv.put(t, b, "tree/a.txt", "A")
	srv.put(t, b, "tree/sub/b.txt", "B")
	srv.put(t, b, "tree/sub/deeper/c.txt", "C")
	srv.put(t, b, "treehouse/not-below.txt", "X")
	// Directory markers: zero-byte keys ending in "/".
	srv.put(t, b, "tree/empty/", "")
	srv.put(t, b, "tree/sub/e2/e3/", "")
	opts, _ := testOptions(t)
	opts.AWS = srv.awsOptions()
	task := newTask([]taskspec.Input{
		{URL: "s3://" + b + "/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
	}, []taskspec.Output{
		{URL: "s3://" + b + "/copy/", Path: "/data/tree", Type: taskspec.TypeDirectory},
	})
	mustRun(t, ModeInputs, task, opts)
	for p, want := range map[string]string{"/data/tree/a.txt": "A", "/data/tree/sub/b.txt": "B", "/data/tree/sub/deeper/c.txt": "C"} {
		if got := readFile(t, inTask(opts, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	if _, err := os.Stat(inTask(opts, "/data/tree/house")); err == nil {
		t.Error("a key of another prefix was downloaded")
	}
	for _, d := range []string{"/data/tree/empty", "/data/tree/sub/e2/e3"} {
		if fi, err := os.Stat(inTask(opts, d)); err != nil || !fi.IsDir() {
			t.Errorf("directory marker %s: %v", d, err)
		}
		if names := readDir(t, inTask(opts, d)); len(names) != 0 {
			t.Errorf("%s holds %d entries, want none", d, len(names))
		}
	}
	files := mustRun(t, ModeOutputs, task, opts)
	want := []taskspec.UploadedFile{
		{Output: 0, Path: "/data/tree/a.txt", SizeBytes: "1"},
		{Output: 0, Path: "/data/tree/sub/b.txt", SizeBytes: "1"},
		{Output: 0, Path: "/data/tree/sub/deeper/c.txt", SizeBytes: "1"},
	}
	if !uploadedEq(files, want) {
		t.Errorf("uploaded %+v, want %+v", files, want)
	}
	if got := srv.get(t, b, "copy/sub/deeper/c.txt"); got != "C" {
		t.Errorf("object holds %q", got)
	}
	// The empty directories as zero-byte keys ending in "/", and nothing
	// else but the files.
	lo, err := srv.client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(b), Prefix: aws.String("copy/")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, o := range lo.Contents {
		got[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
	}
	wantKeys := map[string]int64{"copy/a.txt": 1, "copy/sub/b.txt": 1, "copy/sub/deeper/c.txt": 1, "copy/empty/": 0, "copy/sub/e2/e3/": 0}
	if !maps.Equal(got, wantKeys) {
		t.Errorf("keys below copy/: %v, want %v", got, wantKeys)
	}
}

func TestS3Multipart(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	opts, _ := testOptions(t)
	opts.AWS = srv.awsOptions()
	opts.S3PartSize = 5 << 20
	// 12 MiB and a bit: three parts, the last one short.
	src := inTask(opts, "/data/big.bin")
	os.MkdirAll(filepath.Dir(src), 0o755)
	f, _ := os.Create(src)
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, 12<<20+12345); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sum := fmt.Sprintf("%x", h.Sum(nil))
	task := newTask([]taskspec.Input{
		{URL: "s3://" + b + "/big.bin", Path: "/data/again/big.bin"},
	}, []taskspec.Output{
		{URL: "s3://" + b + "/big.bin", Path: "/data/big.bin"},
	})
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 1 || files[0].SizeBytes != fmt.Sprint(12<<20+12345) {
		t.Errorf("uploaded %+v", files)
	}
	// A multipart object's ETag ends in -<parts>.
	head, err := srv.client().HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("big.bin")})
	if err != nil || !strings.HasSuffix(strings.Trim(aws.ToString(head.ETag), `"`), "-3") {
		t.Errorf("not a 3-part upload: ETag %v, %v", head, err)
	}
	mustRun(t, ModeInputs, task, opts)
	g, _ := os.Open(inTask(opts, "/data/again/big.bin"))
	defer g.Close()
	h2 := sha256.New()
	io.Copy(h2, g)
	if got := fmt.Sprintf("%x", h2.Sum(nil)); got != sum {
		t.Errorf("downloaded file differs from the uploaded one")
	}
}

func TestS3Errors(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	srv.put(t, b, "x.txt", "x")
	for _, tc := range []struct {
		name string
		aws  func(a *AWSOptions)
		url  string
		want []string
	}{
		{"missing key", nil, "s3://" + b + "/nope.txt", []string{"inputs[0] s3://" + b + "/nope.txt -> /data/x", "404"}},
		{"missing bucket", nil, "s3://no-such-bucket-here/x.txt", []string{"inputs[0] s3://no-such-bucket-here/x.txt", "NoSuchBucket"}},
		{"wrong secret", func(a *AWSOptions) { a.SecretAccessKey = "wrong-secret-value" }, "s3://" + b + "/x.txt", []string{"inputs[0]", "403"}},
		{"unknown key id", func(a *AWSOptions) { a.AccessKeyID = "nobody" }, "s3://" + b + "/x.txt", []string{"inputs[0]", "XAdminUserNotFound"}},
		{"no bucket", nil, "s3:///x.txt", []string{"no bucket"}},
		{"directory as file", nil, "s3://" + b + "/dir/", []string{"names a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, logs := testOptions(t)
			opts.AWS = srv.awsOptions()
			if tc.aws != nil {
				tc.aws(&opts.AWS)
			}
			task := newTask([]taskspec.Input{{URL: tc.url, Path: "/data/x"}}, nil)
			msg := runErr(t, ModeInputs, task, opts)
			wantContains(t, "error", msg, tc.want...)
			wantNotContains(t, "error", msg, "wrong-secret-value", s3Secret)
			wantNotContains(t, "logs", logs.String(), "wrong-secret-value", s3Secret)
			if _, err := os.Stat(inTask(opts, "/data/x")); err == nil {
				t.Error("a failed download left a file")
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		opts, _ := testOptions(t)
		opts.AWS = srv.awsOptions()
		task := newTask([]taskspec.Input{{URL: "s3://" + b + "/nodir", Path: "/data/d", Type: taskspec.TypeDirectory}}, nil)
		wantContains(t, "error", runErr(t, ModeInputs, task, opts), "inputs[0]", "does not exist")
	})
	t.Run("upload to missing bucket", func(t *testing.T) {
		opts, _ := testOptions(t)
		opts.AWS = srv.awsOptions()
		writeFile(t, inTask(opts, "/data/o.txt"), "o")
		task := newTask(nil, []taskspec.Output{{URL: "s3://no-such-bucket-here/o.txt", Path: "/data/o.txt"}})
		wantContains(t, "error", runErr(t, ModeOutputs, task, opts), "outputs[0] /data/o.txt -> s3://no-such-bucket-here/o.txt", "NoSuchBucket")
	})
}

// The configuration comes from the files of the mounted aws-secret, through
// the environment, as in the filer jobs.
func TestS3ConfigFromEnvFiles(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	srv.put(t, b, "k", "from config files")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config"), "[default]\nregion = us-east-1\nendpoint_url = "+srv.Endpoint+"\n")
	writeFile(t, filepath.Join(dir, "credentials"), "[default]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.Secret+"\n")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	opts, err := OptionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	o2, _ := testOptions(t)
	opts.TaskDir, opts.Logger = o2.TaskDir, o2.Logger
	task := newTask([]taskspec.Input{{URL: "s3://" + b + "/k", Path: "/data/k"}}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/k")); got != "from config files" {
		t.Errorf("downloaded %q", got)
	}
}

// Object keys are taken literally, also with characters a URL would escape.
func TestS3OddKeys(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	name := "a b?c#d%e é.txt"
	srv.put(t, b, "in/"+name, "odd")
	opts, _ := testOptions(t)
	opts.AWS = srv.awsOptions()
	task := newTask([]taskspec.Input{
		{URL: "s3://" + b + "/in", Path: "/data/in", Type: taskspec.TypeDirectory},
	}, []taskspec.Output{{URL: "s3://" + b + "/out", Path: "/data/in/*", PathPrefix: "/data/in"}})
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/in/"+name)); got != "odd" {
		t.Errorf("downloaded %q", got)
	}
	mustRun(t, ModeOutputs, task, opts)
	if got := srv.get(t, b, "out/"+name); got != "odd" {
		t.Errorf("object holds %q", got)
	}
}

// Many files both ways through the pool, each with its own bytes; then one
// missing object among many fails the run, naming it, with nothing reported.
func TestS3ManyFiles(t *testing.T) {
	srv := startS3(t)
	b := srv.bucket(t)
	const n = 200
	want := map[string]string{}
	for i := range n {
		c := strings.Repeat(fmt.Sprintf("%d-", i), i*7)
		srv.put(t, b, fmt.Sprintf("many/d%d/f%d", i%5, i), c)
		want[fmt.Sprintf("d%d/f%d", i%5, i)] = c
	}
	opts, _ := testOptions(t)
	opts.AWS = srv.awsOptions()
	opts.Parallelism = 8
	task := newTask([]taskspec.Input{
		{URL: "s3://" + b + "/many", Path: "/data/many", Type: taskspec.TypeDirectory},
	}, []taskspec.Output{
		{URL: "s3://" + b + "/back", Path: "/data/many", Type: taskspec.TypeDirectory},
	})
	mustRun(t, ModeInputs, task, opts)
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != n {
		t.Fatalf("%d files uploaded, want %d", len(files), n)
	}
	for rel, c := range want {
		if got := readFile(t, inTask(opts, "/data/many/"+rel)); got != c {
			t.Fatalf("downloaded %s: %d bytes, want %d", rel, len(got), len(c))
		}
		if got := srv.get(t, b, "back/"+rel); got != c {
			t.Fatalf("uploaded %s: %d bytes, want %d", rel, len(got), len(c))
		}
	}

	var ins []taskspec.Input
	for i := range n {
		ins = append(ins, taskspec.Input{URL: fmt.Sprintf("s3://%s/many/d%d/f%d", b, i%5, i), Path: fmt.Sprintf("/data/one/f%d", i)})
	}
	ins[57].URL = "s3://" + b + "/many/absent"
	opts2, _ := testOptions(t)
	opts2.AWS, opts2.Parallelism = opts.AWS, 8
	msg := runErr(t, ModeInputs, newTask(ins, nil), opts2)
	wantContains(t, "error", msg, "inputs[57]", "s3://"+b+"/many/absent", "/data/one/f57")
	if _, err := os.Stat(inTask(opts2, "/data/one/f57")); err == nil {
		t.Error("the failed download left a file")
	}
}
