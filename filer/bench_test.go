//go:build integration

package filer

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/procstat"
)

// BenchmarkFiler moves one 1 GiB file and 1,000 small files each way
// through S3 (versitygw) and HTTP (net/http) on loopback, the small files
// also through a proxy that adds 2 ms of round trip, with the filer
// command as a subprocess (as in the filer jobs), and the same transfers by
// curl as the baseline (for many files, curl moving as many at once as the
// filer, and curl moving them one by one). It prints MB/s (10^6 bytes),
// files/s, the peak RSS and CPU seconds of each process, the server's CPU
// seconds during each, and the filer/baseline ratio, as medians of
// FILER_BENCH_REPS runs (default 3); FILER_BENCH_ONLY selects transfers by
// a part of their names, FILER_BENCH_BIG_MB sets the big file's size. Run it
// with `make bench-filer`.
func BenchmarkFiler(b *testing.B) {
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("FILER_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	bigSize := int64(1 << 30)
	if v, err := strconv.ParseInt(os.Getenv("FILER_BENCH_BIG_MB"), 10, 64); err == nil && v > 0 {
		bigSize = v << 20
	}
	bigName := fmt.Sprintf("%dMiB", bigSize>>20)
	if bigSize == 1<<30 {
		bigName = "1GiB"
	}
	const smallCount, smallSize = 1000, 4 << 10
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Fatalf("curl is missing: %s", depsHint)
	}
	base := benchDir(b, bigSize)
	work, err := os.MkdirTemp(base, "filer-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(work)
	// versitygw keeps its objects there too.
	b.Setenv("TMPDIR", work)
	s3srv := startS3(b)
	bin := filepath.Join(work, "filer")
	launcher := filepath.Join(work, "rsslaunch")
	for pkg, out := range map[string]string{"../cmd/filer": bin, "./testdata/rsslaunch": launcher} {
		if out, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}

	// The data: one big file and many small ones.
	src := filepath.Join(work, "src")
	big := filepath.Join(src, "big.bin")
	must(b, os.MkdirAll(filepath.Join(src, "small"), 0o755))
	f, err := os.Create(big)
	must(b, err)
	if _, err := io.CopyN(f, rand.Reader, bigSize); err != nil {
		b.Fatal(err)
	}
	must(b, f.Close())
	var smallNames []string
	buf := make([]byte, smallSize)
	for i := range smallCount {
		rand.Read(buf)
		n := fmt.Sprintf("f%04d.dat", i)
		smallNames = append(smallNames, n)
		must(b, os.WriteFile(filepath.Join(src, "small", n), buf, 0o644))
	}

	// HTTP: GET serves files of the server's directory, PUT stores them.
	httpDir := filepath.Join(work, "http")
	must(b, os.MkdirAll(httpDir, 0o755))
	must(b, os.Link(big, filepath.Join(httpDir, "big.bin")))
	must(b, os.MkdirAll(filepath.Join(httpDir, "small"), 0o755))
	for _, n := range smallNames {
		must(b, os.Link(filepath.Join(src, "small", n), filepath.Join(httpDir, "small", n)))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hsrv := &http.Server{Handler: fileServer(httpDir)}
	go hsrv.Serve(l)
	defer hsrv.Close()
	httpURL := "http://" + l.Addr().String()

	// S3: the filer reads the mounted aws-secret's files.
	awsDir := filepath.Join(work, "aws")
	must(b, os.MkdirAll(awsDir, 0o755))
	// awsConfig writes a config file for an endpoint and returns its path.
	awsConfig := func(name, endpoint string) string {
		p := filepath.Join(awsDir, name)
		must(b, os.WriteFile(p, []byte("[default]\nregion = us-east-1\nendpoint_url = "+endpoint+"\n"), 0o600))
		return p
	}
	filerAWS := awsConfig("config", s3srv.Endpoint)
	must(b, os.WriteFile(filepath.Join(awsDir, "credentials"), []byte("[default]\naws_access_key_id = "+s3srv.AccessKey+"\naws_secret_access_key = "+s3srv.Secret+"\n"), 0o600))
	bucket := s3srv.bucket(b)
	sigv4 := []string{"--aws-sigv4", "aws:amz:us-east-1:s3", "--user", s3srv.AccessKey + ":" + s3srv.Secret, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"}

	taskDir := filepath.Join(work, "task")
	dlDir := filepath.Join(work, "curl-dl")
	reset := func() {
		must(b, os.RemoveAll(taskDir))
		must(b, os.RemoveAll(dlDir))
		must(b, os.MkdirAll(filepath.Join(taskDir, "data"), 0o755))
		must(b, os.MkdirAll(dlDir, 0o755))
	}
	// The task volume holds the sources for the uploads.
	stage := func() {
		reset()
		must(b, os.Link(big, filepath.Join(taskDir, "data", "big.bin")))
		must(b, os.MkdirAll(filepath.Join(taskDir, "data", "small"), 0o755))
		for _, n := range smallNames {
			must(b, os.Link(filepath.Join(src, "small", n), filepath.Join(taskDir, "data", "small", n)))
		}
	}

	// The server whose CPU time each transfer is charged: this process for
	// HTTP, versitygw for S3.
	serverPID := os.Getpid()
	filer := func(mode string, task *taskspec.Task) measure {
		raw, _ := json.Marshal(task)
		tf := filepath.Join(work, "task.json")
		must(b, os.WriteFile(tf, raw, 0o644))
		cmd := exec.Command(bin, mode, "--file", tf)
		cmd.Env = append(os.Environ(), "TESK_TASK_DIR="+taskDir, "AWS_CONFIG_FILE="+filerAWS,
			"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(awsDir, "credentials"), "AWS_EC2_METADATA_DISABLED=true", "DEBUG=",
			// The servers are on loopback, which the filer refuses unless
			// the operator allows it.
			"FILER_ALLOWED_CIDRS=127.0.0.0/8")
		return runMeasured(b, launcher, cmd, serverPID)
	}
	curlRun := func(args ...string) measure {
		// Without "Expect: 100-continue", which curl sends before every
		// upload: a round trip more than the filer makes.
		cmd := exec.Command(curl, append([]string{"-sS", "--fail", "-H", "Expect:"}, args...)...)
		return runMeasured(b, launcher, cmd, serverPID)
	}
	// curl's config file for many transfers on one command.
	curlConfig := func(name string, lines []string) string {
		p := filepath.Join(work, name+".curl.conf")
		must(b, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		return p
	}
	exec1 := func(p string) string { return "/data/" + p }

	var results []result
	only := os.Getenv("FILER_BENCH_ONLY") // a substring of the transfers' names
	add := func(name string, bytes int64, files int, filerRun, baseRun func() measure, check func()) {
		if !strings.Contains(name, only) {
			return
		}
		var fm, bm []measure
		for range reps {
			fm = append(fm, filerRun())
			check()
			bm = append(bm, baseRun())
		}
		r := result{name: name, bytes: bytes, files: files, filer: median(fm), base: median(bm)}
		results = append(results, r)
		b.Logf("%-50s filer %s | curl %s | ratio %.2f", name, r.filer.format(bytes, files), r.base.format(bytes, files), r.base.seconds/r.filer.seconds)
	}
	checkSize := func(p string, size int64) func() {
		return func() {
			fi, err := os.Stat(p)
			if err != nil || fi.Size() != size {
				b.Fatalf("%s: %v, %v", p, fi, err)
			}
		}
	}
	noCheck := func() {}

	bigTask := func(url string) *taskspec.Task {
		return newTask([]taskspec.Input{{URL: url, Path: exec1("big.bin")}}, []taskspec.Output{{URL: url, Path: exec1("big.bin")}})
	}
	smallInputs := func(base string) []taskspec.Input {
		var ins []taskspec.Input
		for _, n := range smallNames {
			ins = append(ins, taskspec.Input{URL: base + "/" + n, Path: exec1("small/" + n)})
		}
		return ins
	}
	// One big file each way, over HTTP then S3.
	add("http "+bigName+" download", bigSize, 1,
		func() measure { reset(); return filer("inputs", bigTask(httpURL+"/big.bin")) },
		func() measure { reset(); return curlRun("-o", filepath.Join(dlDir, "big.bin"), httpURL+"/big.bin") },
		checkSize(filepath.Join(taskDir, "data/big.bin"), bigSize))
	add("http "+bigName+" upload", bigSize, 1,
		func() measure { stage(); return filer("outputs", bigTask(httpURL+"/up/big.bin")) },
		func() measure { return curlRun("-T", big, httpURL+"/curl-up/big.bin") },
		checkSize(filepath.Join(httpDir, "up/big.bin"), bigSize))
	serverPID = s3srv.PID
	s3URL := s3srv.Endpoint + "/" + bucket
	add("s3 "+bigName+" upload", bigSize, 1,
		func() measure { stage(); return filer("outputs", bigTask("s3://"+bucket+"/big.bin")) },
		func() measure { return curlRun(append(sigv4, "-T", big, s3URL+"/curl-up/big.bin")...) },
		noCheck)
	add("s3 "+bigName+" download", bigSize, 1,
		func() measure { reset(); return filer("inputs", bigTask("s3://"+bucket+"/big.bin")) },
		func() measure {
			reset()
			return curlRun(append(sigv4, "-o", filepath.Join(dlDir, "big.bin"), s3URL+"/curl-up/big.bin")...)
		},
		checkSize(filepath.Join(taskDir, "data/big.bin"), bigSize))
	// many adds a transfer of many files twice: against curl moving as
	// many files at once as the filer (-Z), and against curl moving them
	// one after another on one connection (a script's loop, at best).
	many := func(name string, filerRun func() measure, curlPre func(), curlArgs []string, check func()) {
		for _, parallel := range []bool{true, false} {
			args, label := curlArgs, name
			if parallel {
				args = append([]string{"-Z", "--parallel-max", strconv.Itoa(DefaultParallelism)}, curlArgs...)
			} else {
				label += ", curl 1 by 1"
			}
			add(label, smallCount*smallSize, smallCount, filerRun,
				func() measure { curlPre(); return curlRun(args...) }, check)
		}
	}
	// manyRows adds the many-files transfers each way, to the HTTP server
	// at httpURL and the S3 server at s3Endpoint.
	manyRows := func(suffix, httpURL, s3Endpoint string) {
		filerAWS = awsConfig("config"+strings.ReplaceAll(suffix, " ", "_"), s3Endpoint)
		s3URL := s3Endpoint + "/" + bucket
		var dlConf, ulConf, s3dlConf, s3ulConf []string
		for _, n := range smallNames {
			dlConf = append(dlConf, "url = "+httpURL+"/small/"+n, "output = "+filepath.Join(dlDir, n))
			ulConf = append(ulConf, "upload-file = "+filepath.Join(src, "small", n), "url = "+httpURL+"/curl-up/small/"+n)
			s3dlConf = append(s3dlConf, "url = "+s3URL+"/small/"+n, "output = "+filepath.Join(dlDir, n))
			s3ulConf = append(s3ulConf, "upload-file = "+filepath.Join(src, "small", n), "url = "+s3URL+"/curl-up/small/"+n)
		}
		name := func(s string) string { return "1000 files " + s + suffix }
		serverPID = os.Getpid()
		many("http "+name("download"),
			func() measure { reset(); return filer("inputs", newTask(smallInputs(httpURL+"/small"), nil)) },
			reset, []string{"-K", curlConfig("dl", dlConf)},
			checkSize(filepath.Join(taskDir, "data/small/f0999.dat"), smallSize))
		many("http "+name("upload"),
			func() measure {
				stage()
				return filer("outputs", newTask(nil, []taskspec.Output{{URL: httpURL + "/up/small", Path: exec1("small"), Type: taskspec.TypeDirectory}}))
			},
			func() {}, []string{"-K", curlConfig("ul", ulConf)},
			checkSize(filepath.Join(httpDir, "up/small/f0999.dat"), smallSize))
		serverPID = s3srv.PID
		many("s3 "+name("upload"),
			func() measure {
				stage()
				return filer("outputs", newTask(nil, []taskspec.Output{{URL: "s3://" + bucket + "/small", Path: exec1("small"), Type: taskspec.TypeDirectory}}))
			},
			func() {}, append(sigv4, "-K", curlConfig("s3ul", s3ulConf)),
			noCheck)
		// Given the same 1,000 URLs as curl.
		many("s3 "+name("download"),
			func() measure { reset(); return filer("inputs", newTask(smallInputs("s3://"+bucket+"/small"), nil)) },
			reset, append(sigv4, "-K", curlConfig("s3dl", s3dlConf)),
			checkSize(filepath.Join(taskDir, "data/small/f0999.dat"), smallSize))
		// As one DIRECTORY input: the filer lists the prefix first.
		add("s3 "+name("download")+", DIRECTORY", smallCount*smallSize, smallCount,
			func() measure {
				reset()
				return filer("inputs", newTask([]taskspec.Input{{URL: "s3://" + bucket + "/small", Path: exec1("small"), Type: taskspec.TypeDirectory}}, nil))
			},
			func() measure {
				reset()
				return curlRun(append(sigv4, "-Z", "--parallel-max", strconv.Itoa(DefaultParallelism), "-K", curlConfig("s3dl", s3dlConf))...)
			},
			checkSize(filepath.Join(taskDir, "data/small/f0999.dat"), smallSize))
	}
	manyRows("", httpURL, s3srv.Endpoint)
	// The same through a proxy that holds each direction's bytes for
	// linkDelay: a link of 2*linkDelay round trip, as to a server in the
	// next zone. Parallel transfers are for this.
	const linkDelay = time.Millisecond
	manyRows(", 2 ms RTT", "http://"+delayProxy(b, l.Addr().String(), linkDelay), "http://"+delayProxy(b, strings.TrimPrefix(s3srv.Endpoint, "http://"), linkDelay))

	// What a process that takes almost no memory shows: the launcher's share.
	floor := runMeasured(b, launcher, exec.Command("/bin/true"), os.Getpid())

	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "\nfiler benchmark: medians of %d runs; MB = 10^6 bytes; curl as the baseline; files in %s (%s)\n", reps, base, fsName(work))
	fmt.Fprintf(w, "many files: the filer moves %d files at once; curl as many (-Z --parallel-max %d), or one after another on one connection (\"curl 1 by 1\");\n", DefaultParallelism, DefaultParallelism)
	fmt.Fprintf(w, "2 ms RTT: through a proxy that holds each direction's bytes %v; DIRECTORY: the filer lists the prefix itself, curl is given the 1,000 URLs;\n", linkDelay)
	fmt.Fprintf(w, "S3 (versitygw, keep-alive): curl signs with --aws-sigv4 and UNSIGNED-PAYLOAD, one PUT or GET per file, no checksum, no Expect: 100-continue;\n")
	fmt.Fprintf(w, "the filer: UNSIGNED-PAYLOAD too, the SDK's request checksums, multipart uploads of 8 MiB parts (4 at once) from 8 MiB, ranged GETs (4 at once)\n")
	fmt.Fprintf(w, "%-50s %10s %8s %10s %6s %10s %8s %10s %6s %13s %6s\n", "transfer", "filer MB/s", "files/s", "peak RSS", "CPU s",
		"curl MB/s", "files/s", "peak RSS", "CPU s", "server CPU s", "ratio")
	for _, r := range results {
		fmt.Fprintf(w, "%-50s %10.0f %8.0f %7.1f MB %6.2f %10.0f %8.0f %7.1f MB %6.2f %6.2f/%-6.2f %6.2f\n", r.name,
			float64(r.bytes)/1e6/r.filer.seconds, float64(r.files)/r.filer.seconds, float64(r.filer.rssKB)/1024, r.filer.cpu,
			float64(r.bytes)/1e6/r.base.seconds, float64(r.files)/r.base.seconds, float64(r.base.rssKB)/1024, r.base.cpu,
			r.filer.serverCPU, r.base.serverCPU, r.base.seconds/r.filer.seconds)
	}
	fmt.Fprintf(w, "ratio: filer throughput / curl throughput; CPU s: user+system seconds of the client; server CPU s: of the server (versitygw, or this process for HTTP) during the filer's / curl's run\n")
	fmt.Fprintf(w, "peak RSS includes about %.1f MB that /bin/true shows when measured the same way\n", float64(floor.rssKB)/1024)
	w.Flush()
}

// benchDir is where the benchmark's files go: FILER_BENCH_DIR, else tmpfs
// (/dev/shm) when it has room for them, else /tmp. On tmpfs the clients are
// measured, not the disk: on this project's test machines (ext4 without a
// journal) creating a file right after others were deleted costs 0.2-0.4
// ms of CPU, as the inode allocator skips each recently deleted inode
// (perf: three quarters of the create in find_inode_bit/recently_deleted),
// and each run here deletes the last run's 1,000 files.
func benchDir(b *testing.B, bigSize int64) string {
	if d := os.Getenv("FILER_BENCH_DIR"); d != "" {
		return d
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic && int64(st.Bavail)*st.Bsize > 8*bigSize+1<<30 {
		return "/dev/shm"
	}
	b.Logf("/dev/shm has no room for %d MiB files: the files go to /tmp", bigSize>>20)
	return "/tmp"
}

// tmpfsMagic is statfs's f_type of tmpfs.
const tmpfsMagic = 0x01021994

// fsName names the file system of a directory for the report.
func fsName(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "?"
	}
	if st.Type == tmpfsMagic {
		return "tmpfs"
	}
	return fmt.Sprintf("f_type %#x", st.Type)
}

// delayProxy forwards TCP connections to target, each direction's bytes
// held for delay, and returns its address.
func delayProxy(b *testing.B, target string, delay time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				t, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); pipeDelayed(t, c, delay) }()
				go func() { defer wg.Done(); pipeDelayed(c, t, delay) }()
				wg.Wait()
				c.Close()
				t.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// pipeDelayed copies src to dst, each chunk written delay after it was read,
// then half-closes dst.
func pipeDelayed(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		for {
			buf := proxyBufs.Get().(*[]byte)
			n, err := src.Read(*buf)
			if n > 0 {
				q <- chunk{time.Now().Add(delay), (*buf)[:n]}
			} else {
				proxyBufs.Put(buf)
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at))
		_, err := dst.Write(c.b)
		b := c.b[:cap(c.b)]
		proxyBufs.Put(&b)
		if err != nil {
			src.Close()
			for range q {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

var proxyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

type measure struct {
	seconds   float64
	cpu       float64 // user+system seconds of the client
	serverCPU float64 // of the server during the run
	rssKB     int64
}

func (m measure) format(bytes int64, files int) string {
	return fmt.Sprintf("%7.0f MB/s %6.0f files/s %6.1f MB RSS", float64(bytes)/1e6/m.seconds, float64(files)/m.seconds, float64(m.rssKB)/1024)
}

type result struct {
	name        string
	bytes       int64
	files       int
	filer, base measure
}

// median takes the run of the median time, and the largest peak RSS.
func median(ms []measure) measure {
	s := append([]measure(nil), ms...)
	sort.Slice(s, func(i, j int) bool { return s[i].seconds < s[j].seconds })
	m := s[len(s)/2]
	for _, x := range ms {
		m.rssKB = max(m.rssKB, x.rssKB)
	}
	return m
}

// runMeasured runs a command through rsslaunch (testdata/rsslaunch), which
// reads its wall time and peak RSS from its os.ProcessState. Spawned by the
// benchmark itself, the command's ru_maxrss would start from the
// benchmark's own RSS (Linux keeps the spawner's high-water mark across the
// exec of a vfork'd child); the launcher is a process of a few MB.
func runMeasured(b *testing.B, launcher string, cmd *exec.Cmd, serverPID int) measure {
	// Each run starts without the previous runs' dirty pages to write back.
	syscall.Sync()
	serverBefore, err := procstat.CPUSeconds(serverPID)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "measure.json")
	l := exec.Command(launcher, append([]string{out, cmd.Path}, cmd.Args[1:]...)...)
	l.Env = cmd.Env
	var stderr strings.Builder
	l.Stderr = &stderr
	l.Stdout = io.Discard
	if err := l.Run(); err != nil {
		args := strings.Join(cmd.Args, " ")
		b.Fatalf("%s: %v\n%s", args[:min(200, len(args))], err, stderr.String())
	}
	serverAfter, err := procstat.CPUSeconds(serverPID)
	if err != nil {
		b.Fatal(err)
	}
	var m struct {
		Seconds, CPUSeconds float64
		MaxRSS              int64
	}
	raw, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(raw, &m) != nil {
		b.Fatalf("launcher: %v %s", err, raw)
	}
	return measure{seconds: m.Seconds, cpu: m.CPUSeconds, serverCPU: serverAfter - serverBefore, rssKB: m.MaxRSS}
}

// fileServer serves GET from dir and stores PUT bodies there.
func fileServer(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := filepath.Join(dir, filepath.FromSlash(filepath.Clean("/"+r.URL.Path)))
		switch r.Method {
		case http.MethodGet:
			http.ServeFile(w, r, p)
		case http.MethodPut:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			f, err := os.Create(p)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			_, err = copyStream(f, r.Body)
			f.Close()
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.WriteHeader(http.StatusCreated)
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
		}
	})
}

// must fails the benchmark on an error of its setup: figures of transfers
// whose files were never made would measure errors.
func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
