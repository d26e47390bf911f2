//go:build integration

package filer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// ftpOptions log in as the test user on 127.0.0.1 (TESK_FTP_HOSTS).
func ftpOptions(t *testing.T, srv *ftpServer) (Options, *logBuffer) {
	opts, lb := testOptions(t)
	opts.FTPUser, opts.FTPPassword, opts.FTPHosts = srv.User, srv.Pass, []string{"127.0.0.1"}
	return opts, lb
}

func TestFTPFiles(t *testing.T) {
	srv := startFTP(t)
	dir := "files-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/in/a.txt", "ftp a")
	srv.write(t, dir+"/in/name with space.txt", "spaced")
	opts, logs := ftpOptions(t, srv)
	task := newTask([]taskspec.Input{
		{URL: srv.url("127.0.0.1", dir+"/in/a.txt"), Path: "/data/in/a.txt"},
		{URL: srv.url("127.0.0.1", dir+"/in/name%20with%20space.txt"), Path: "/data/in/s.txt"},
	}, []taskspec.Output{
		{URL: srv.url("127.0.0.1", dir+"/out/new/deep/result.txt"), Path: "/data/out/r.txt"},
	})
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/in/a.txt")); got != "ftp a" {
		t.Errorf("downloaded %q", got)
	}
	if got := readFile(t, inTask(opts, "/data/in/s.txt")); got != "spaced" {
		t.Errorf("downloaded %q", got)
	}
	writeFile(t, inTask(opts, "/data/out/r.txt"), "uploaded over ftp")
	files := mustRun(t, ModeOutputs, task, opts)
	if want := []taskspec.UploadedFile{{Output: 0, Path: "/data/out/r.txt", SizeBytes: "17"}}; !uploadedEq(files, want) {
		t.Errorf("uploaded %+v", files)
	}
	if got := readFile(t, filepath.Join(srv.Home, dir, "out/new/deep/result.txt")); got != "uploaded over ftp" {
		t.Errorf("server has %q", got)
	}
	wantNotContains(t, "logs", logs.String(), srv.Pass)
}

func TestFTPDirectories(t *testing.T) {
	srv := startFTP(t)
	dir := "dirs-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/tree/a.txt", "A")
	srv.write(t, dir+"/tree/sub/b.txt", "B")
	srv.write(t, dir+"/tree/sub/deeper/c.txt", "C")
	if err := os.MkdirAll(filepath.Join(srv.Home, dir, "tree/empty/deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts, _ := ftpOptions(t, srv)
	task := newTask([]taskspec.Input{
		{URL: srv.url("127.0.0.1", dir+"/tree"), Path: "/data/tree", Type: taskspec.TypeDirectory},
	}, []taskspec.Output{
		{URL: srv.url("127.0.0.1", dir+"/copy"), Path: "/data/tree", Type: taskspec.TypeDirectory},
		{URL: srv.url("127.0.0.1", dir+"/glob"), Path: "/data/tree/*/*.txt", PathPrefix: "/data/tree"},
	})
	mustRun(t, ModeInputs, task, opts)
	for p, want := range map[string]string{"/data/tree/a.txt": "A", "/data/tree/sub/b.txt": "B", "/data/tree/sub/deeper/c.txt": "C"} {
		if got := readFile(t, inTask(opts, p)); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	if fi, err := os.Stat(inTask(opts, "/data/tree/empty/deep")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not created: %v", err)
	}
	files := mustRun(t, ModeOutputs, task, opts)
	want := []taskspec.UploadedFile{
		{Output: 0, Path: "/data/tree/a.txt", SizeBytes: "1"},
		{Output: 0, Path: "/data/tree/sub/b.txt", SizeBytes: "1"},
		{Output: 0, Path: "/data/tree/sub/deeper/c.txt", SizeBytes: "1"},
		{Output: 1, Path: "/data/tree/sub/b.txt", SizeBytes: "1"},
	}
	if !uploadedEq(files, want) {
		t.Errorf("uploaded %+v, want %+v", files, want)
	}
	for p, want := range map[string]string{"copy/a.txt": "A", "copy/sub/deeper/c.txt": "C", "glob/sub/b.txt": "B"} {
		if got := readFile(t, filepath.Join(srv.Home, dir, p)); got != want {
			t.Errorf("server's %s holds %q, want %q", p, got, want)
		}
	}
	// The empty directory (and its parent) made on the server with MKD.
	if fi, err := os.Stat(filepath.Join(srv.Home, dir, "copy/empty/deep")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not created on the server: %v", err)
	}
	if _, err := os.Stat(filepath.Join(srv.Home, dir, "glob/empty")); err == nil {
		t.Error("a wildcard output created a directory")
	}
}

func TestFTPRefusesFileOntoDirectory(t *testing.T) {
	srv := startFTP(t)
	dir := "onto-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/taken/x", "x")
	opts, _ := ftpOptions(t, srv)
	writeFile(t, inTask(opts, "/data/f"), "f")
	task := newTask(nil, []taskspec.Output{{URL: srv.url("127.0.0.1", dir+"/taken"), Path: "/data/f"}})
	msg := runErr(t, ModeOutputs, task, opts)
	wantContains(t, "error", msg, "outputs[0] /data/f -> ftp://127.0.0.1:", "/taken", "existing remote directory")
}

// TESK_FTP_USERNAME/PASSWORD go to the hosts of TESK_FTP_HOSTS only: the
// server is reached as 127.0.0.1 and as localhost, two host names for the
// filer.
func TestFTPCredentialsOnlyForListedHosts(t *testing.T) {
	srv := startFTP(t)
	dir := "creds-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/private.txt", "private")
	writeFile(t, filepath.Join(srv.Anon, dir+"-public.txt"), "public")

	opts, _ := testOptions(t)
	opts.FTPUser, opts.FTPPassword, opts.FTPHosts = srv.User, srv.Pass, []string{"localhost"}
	before, _ := os.ReadFile(srv.Log)

	// Not listed: anonymous, which sees the public file only.
	task := newTask([]taskspec.Input{{URL: srv.url("127.0.0.1", dir+"-public.txt"), Path: "/data/pub"}}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/pub")); got != "public" {
		t.Errorf("downloaded %q", got)
	}
	task = newTask([]taskspec.Input{{URL: srv.url("127.0.0.1", dir+"/private.txt"), Path: "/data/priv"}}, nil)
	wantContains(t, "error", runErr(t, ModeInputs, task, opts), "inputs[0] ftp://127.0.0.1:", "RETR")
	after, _ := os.ReadFile(srv.Log)
	log := string(after[len(before):])
	wantContains(t, "server log", log, `"USER anonymous"`)
	// What the filer sent, not the user's name anywhere: the server may
	// write the end of an earlier test's session (its QUIT, logged under
	// the user's name) after that test returned.
	wantNotContains(t, "server log", log, `"USER `+srv.User+`"`)
	wantNotContains(t, "server log", log, "["+srv.User+"] OK LOGIN")
	wantNotContains(t, "server log", log, srv.Pass)

	// Listed: the user's credentials.
	task = newTask([]taskspec.Input{{URL: srv.url("localhost", dir+"/private.txt"), Path: "/data/priv"}}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/priv")); got != "private" {
		t.Errorf("downloaded %q", got)
	}
	final, _ := os.ReadFile(srv.Log)
	wantContains(t, "server log", string(final[len(after):]), `"USER `+srv.User+`"`)
}

func TestFTPNetrc(t *testing.T) {
	srv := startFTP(t)
	dir := "netrc-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/n.txt", "via netrc")
	opts, _ := testOptions(t)
	opts.NetrcPath = filepath.Join(t.TempDir(), ".netrc")
	writeFile(t, opts.NetrcPath, "machine example.org login x password y\nmachine 127.0.0.1\n  login "+srv.User+"\n  password "+srv.Pass+"\n")
	task := newTask([]taskspec.Input{{URL: srv.url("127.0.0.1", dir+"/n.txt"), Path: "/data/n"}}, nil)
	mustRun(t, ModeInputs, task, opts)
	if got := readFile(t, inTask(opts, "/data/n")); got != "via netrc" {
		t.Errorf("downloaded %q", got)
	}
}

func TestFTPErrors(t *testing.T) {
	srv := startFTP(t)
	dir := "errs-" + filepath.Base(t.TempDir())
	srv.write(t, dir+"/f.txt", "f")
	t.Run("wrong password", func(t *testing.T) {
		opts, logs := ftpOptions(t, srv)
		opts.FTPPassword = "not-the-password"
		task := newTask([]taskspec.Input{{URL: srv.url("127.0.0.1", dir+"/f.txt"), Path: "/data/f"}}, nil)
		msg := runErr(t, ModeInputs, task, opts)
		wantContains(t, "error", msg, "inputs[0]", "login with the configured credentials", "530")
		wantNotContains(t, "error", msg, "not-the-password")
		wantNotContains(t, "logs", logs.String(), "not-the-password")
	})
	t.Run("password in URL", func(t *testing.T) {
		opts, logs := testOptions(t)
		u := strings.Replace(srv.url("127.0.0.1", dir+"/nope.txt"), "ftp://", "ftp://"+srv.User+":"+srv.Pass+"@", 1)
		task := newTask([]taskspec.Input{{URL: u, Path: "/data/f"}}, nil)
		msg := runErr(t, ModeInputs, task, opts)
		wantContains(t, "error", msg, "inputs[0] ftp://127.0.0.1:", "/nope.txt", "550")
		wantNotContains(t, "error", msg, srv.Pass, srv.User+"@")
		wantNotContains(t, "logs", logs.String(), srv.Pass)
	})
	t.Run("directory input that is a file", func(t *testing.T) {
		opts, _ := ftpOptions(t, srv)
		task := newTask([]taskspec.Input{{URL: srv.url("127.0.0.1", dir+"/f.txt"), Path: "/data/d", Type: taskspec.TypeDirectory}}, nil)
		wantContains(t, "error", runErr(t, ModeInputs, task, opts), "not a directory")
	})
	t.Run("no server", func(t *testing.T) {
		opts, _ := ftpOptions(t, srv)
		task := newTask([]taskspec.Input{{URL: "ftp://127.0.0.1:1/x", Path: "/data/d"}}, nil)
		wantContains(t, "error", runErr(t, ModeInputs, task, opts), "inputs[0] ftp://127.0.0.1:1/x", "connect")
	})
}
