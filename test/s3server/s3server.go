// Package s3server runs versitygw, an S3-compatible server, on loopback for
// tests (built into ~/.cache/tesk-knative/tools by test/filer-deps.sh).
package s3server

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Test credentials of the server's root account.
const (
	AccessKey = "filertestkey"
	SecretKey = "filertestsecret0123456789"
)

// DepsHint says how to install the server.
const DepsHint = "run `make filer-deps` (test/filer-deps.sh)"

// Server is a running versitygw.
type Server struct {
	Endpoint          string
	AccessKey, Secret string
	// Dir holds the buckets.
	Dir string
	// PID is versitygw's process ID.
	PID  int
	stop func()
}

// ToolsDir is where test/filer-deps.sh puts the test servers.
func ToolsDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "tesk-knative", "tools")
}

// Start starts versitygw ($VERSITYGW, else the one in ToolsDir) on a free
// loopback port with an empty temporary root. The process dies with the
// caller.
func Start() (*Server, error) { return StartOn("127.0.0.1") }

// StartOn is Start on a free port of the address host (e.g. the real
// node's HostIP, for pods to reach it).
func StartOn(host string) (*Server, error) {
	bin := os.Getenv("VERSITYGW")
	if bin == "" {
		bin = filepath.Join(ToolsDir(), "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("versitygw not found at %s: %s", bin, DepsHint)
	}
	dir, err := os.MkdirTemp("", "s3server-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Keep-alive as S3 services have it (versitygw closes each connection
	// after one request without it).
	cmd := exec.Command(bin, "--quiet", "--keep-alive", "--port", addr, "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s := &Server{Endpoint: "http://" + addr, AccessKey: AccessKey, Secret: SecretKey, Dir: dir, PID: cmd.Process.Pid}
	s.stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		os.Remove(logf.Name())
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-done:
			s.stop()
			return nil, fmt.Errorf("%s exited before it listened on %s", bin, addr)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not listen on %s within 20 s", bin, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server and removes its data.
func (s *Server) Stop() { s.stop() }

// Client is a plain S3 client of the server (path-style, us-east-1).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.Secret, ""),
		UsePathStyle: true,
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	return err
}

// Put writes an object.
func (s *Server) Put(ctx context.Context, bucket, key, content string) error {
	_, err := s.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(content)})
	return err
}

// Get reads an object.
func (s *Server) Get(ctx context.Context, bucket, key string) (string, error) {
	out, err := s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

// AWSConfig is the content of an AWS config and credentials file for the
// server, as the filer's aws-secret holds them (keys config, credentials).
func (s *Server) AWSConfig() (config, credentials string) {
	return fmt.Sprintf("[default]\nregion = us-east-1\nendpoint_url = %s\n", s.Endpoint),
		fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s.AccessKey, s.Secret)
}

// WriteAWSConfig writes an AWS config and credentials file for the server,
// as the aws-secret mounted into the filer holds them, and returns their
// paths.
func (s *Server) WriteAWSConfig(dir string) (config, creds string, err error) {
	cfg, cred := s.AWSConfig()
	config, creds = filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	if err = os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		return
	}
	err = os.WriteFile(creds, []byte(cred), 0o600)
	return
}
