//go:build integration

package filer

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/elixir-cloud-aai/tesk-knative/test/s3server"
)

// The filer's tests run against real servers on loopback: versitygw (an
// S3-compatible server) and vsftpd, started here once per test binary.
// test/filer-deps.sh installs both; a missing one fails the tests that need
// it, naming that command.
const depsHint = s3server.DepsHint

// s3Secret is the S3 server's secret key, which no log may show.
const s3Secret = s3server.SecretKey

func TestMain(m *testing.M) {
	// No test may ask the EC2 metadata service for credentials: it is not
	// on loopback.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	stopServers()
	os.Exit(code)
}

var (
	serversMu sync.Mutex
	stoppers  []func()
)

func stopServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for i := len(stoppers) - 1; i >= 0; i-- {
		stoppers[i]()
	}
	stoppers = nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitPort(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startProcess starts a server process that is killed with the test binary.
func startProcess(cmd *exec.Cmd, addr string) (func(), error) {
	// Killed too if the test binary dies without stopping it (a panic, a
	// timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if err := waitPort(addr, 20*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%s did not listen on %s: %v", cmd.Path, addr, err)
	}
	select {
	case <-done:
		return nil, fmt.Errorf("%s exited", cmd.Path)
	default:
	}
	return stop, nil
}

// s3Server is a running versitygw.
type s3Server struct{ *s3server.Server }

var (
	s3Once   sync.Once
	s3Srv    *s3Server
	s3SrvErr error
)

// startS3 returns the shared versitygw, starting it once.
func startS3(t testing.TB) *s3Server {
	t.Helper()
	s3Once.Do(func() {
		srv, err := s3server.Start()
		if err != nil {
			s3SrvErr = err
			return
		}
		serversMu.Lock()
		stoppers = append(stoppers, srv.Stop)
		serversMu.Unlock()
		s3Srv = &s3Server{srv}
	})
	if s3SrvErr != nil {
		t.Fatalf("S3 server: %v", s3SrvErr)
	}
	return s3Srv
}

// client is a plain S3 client of the server, for setting up and checking.
func (s *s3Server) client() *s3.Client { return s.Client() }

var bucketSeq int

// bucket creates a new bucket.
func (s *s3Server) bucket(t testing.TB) string {
	t.Helper()
	serversMu.Lock()
	bucketSeq++
	name := fmt.Sprintf("b%d-%d", os.Getpid(), bucketSeq)
	serversMu.Unlock()
	_, err := s.client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return name
}

func (s *s3Server) put(t testing.TB, bucket, key, content string) {
	t.Helper()
	_, err := s.client().PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(content),
	})
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
}

func (s *s3Server) get(t testing.TB, bucket, key string) string {
	t.Helper()
	out, err := s.client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	var b strings.Builder
	if _, err := copyStream(&b, out.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// awsOptions configure the filer for the server.
func (s *s3Server) awsOptions() AWSOptions {
	return AWSOptions{Endpoint: s.Endpoint, AccessKeyID: s.AccessKey, SecretAccessKey: s.Secret, DisableIMDS: true}
}

// ftpServer is a running vsftpd with a user whose home is Home, and
// anonymous access to Anon.
type ftpServer struct {
	Port       int
	User, Pass string
	Home, Anon string
	Log        string
}

// The FTP test user, created by test/filer-deps.sh.
const (
	ftpUser = "teskftp"
	ftpPass = "teskftp-test-pw"
)

var (
	ftpOnce   sync.Once
	ftpSrv    *ftpServer
	ftpSrvErr error
)

func startFTP(t testing.TB) *ftpServer {
	t.Helper()
	ftpOnce.Do(func() { ftpSrv, ftpSrvErr = launchFTP(t) })
	if ftpSrvErr != nil {
		t.Fatalf("FTP server: %v", ftpSrvErr)
	}
	return ftpSrv
}

func launchFTP(t testing.TB) (*ftpServer, error) {
	bin, err := exec.LookPath("vsftpd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/vsftpd", "/sbin/vsftpd"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("vsftpd is not installed: %s", depsHint)
	}
	u, err := user.Lookup(ftpUser)
	if err != nil {
		return nil, fmt.Errorf("user %s is missing: %s", ftpUser, depsHint)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("vsftpd needs root to log users in; the tests run as uid %d", os.Geteuid())
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "filer-ftp-")
	if err != nil {
		return nil, err
	}
	s := &ftpServer{User: ftpUser, Pass: ftpPass, Home: filepath.Join(dir, "home"), Anon: filepath.Join(dir, "anon"), Log: filepath.Join(dir, "vsftpd.log")}
	for _, d := range []string{s.Home, s.Anon} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chown(s.Home, uid, gid); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/var/run/vsftpd/empty", 0o755); err != nil {
		return nil, err
	}
	s.Port = freePort(t)
	pasv := 30000 + (os.Getpid()*7+s.Port)%30000
	if pasv > 59900 {
		pasv -= 100
	}
	conf := fmt.Sprintf(`listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=%d
background=NO
anonymous_enable=YES
anon_root=%s
no_anon_password=YES
anon_upload_enable=NO
anon_mkdir_write_enable=NO
local_enable=YES
write_enable=YES
local_umask=022
chroot_local_user=YES
allow_writeable_chroot=YES
local_root=%s
pasv_enable=YES
pasv_min_port=%d
pasv_max_port=%d
pasv_address=127.0.0.1
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
pam_service_name=vsftpd
secure_chroot_dir=/var/run/vsftpd/empty
userlist_enable=NO
max_clients=100
max_per_ip=100
delay_failed_login=0
xferlog_enable=YES
log_ftp_protocol=YES
vsftpd_log_file=%s
syslog_enable=NO
utf8_filesystem=YES
`, s.Port, s.Anon, s.Home, pasv, pasv+99, s.Log)
	confFile := filepath.Join(dir, "vsftpd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, confFile)
	out, _ := os.Create(filepath.Join(dir, "stderr"))
	cmd.Stdout, cmd.Stderr = out, out
	stop, err := startProcess(cmd, fmt.Sprintf("127.0.0.1:%d", s.Port))
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		return nil, fmt.Errorf("%v: %s", err, b)
	}
	serversMu.Lock()
	stoppers = append(stoppers, func() {
		stop()
		out.Close()
		os.RemoveAll(dir)
	})
	serversMu.Unlock()
	return s, nil
}

// url is an FTP URL of a path below the user's home.
func (s *ftpServer) url(host, p string) string {
	return fmt.Sprintf("ftp://%s:%d/%s", host, s.Port, strings.TrimPrefix(p, "/"))
}

// write puts a file below the user's home, owned by the user.
func (s *ftpServer) write(t testing.TB, rel, content string) {
	t.Helper()
	p := filepath.Join(s.Home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := user.Lookup(ftpUser)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := filepath.Dir(p); strings.HasPrefix(d, s.Home); d = filepath.Dir(d) {
		_ = os.Chown(d, uid, gid)
	}
	_ = os.Chown(p, uid, gid)
}
