package filer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://host/path/x.txt":                         "https://host/path/x.txt",
		"https://user:pw@host:8443/p?X-Amz-Signature=abc": "https://host:8443/p",
		"http://host/p#frag":                              "http://host/p",
		"ftp://user@host/dir/":                            "ftp://host/dir/",
		"s3://bucket/key/with space":                      "s3://bucket/key/with%20space",
		"s3://bucket":                                     "s3://bucket",
		"file:///transfer/x":                              "file:///transfer/x",
		"http://u:p@h/%zz?secret":                         "http://h/%zz",
		"http://u:p@h":                                    "http://h",
		"user:pw@host/path?x":                             "host/path",
		"no url at all":                                   "no url at all",
		"//@//@":                                          "",
		"//u:secret@//h/p":                                "//h/p",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScrubber(t *testing.T) {
	s := &scrubber{}
	s.addURL("https://alice:p%40ss-word@host/p?sig=abcdef123&x=1")
	s.addURL("ftp://bob:hunter22@h/x")
	s.add("ab") // too short to scrub
	msg := `Get "https://alice:p%40ss-word@host/p?sig=abcdef123&x=1": failed; password p@ss-word; hunter22; ab`
	got := s.scrub(msg)
	wantNotContains(t, "scrubbed", got, "p%40ss-word", "p@ss-word", "abcdef123", "hunter22", "sig=")
	wantContains(t, "scrubbed", got, "https://", "failed", "; ab")
}

func TestParseNetrc(t *testing.T) {
	n, err := parseNetrc(`# comment
machine a.example login alice password pa
machine B.example
  login bob
  password pb account acct
macdef init
  cd /tmp
  machine evil login x password y

default login anon password pd
`)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]netrcEntry{
		"a.example": {"alice", "pa"},
		"b.example": {"bob", "pb"},
		"other":     {"anon", "pd"},
		"evil":      {"anon", "pd"}, // inside a macro: not a machine
	} {
		if got, ok := n.lookup(host); !ok || got != want {
			t.Errorf("lookup(%q) = %+v, %v; want %+v", host, got, ok, want)
		}
	}
	n2, _ := parseNetrc("machine only login u password p\n")
	if _, ok := n2.lookup("other"); ok {
		t.Error("a host without entry or default got credentials")
	}
	if _, err := parseNetrc("machine"); err == nil {
		t.Error("truncated netrc accepted")
	}
	var nilNetrc *netrc
	if _, ok := nilNetrc.lookup("x"); ok {
		t.Error("nil netrc has credentials")
	}
}

func TestCredsAllowed(t *testing.T) {
	hosts := []string{"ftp.example.org", "data.example.org:2121", "[::1]"}
	for _, tc := range []struct {
		host, port string
		want       bool
	}{
		{"ftp.example.org", "21", true},
		{"FTP.Example.ORG", "21", true},
		{"ftp.example.org.", "21", true},
		{"ftp.example.org", "2121", true},
		{"data.example.org", "2121", true},
		{"data.example.org", "21", false},
		{"evil.example.org", "21", false},
		{"ftp.example.org.evil", "21", false},
		{"::1", "21", true},
		{"", "21", false},
	} {
		if got := credsAllowed(hosts, tc.host, tc.port); got != tc.want {
			t.Errorf("credsAllowed(%q, %q) = %v", tc.host, tc.port, got)
		}
	}
	if credsAllowed(nil, "x", "21") {
		t.Error("no hosts allowed x")
	}
}

func TestOptionsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		want    time.Duration
		err     bool
	}{
		{"", DefaultHTTPTimeout, false},
		{"  ", DefaultHTTPTimeout, false},
		{"60", 60 * time.Second, false},
		{" 12 ", 12 * time.Second, false},
		{"0.5", 500 * time.Millisecond, false},
		{"0", 0, true},
		{"-3", 0, true},
		{"ten", 0, true},
	} {
		t.Setenv("FILER_HTTP_TIMEOUT", tc.timeout)
		o, err := OptionsFromEnv()
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "FILER_HTTP_TIMEOUT") {
				t.Errorf("FILER_HTTP_TIMEOUT=%q: error %v", tc.timeout, err)
			}
			continue
		}
		if err != nil || o.withDefaults().HTTPTimeout != tc.want {
			t.Errorf("FILER_HTTP_TIMEOUT=%q: %v, %v", tc.timeout, o.HTTPTimeout, err)
		}
	}
	t.Setenv("FILER_HTTP_TIMEOUT", "")
	t.Setenv("TESK_FTP_USERNAME", "u")
	t.Setenv("TESK_FTP_PASSWORD", "p")
	t.Setenv("TESK_FTP_HOSTS", " ftp.a.org, ,FTP.b.org ")
	t.Setenv("NETRC", "/netrc/.netrc")
	t.Setenv("AWS_CONFIG_FILE", "/aws/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/aws/credentials")
	t.Setenv("HOST_BASE_PATH", "/host")
	t.Setenv("CONTAINER_BASE_PATH", "/transfer")
	t.Setenv("TESK_TASK_DIR", "/elsewhere")
	o, err := OptionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if o.FTPUser != "u" || o.FTPPassword != "p" || strings.Join(o.FTPHosts, "|") != "ftp.a.org|ftp.b.org" ||
		o.NetrcPath != "/netrc/.netrc" || o.AWS.ConfigFile != "/aws/config" || o.AWS.CredentialsFile != "/aws/credentials" ||
		o.HostBasePath != "/host" || o.ContainerBasePath != "/transfer" || o.TaskDir != "/elsewhere" {
		t.Errorf("options: %+v", o)
	}
	// Without CONTAINER_BASE_PATH, the transfer volume is where the handler
	// mounts it: at HOST_BASE_PATH (behaviour §8.7).
	t.Setenv("CONTAINER_BASE_PATH", "")
	if o, err := OptionsFromEnv(); err != nil || o.ContainerBasePath != "/host" {
		t.Errorf("CONTAINER_BASE_PATH unset: %q, %v; want HOST_BASE_PATH", o.ContainerBasePath, err)
	}
	t.Setenv("TESK_TASK_DIR", "")
	if d := (Options{}).withDefaults(); d.TaskDir != "/tesk/task" || d.Parallelism != DefaultParallelism || d.Logger == nil {
		t.Errorf("defaults: %+v", d)
	}
}

// TestUserCredentialsFromEnv: with TESK_USER_CREDENTIALS the user's files
// replace the shared netrc and FTP credentials; a file the user's secret
// lacks means none (behaviour §3.14).
func TestUserCredentialsFromEnv(t *testing.T) {
	t.Setenv("TESK_FTP_USERNAME", "shared")
	t.Setenv("TESK_FTP_PASSWORD", "shared-password")
	t.Setenv("NETRC", "/netrc/.netrc")
	dir := t.TempDir()
	t.Setenv("TESK_USER_CREDENTIALS", dir)
	o, err := OptionsFromEnv()
	if err != nil || o.FTPUser != "" || o.FTPPassword != "" || o.NetrcPath != "" || !o.AWS.KeysOnly {
		t.Errorf("an empty secret: %+v %v, want no credentials, and S3 keys only", o, err)
	}
	for name, data := range map[string]string{"username": "alice\n", "password": "pa55", ".netrc": "machine x login a password b\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err = OptionsFromEnv()
	if err != nil || o.FTPUser != "alice" || o.FTPPassword != "pa55" || o.NetrcPath != filepath.Join(dir, ".netrc") {
		t.Errorf("the user's secret: %+v %v", o, err)
	}
	if err := os.Remove(filepath.Join(dir, "password")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "password"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := OptionsFromEnv(); err == nil || !strings.Contains(err.Error(), "TESK_USER_CREDENTIALS") {
		t.Errorf("a password that cannot be read: %v, want an error naming TESK_USER_CREDENTIALS", err)
	}
}

func TestDebugFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "TRUE": true, "yes": true, "on": true} {
		t.Setenv("DEBUG", v)
		if got := DebugFromEnv(); got != want {
			t.Errorf("DEBUG=%q: %v", v, got)
		}
	}
}

func TestSchemeOf(t *testing.T) {
	for in, want := range map[string]string{"HTTPS://x": "https", "s3://b/k": "s3", "/abs": "", "c:": "c", "no scheme": "", ":x": "", "a b:c": ""} {
		if got := schemeOf(in); got != want {
			t.Errorf("schemeOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseS3(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, key string
		ok              bool
	}{
		{"s3://b/k", "b", "k", true},
		{"S3://b/dir/k with space%20", "b", "dir/k with space%20", true},
		{"s3://b", "b", "", true},
		{"s3:///k", "", "", false},
		{"s3://u:p@b/k", "", "", false},
		{"http://b/k", "", "", false},
	} {
		b, k, err := parseS3(tc.in)
		if (err == nil) != tc.ok || b != tc.bucket || k != tc.key {
			t.Errorf("parseS3(%q) = %q, %q, %v", tc.in, b, k, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Mode: ModeInputs, Index: 2, URL: "s3://b/k", Path: "/data/x", msg: "boom"}, "inputs[2] s3://b/k -> /data/x: boom"},
		{Error{Mode: ModeOutputs, Index: 0, URL: "s3://b/k", Path: "/data/x", msg: "boom"}, "outputs[0] /data/x -> s3://b/k: boom"},
		{Error{Mode: ModeInputs, Index: 1, Path: "/data/x", msg: "boom"}, "inputs[1] /data/x: boom"},
		{Error{Mode: ModeInputs, Index: 1, msg: "boom"}, "inputs[1]: boom"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestAddressingStyle(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "config")
	writeFile(t, conf, "[default]\nregion = x\ns3 =\n    addressing_style = virtual\n[profile other]\ns3 =\n  addressing_style = path\n")
	if got := addressingStyle(AWSOptions{ConfigFile: conf}); got != "virtual" {
		t.Errorf("default: %q", got)
	}
	if got := addressingStyle(AWSOptions{ConfigFile: conf, Profile: "other"}); got != "path" {
		t.Errorf("other: %q", got)
	}
	if got := addressingStyle(AWSOptions{ConfigFile: conf, Profile: "none"}); got != "" {
		t.Errorf("none: %q", got)
	}
}

func TestParallelismFromEnv(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
		err  bool
	}{
		{"", 0, false}, // unset: DefaultParallelism in Run
		{"1", 1, false},
		{" 16 ", 16, false},
		{"256", 256, false},
		{"0", 0, true},
		{"-2", 0, true},
		{"257", 0, true},
		{"4.5", 0, true},
		{"many", 0, true},
	} {
		t.Setenv("FILER_PARALLELISM", tc.v)
		o, err := OptionsFromEnv()
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "FILER_PARALLELISM") {
				t.Errorf("FILER_PARALLELISM=%q: error %v", tc.v, err)
			}
			continue
		}
		if err != nil || o.Parallelism != tc.want {
			t.Errorf("FILER_PARALLELISM=%q: %d, %v; want %d", tc.v, o.Parallelism, err, tc.want)
		}
	}
	if d := (Options{}).withDefaults(); d.Parallelism != 8 {
		t.Errorf("default parallelism %d, want 8", d.Parallelism)
	}
}

// fakeS3Options are o, with static credentials for the test server at
// endpoint and no logs.
func fakeS3Options(endpoint string, o Options) Options {
	o.Logger = slog.New(slog.DiscardHandler)
	o.AWS = AWSOptions{Endpoint: endpoint, Region: "us-east-1", AccessKeyID: "AKIDTEST", SecretAccessKey: "secret-for-the-test", DisableIMDS: true}
	return o
}

// An upload over plain HTTP computes the request checksum only: the payload
// is marked UNSIGNED-PAYLOAD before the SDK's checksum pass, which would
// otherwise hash the whole body with SHA-256 for a signature that does not
// use it.
func TestS3UploadOverHTTPHashesNoPayload(t *testing.T) {
	var mu sync.Mutex
	var puts []http.Header // of the PUTs: objects and parts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPut {
			mu.Lock()
			puts = append(puts, r.Header.Clone())
			mu.Unlock()
		}
		w.Header().Set("ETag", `"e"`)
		// Enough of S3 for the transfer manager's multipart upload.
		switch q := r.URL.Query(); {
		case r.Method == http.MethodPost && q.Has("uploads"):
			fmt.Fprint(w, `<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
		case r.Method == http.MethodPost && q.Has("uploadId"):
			fmt.Fprint(w, `<CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>"e-3"</ETag></CompleteMultipartUploadResult>`)
		}
	}))
	defer srv.Close()
	tr, err := newS3Transport(fakeS3Options(srv.URL, Options{S3PartSize: 5 << 20, S3Concurrency: 2}), &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	// What the checksum step sees of the payload hash, on the transport's
	// own client.
	var seen []string
	probe := func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("Probe",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				seen = append(seen, v4.GetPayloadHash(ctx))
				return next.HandleFinalize(ctx, in)
			}), "AWSChecksum:ComputeInputPayloadChecksum", middleware.Before)
	}
	_, err = tr.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("payload")},
		func(o *s3.Options) { o.APIOptions = append(o.APIOptions, probe) })
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != unsignedPayload {
		t.Errorf("the checksum step saw payload hash %q, want %q (it would hash the body with SHA-256)", seen, unsignedPayload)
	}

	// The transfer manager's single and multipart uploads send the same.
	dir := t.TempDir()
	for _, size := range []int64{1 << 10, 11 << 20} {
		p := filepath.Join(dir, fmt.Sprint(size))
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		f, _ := os.Open(p)
		err := tr.put(context.Background(), "s3://b/k", f, size)
		f.Close()
		if err != nil {
			t.Fatalf("upload of %d bytes: %v", size, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var bodies int
	for _, h := range puts {
		if h.Get("Content-Length") == "0" || h.Get("Content-Length") == "" {
			continue
		}
		bodies++
		if got := h.Get("X-Amz-Content-Sha256"); got != unsignedPayload {
			t.Errorf("a PUT with a body sent x-amz-content-sha256 %q, want %q", got, unsignedPayload)
		}
		if h.Get("X-Amz-Checksum-Crc32") == "" {
			t.Errorf("a PUT with a body sent no CRC32 checksum: %v", h)
		}
	}
	// The PutObject above, the small file, and the big one's three parts.
	if bodies != 5 {
		t.Errorf("the server saw %d PUTs with a body, want 5", bodies)
	}
}

// An S3 server that goes silent fails the transfer once the SDK's retries
// are spent, rather than holding the filer: S3Timeout bounds each wait for
// the connection to deliver something.
func TestS3Timeouts(t *testing.T) {
	release := make(chan struct{})
	var slowPut atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/b/no-headers":
		case "/b/stalls":
			w.Header().Set("Content-Length", "1000")
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
		case "/b/never-answers":
			_, _ = io.Copy(io.Discard, r.Body)
		case "/b/slow-reader":
			// About 50 MB/s: the body takes longer than the timeout in
			// all, each piece well within it.
			buf := make([]byte, 1<<20)
			var n int64
			for {
				m, err := io.ReadFull(r.Body, buf)
				n += int64(m)
				if err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			slowPut.Store(n)
			w.Header().Set("ETag", `"e"`)
			return
		default:
			http.NotFound(w, r)
			return
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	tr, err := newS3Transport(fakeS3Options(srv.URL, Options{S3Timeout: 300 * time.Millisecond, S3PartSize: 8 << 20, S3Concurrency: 2}), &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	up := filepath.Join(dir, "up")
	if err := os.WriteFile(up, []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	uf, err := os.Open(up)
	if err != nil {
		t.Fatal(err)
	}
	defer uf.Close()
	for _, c := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"GET, no headers", func(ctx context.Context) error { _, err := tr.get(ctx, "s3://b/no-headers", f); return err }},
		{"GET, body stalls", func(ctx context.Context) error { _, err := tr.get(ctx, "s3://b/stalls", f); return err }},
		{"PUT, never answers", func(ctx context.Context) error { return tr.put(ctx, "s3://b/never-answers", uf, 7) }},
	} {
		// Without the bound, the call would end only with this context.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		err := c.run(ctx)
		cancel()
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "timeout") || took > 30*time.Second {
			t.Errorf("%s: error %v after %v, want a timeout within the SDK's retries", c.name, err, took)
		}
	}

	// A PUT that takes longer than the timeout to send, as the server
	// reads it slowly but steadily, goes through: one PUT of 64 MiB.
	tr, err = newS3Transport(fakeS3Options(srv.URL, Options{S3Timeout: time.Second, S3PartSize: 128 << 20, S3Concurrency: 2}), &scrubber{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	bf, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	start := time.Now()
	if err := tr.put(context.Background(), "s3://b/slow-reader", bf, size); err != nil {
		t.Fatalf("slow but steady PUT: %v", err)
	}
	if got := slowPut.Load(); got != size {
		t.Errorf("the server read %d bytes, want %d", got, size)
	}
	t.Logf("the slow PUT took %v", time.Since(start))
}
