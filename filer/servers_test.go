//go:build integration

package filer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/elixir-cloud-aai/tesk-knative/test/ftpserver"
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

// ftpServer is a running vsftpd (test/ftpserver) on loopback.
type ftpServer struct{ *ftpserver.Server }

// The FTP test user, created by test/filer-deps.sh.
const (
	ftpUser = ftpserver.User
	ftpPass = ftpserver.Pass
)

var (
	ftpOnce   sync.Once
	ftpSrv    *ftpServer
	ftpSrvErr error
)

func startFTP(t testing.TB) *ftpServer {
	t.Helper()
	ftpOnce.Do(func() {
		srv, err := ftpserver.StartOn("127.0.0.1")
		if err != nil {
			ftpSrvErr = err
			return
		}
		ftpSrv = &ftpServer{srv}
		serversMu.Lock()
		stoppers = append(stoppers, srv.Stop)
		serversMu.Unlock()
	})
	if ftpSrvErr != nil {
		t.Fatalf("FTP server: %v", ftpSrvErr)
	}
	return ftpSrv
}

// url is an FTP URL of a path below the user's home.
func (s *ftpServer) url(host, p string) string {
	return fmt.Sprintf("ftp://%s:%d/%s", host, s.Port, strings.TrimPrefix(p, "/"))
}

// write puts a file below the user's home, owned by the user.
func (s *ftpServer) write(t testing.TB, rel, content string) {
	t.Helper()
	if err := s.Write(rel, content); err != nil {
		t.Fatal(err)
	}
}
