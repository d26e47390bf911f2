package filer

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// store is an HTTP server's files: GET serves them, PUT stores them.
type store struct {
	mu    sync.Mutex
	files map[string][]byte
	auth  map[string]string // Authorization header per request path
}

func newStore() *store { return &store{files: map[string][]byte{}, auth: map[string]string{}} }

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth[r.URL.Path] = r.Header.Get("Authorization")
	s.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		b, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	case http.MethodPut:
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if r.ContentLength != int64(len(b)) {
			http.Error(w, "length", 400)
			return
		}
		s.mu.Lock()
		s.files[r.URL.Path] = b
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

func (s *store) get(p string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p]
	return string(b), ok
}

func (s *store) set(p, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = []byte(content)
}

func TestHTTPGetPut(t *testing.T) {
	st := newStore()
	srv := httptest.NewServer(st)
	defer srv.Close()
	st.set("/in/a.txt", "alpha")
	st.set("/in/empty", "")
	opts, _ := testOptions(t)
	task := newTask([]taskspec.Input{
		{URL: srv.URL + "/in/a.txt?token=abc", Path: "/data/in/a.txt"},
		{URL: srv.URL + "/in/empty", Path: "/data/in/sub/empty"},
		{Content: "inline\n", Path: "/data/in/inline.txt"},
	}, []taskspec.Output{
		{URL: srv.URL + "/up/one.txt", Path: "/data/out/one.txt"},
		{URL: srv.URL + "/up/dir", Path: "/data/out", Type: taskspec.TypeDirectory},
		{URL: srv.URL + "/up/glob/", Path: "/data/out/*/*.log", PathPrefix: "/data/out"},
		{URL: srv.URL + "/up/zero", Path: "/data/out/zero"},
	})
	mustRun(t, ModeInputs, task, opts)
	for p, want := range map[string]string{"/data/in/a.txt": "alpha", "/data/in/sub/empty": "", "/data/in/inline.txt": "inline\n"} {
		if got := readFile(t, inTask(opts, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	writeFile(t, inTask(opts, "/data/out/one.txt"), "1")
	writeFile(t, inTask(opts, "/data/out/x/a.log"), "log a")
	writeFile(t, inTask(opts, "/data/out/y/b.log"), "log b")
	writeFile(t, inTask(opts, "/data/out/y/c.txt"), "not a log")
	writeFile(t, inTask(opts, "/data/out/zero"), "")
	files := mustRun(t, ModeOutputs, task, opts)
	want := []taskspec.UploadedFile{
		{Output: 0, Path: "/data/out/one.txt", SizeBytes: "1"},
		{Output: 1, Path: "/data/out/one.txt", SizeBytes: "1"},
		{Output: 1, Path: "/data/out/x/a.log", SizeBytes: "5"},
		{Output: 1, Path: "/data/out/y/b.log", SizeBytes: "5"},
		{Output: 1, Path: "/data/out/y/c.txt", SizeBytes: "9"},
		{Output: 1, Path: "/data/out/zero", SizeBytes: "0"},
		{Output: 2, Path: "/data/out/x/a.log", SizeBytes: "5"},
		{Output: 2, Path: "/data/out/y/b.log", SizeBytes: "5"},
		{Output: 3, Path: "/data/out/zero", SizeBytes: "0"},
	}
	if !uploadedEq(files, want) {
		t.Errorf("uploaded\n%+v, want\n%+v", files, want)
	}
	for p, want := range map[string]string{
		"/up/one.txt": "1", "/up/dir/one.txt": "1", "/up/dir/x/a.log": "log a", "/up/dir/y/c.txt": "not a log",
		"/up/glob/x/a.log": "log a", "/up/glob/y/b.log": "log b", "/up/zero": "",
	} {
		if got, ok := st.get(p); !ok || got != want {
			t.Errorf("server's %s holds %q (%v), want %q", p, got, ok, want)
		}
	}
	// Every reported file's URL, as the handler derives it, is where it went.
	for _, f := range files {
		u, ok := task.Outputs[f.Output].URLFor(f.Path)
		if !ok {
			t.Fatalf("URLFor(%s) failed", f.Path)
		}
		if _, ok := st.get(strings.TrimPrefix(u, srv.URL)); !ok {
			t.Errorf("nothing at %s", u)
		}
	}
	line := taskspec.FormatOutputFileLogs(files)
	if back, err := taskspec.ParseOutputFileLogs(line); err != nil || !uploadedEq(back, files) {
		t.Errorf("line %q does not parse back: %v", line, err)
	}
}

func TestHTTPRedirects(t *testing.T) {
	other := newStore()
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	other.set("/final", "moved far")
	st := newStore()
	st.set("/new", "moved")
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/new", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherSrv.URL+"/final", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/put-moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/put-here", http.StatusTemporaryRedirect)
	})
	mux.Handle("/", st)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	opts, _ := testOptions(t)
	task := newTask([]taskspec.Input{
		{URL: srv.URL + "/old", Path: "/data/a"},
		{URL: srv.URL + "/away", Path: "/data/b"},
	}, []taskspec.Output{{URL: srv.URL + "/put-moved", Path: "/data/a"}})
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/a")); got != "moved" {
		t.Errorf("got %q", got)
	}
	if got := readFile(t, inTask(opts, "/data/b")); got != "moved far" {
		t.Errorf("got %q", got)
	}
	mustRun(t, ModeOutputs, task, opts)
	if got, _ := st.get("/put-here"); got != "moved" {
		t.Errorf("307 PUT: server holds %q", got)
	}
}

func TestHTTPErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("/forbidden", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop?sig=secret-sig", http.StatusFound)
	})
	mux.HandleFunc("/short", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("only a few bytes"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		input  *taskspec.Input
		output *taskspec.Output
		want   []string
	}{
		{"404", &taskspec.Input{URL: srv.URL + "/missing?X-Amz-Signature=secret-sig", Path: "/data/x"}, nil,
			[]string{"inputs[0] " + srv.URL + "/missing -> /data/x", "404 Not Found"}},
		{"500", &taskspec.Input{URL: srv.URL + "/broken", Path: "/data/x"}, nil, []string{"500"}},
		{"redirect loop", &taskspec.Input{URL: srv.URL + "/loop", Path: "/data/x"}, nil, []string{"redirects"}},
		{"short body", &taskspec.Input{URL: srv.URL + "/short", Path: "/data/x"}, nil, []string{"unexpected EOF"}},
		{"user info", &taskspec.Input{URL: strings.Replace(srv.URL, "http://", "http://user:secret-pw@", 1) + "/missing", Path: "/data/x"}, nil,
			[]string{"inputs[0] " + srv.URL + "/missing", "404"}},
		{"no server", &taskspec.Input{URL: "http://127.0.0.1:1/x?token=secret-sig", Path: "/data/x"}, nil,
			[]string{"inputs[0] http://127.0.0.1:1/x -> /data/x", "refused"}},
		{"bad scheme", &taskspec.Input{URL: "gopher://h/x", Path: "/data/x"}, nil, []string{`unsupported URL scheme "gopher"`}},
		{"http directory", &taskspec.Input{URL: srv.URL + "/d", Path: "/data/d", Type: taskspec.TypeDirectory}, nil,
			[]string{"inputs[0] " + srv.URL + "/d -> /data/d", "DIRECTORY inputs over http are not supported"}},
		{"PUT 403", nil, &taskspec.Output{URL: srv.URL + "/forbidden?sig=secret-sig", Path: "/data/o"},
			[]string{"outputs[0] /data/o -> " + srv.URL + "/forbidden", "403 Forbidden"}},
		{"missing output", nil, &taskspec.Output{URL: srv.URL + "/x", Path: "/data/absent"},
			[]string{"outputs[0] /data/absent", "no such file"}},
		{"FILE output is a directory", nil, &taskspec.Output{URL: srv.URL + "/x", Path: "/data/dir"},
			[]string{"outputs[0] /data/dir", "a directory, but the output's type is FILE"}},
		{"DIRECTORY output is a file", nil, &taskspec.Output{URL: srv.URL + "/x", Path: "/data/o", Type: taskspec.TypeDirectory},
			[]string{"not a directory"}},
		{"missing DIRECTORY output", nil, &taskspec.Output{URL: srv.URL + "/x", Path: "/data/nodir", Type: taskspec.TypeDirectory},
			[]string{"outputs[0] /data/nodir", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, logs := testOptions(t)
			writeFile(t, inTask(opts, "/data/o"), "o")
			writeFile(t, inTask(opts, "/data/dir/f"), "f")
			mode := ModeInputs
			task := newTask(nil, nil)
			if tc.input != nil {
				task.Inputs = []taskspec.Input{*tc.input}
			} else {
				mode = ModeOutputs
				task.Outputs = []taskspec.Output{*tc.output}
			}
			msg := runErr(t, mode, task, opts)
			wantContains(t, "error", msg, tc.want...)
			wantNotContains(t, "error", msg, "secret-sig", "secret-pw", "?")
			wantNotContains(t, "logs", logs.String(), "secret-sig", "secret-pw")
		})
	}
}

// FILER_HTTP_TIMEOUT bounds connecting and each read, not the transfer.
func TestHTTPTimeouts(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/no-headers", func(w http.ResponseWriter, r *http.Request) {
		<-release
	})
	mux.HandleFunc("/stalls", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		<-release
	})
	mux.HandleFunc("/slow-steady", func(w http.ResponseWriter, r *http.Request) {
		// Ten pieces, each well within the timeout, all together beyond it.
		for i := range 10 {
			fmt.Fprintf(w, "piece %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	var slowPut []byte
	mux.HandleFunc("/slow-reader", func(w http.ResponseWriter, r *http.Request) {
		// About 16 MB/s: the body takes longer than the timeout in all,
		// while what the kernel's socket buffers hold drains well within
		// it (that wait, after the last write, is one read for the filer).
		buf := make([]byte, 1<<20)
		var got bytes.Buffer
		for {
			n, err := io.ReadFull(r.Body, buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
			time.Sleep(60 * time.Millisecond)
		}
		slowPut = got.Bytes()
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/never-answers", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-release
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	opts, _ := testOptions(t)
	opts.HTTPTimeout = 400 * time.Millisecond
	for _, p := range []string{"/no-headers", "/stalls"} {
		task := newTask([]taskspec.Input{{URL: srv.URL + p, Path: "/data/x"}}, nil)
		wantContains(t, "error", runErr(t, ModeInputs, task, opts), "inputs[0] "+srv.URL+p, "timeout")
	}
	task := newTask([]taskspec.Input{{URL: srv.URL + "/slow-steady", Path: "/data/x"}}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/x")); !strings.HasSuffix(got, "piece 9\n") {
		t.Errorf("got %q", got)
	}

	// A PUT whose server reads slowly but steadily (its 64 MiB take about
	// 4 s; each write waits a small part of the timeout, with a margin
	// for a loaded machine).
	opts.HTTPTimeout = 3 * time.Second
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	writeFile(t, inTask(opts, "/data/big"), string(big))
	task = newTask(nil, []taskspec.Output{{URL: srv.URL + "/slow-reader", Path: "/data/big"}})
	mustRun(t, ModeOutputs, task, opts)
	if !bytes.Equal(slowPut, big) {
		t.Errorf("server got %d bytes, want %d", len(slowPut), len(big))
	}
	task = newTask(nil, []taskspec.Output{{URL: srv.URL + "/never-answers", Path: "/data/x"}})
	wantContains(t, "error", runErr(t, ModeOutputs, task, opts), "outputs[0] /data/x -> "+srv.URL+"/never-answers", "timeout")
}

// netrc credentials go to their host only, also across a redirect.
func TestHTTPNetrc(t *testing.T) {
	other := newStore()
	other.set("/final", "elsewhere")
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	otherURL := strings.Replace(otherSrv.URL, "127.0.0.1", "localhost", 1)

	st := newStore()
	mux := http.NewServeMux()
	mux.HandleFunc("/private", func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret-pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			http.Error(w, "who", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("private data"))
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, otherURL+"/final", http.StatusFound) })
	mux.Handle("/", st)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts, logs := testOptions(t)
	opts.NetrcPath = filepath.Join(t.TempDir(), "netrc")
	writeFile(t, opts.NetrcPath, "machine 127.0.0.1 login alice password s3cret-pw\n")
	task := newTask([]taskspec.Input{
		{URL: srv.URL + "/private", Path: "/data/p"},
		{URL: srv.URL + "/away", Path: "/data/a"},
	}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/p")); got != "private data" {
		t.Errorf("got %q", got)
	}
	if got := readFile(t, inTask(opts, "/data/a")); got != "elsewhere" {
		t.Errorf("got %q", got)
	}
	other.mu.Lock()
	if a := other.auth["/final"]; a != "" {
		t.Errorf("credentials went to another host: %q", a)
	}
	other.mu.Unlock()
	wantNotContains(t, "logs", logs.String(), "s3cret-pw")

	// Without the netrc: 401.
	opts.NetrcPath = ""
	wantContains(t, "error", runErr(t, ModeInputs, task, opts), "inputs[0]", "401")
}

// A .gz file served with Content-Encoding: gzip arrives as stored.
func TestHTTPKeepsCompressedBytes(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("compressed content"))
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz.Bytes())
	}))
	defer srv.Close()
	opts, _ := testOptions(t)
	mustRun(t, ModeInputs, newTask([]taskspec.Input{{URL: srv.URL + "/f.gz", Path: "/data/f.gz"}}, nil), opts)
	if got := readFile(t, inTask(opts, "/data/f.gz")); got != gz.String() {
		t.Errorf("the file was changed in transit")
	}
}

// Several files move at once: the server answers only once three requests
// are in flight together (or gives up after a while, failing the test).
func TestParallelTransfers(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			w.Write([]byte(r.URL.Path))
		case <-time.After(20 * time.Second):
			http.Error(w, "requests came one by one", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	opts, _ := testOptions(t)
	opts.Parallelism = n
	var ins []taskspec.Input
	for i := range n {
		ins = append(ins, taskspec.Input{URL: fmt.Sprintf("%s/f%d", srv.URL, i), Path: fmt.Sprintf("/data/f%d", i)})
	}
	mustRun(t, ModeInputs, newTask(ins, nil), opts)
	for i := range n {
		if got := readFile(t, inTask(opts, fmt.Sprintf("/data/f%d", i))); got != fmt.Sprintf("/f%d", i) {
			t.Errorf("f%d holds %q", i, got)
		}
	}
}

// File names that need escaping in a URL reach the server as themselves.
func TestHTTPOddNames(t *testing.T) {
	st := newStore()
	srv := httptest.NewServer(st)
	defer srv.Close()
	opts, _ := testOptions(t)
	name := "a b?c#d%e é.txt"
	writeFile(t, inTask(opts, "/data/out/"+name), "odd")
	task := newTask(nil, []taskspec.Output{{URL: srv.URL + "/up?token=t1", Path: "/data/out", Type: taskspec.TypeDirectory}})
	files := mustRun(t, ModeOutputs, task, opts)
	if len(files) != 1 || files[0].Path != "/data/out/"+name {
		t.Fatalf("uploaded %+v", files)
	}
	if got, ok := st.get("/up/" + name); !ok || got != "odd" {
		t.Errorf("server has %v", st.files)
	}
}

// A cancelled run stops its transfers and says so.
func TestCancel(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	opts, _ := testOptions(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := Run(ctx, ModeInputs, newTask([]taskspec.Input{{URL: srv.URL + "/slow", Path: "/data/x"}}, nil), opts)
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("error %v", err)
	}
}

// writeSizes records the sizes of a connection's writes.
type writeSizes struct {
	net.Conn
	mu    sync.Mutex
	sizes []int
}

func (c *writeSizes) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// An upload's body leaves in writes of the copy buffer's size, not in the
// 32 KiB writes of net/http's own copy; and arrives whole.
func TestHTTPUploadWritesLargeChunks(t *testing.T) {
	st := newStore()
	srv := httptest.NewServer(st)
	defer srv.Close()
	const size = 4*copyBufSize + 12345
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	tr := newHTTPTransport(10*time.Second, nil, nil)
	defer tr.close()
	var conns []*writeSizes
	var mu sync.Mutex
	ht := tr.client.Transport.(*netrcRoundTripper).next.(*http.Transport)
	ht.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ws := &writeSizes{Conn: c}
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		return &deadlineConn{Conn: ws, timeout: 10 * time.Second}, nil
	}
	if err := tr.put(context.Background(), srv.URL+"/big", f, size); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.get("/big"); got != string(body) {
		t.Fatalf("the server got %d bytes, not the file's %d", len(got), size)
	}
	large, total := 0, 0
	for _, c := range conns {
		for _, n := range c.sizes {
			total += n
			if n == copyBufSize {
				large += n
			}
		}
	}
	// All but the head, what fills the transport's write buffer, and the tail.
	if large < size-2*copyBufSize {
		t.Errorf("%d of %d bytes went in writes of %d bytes; writes: %v", large, total, copyBufSize, conns[0].sizes)
	}
}
