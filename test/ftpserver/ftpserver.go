// Package ftpserver runs vsftpd for tests: a local user whose home is Home,
// and anonymous reads of Anon. test/filer-deps.sh installs vsftpd and
// creates the user; vsftpd needs root to log the user in.
package ftpserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The FTP test user, created by test/filer-deps.sh (a local test account).
const (
	User = "teskftp"
	Pass = "teskftp-test-pw"
)

// DepsHint says how to install the server and the user.
const DepsHint = "run `make filer-deps` (test/filer-deps.sh)"

// Server is a running vsftpd.
type Server struct {
	Host       string
	Port       int
	User, Pass string
	// Home is the user's directory (the root of its URLs), Anon the
	// anonymous user's.
	Home, Anon string
	// Log is vsftpd's log, every command of every session.
	Log  string
	stop func()
}

// StartOn starts vsftpd on a free port of the address host (127.0.0.1, or
// the real node's HostIP for pods to reach it), passive ports included. The
// process dies with the caller.
func StartOn(host string) (*Server, error) {
	bin, err := exec.LookPath("vsftpd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/vsftpd", "/sbin/vsftpd"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("vsftpd is not installed: %s", DepsHint)
	}
	u, err := user.Lookup(User)
	if err != nil {
		return nil, fmt.Errorf("user %s is missing: %s", User, DepsHint)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("vsftpd needs root to log users in; the tests run as uid %d", os.Geteuid())
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "tesk-ftp-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: host, User: User, Pass: Pass, Home: filepath.Join(dir, "home"), Anon: filepath.Join(dir, "anon"), Log: filepath.Join(dir, "vsftpd.log")}
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
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	pasv := 30000 + (os.Getpid()*7+s.Port)%30000
	if pasv > 59900 {
		pasv -= 100
	}
	conf := fmt.Sprintf(`listen=YES
listen_ipv6=NO
listen_address=%[1]s
listen_port=%[2]d
background=NO
anonymous_enable=YES
anon_root=%[3]s
no_anon_password=YES
anon_upload_enable=NO
anon_mkdir_write_enable=NO
local_enable=YES
write_enable=YES
local_umask=022
chroot_local_user=YES
allow_writeable_chroot=YES
local_root=%[4]s
pasv_enable=YES
pasv_min_port=%[5]d
pasv_max_port=%[6]d
pasv_address=%[1]s
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
vsftpd_log_file=%[7]s
syslog_enable=NO
utf8_filesystem=YES
`, host, s.Port, s.Anon, s.Home, pasv, pasv+99, s.Log)
	confFile := filepath.Join(dir, "vsftpd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, confFile)
	out, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	stop, err := startProcess(cmd, net.JoinHostPort(host, strconv.Itoa(s.Port)))
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		out.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%v: %s", err, b)
	}
	s.stop = func() {
		stop()
		out.Close()
		os.RemoveAll(dir)
	}
	return s, nil
}

// Stop stops vsftpd and removes its directories.
func (s *Server) Stop() { s.stop() }

// URL is the FTP URL of a path below the user's home.
func (s *Server) URL(p string) string {
	return fmt.Sprintf("ftp://%s/%s", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), strings.TrimPrefix(p, "/"))
}

// Write puts a file below the user's home, owned by the user, as its
// directories.
func (s *Server) Write(rel, content string) error {
	p := filepath.Join(s.Home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		return err
	}
	u, err := user.Lookup(User)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := filepath.Dir(p); strings.HasPrefix(d, s.Home); d = filepath.Dir(d) {
		_ = os.Chown(d, uid, gid)
	}
	return os.Chown(p, uid, gid)
}

func startProcess(cmd *exec.Cmd, addr string) (func(), error) {
	// Killed too if the test binary dies without stopping it.
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s did not listen on %s: %v", cmd.Path, addr, err)
		}
		select {
		case <-done:
			return nil, fmt.Errorf("%s exited", cmd.Path)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return stop, nil
}
