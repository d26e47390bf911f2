package filer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// DefaultHTTPTimeout is FILER_HTTP_TIMEOUT when it is unset.
const DefaultHTTPTimeout = 300 * time.Second

// DefaultParallelism is how many files move at once when Options.Parallelism
// is 0 (and FILER_PARALLELISM unset).
const DefaultParallelism = 8

// MaxParallelism bounds FILER_PARALLELISM and --parallel.
const MaxParallelism = 256

// Options configure a run of the filer. The zero value works for tasks whose
// URLs need no configuration (http, inline content) with TaskDir set.
type Options struct {
	// TaskDir is where the task volume is mounted: the executor path /data/x
	// is TaskDir+"/data/x". Default taskspec.FilerTaskDir.
	TaskDir string

	// HTTPTimeout bounds connecting to an HTTP(S) server and each read from
	// or write to it (not a whole transfer). Default DefaultHTTPTimeout.
	HTTPTimeout time.Duration

	// FTPUser and FTPPassword are sent only to the FTP hosts in FTPHosts
	// (names, or name:port to match one port only).
	FTPUser, FTPPassword string
	FTPHosts             []string
	// FTPTimeout bounds connecting to an FTP server and each read from or
	// write to it. Default DefaultHTTPTimeout.
	FTPTimeout time.Duration

	// S3Timeout bounds connecting to an S3 server and each read from or
	// write to it (not a whole transfer): the request then fails, and the
	// SDK retries it. Default DefaultHTTPTimeout.
	S3Timeout time.Duration

	// NetrcPath names a netrc file with credentials for HTTP(S) and FTP
	// hosts; empty for none.
	NetrcPath string

	// AWS configures s3:// URLs.
	AWS AWSOptions

	// HostBasePath and ContainerBasePath map file:// URLs: only paths below
	// HostBasePath are allowed, and they are read and written at the same
	// path below ContainerBasePath (where the transfer volume is mounted).
	// ContainerBasePath defaults to HostBasePath.
	HostBasePath, ContainerBasePath string
	// FileWriter, when set and the filer runs as root, is the user and
	// groups that write file:// uploads: the filer's own, not root's
	// (FILER_WRITE_AS, FILER_WRITE_GROUPS; behaviour §3.13). Nil, or a
	// filer that is not root: the filer writes them itself.
	FileWriter *FileWriter

	// Reach, when set, is the addresses HTTP(S) and FTP connections may
	// go to; nil: any.
	Reach *Reach
	// SkipMissingOutputs: an output the executors did not write is left
	// out (logged), not a failure; the outputs that exist are uploaded.
	// For the upload after an executor failed (TESK_OUTPUTS_SKIP_MISSING).
	SkipMissingOutputs bool

	// Logger receives the filer's logs; nil discards them.
	Logger *slog.Logger

	// Parallelism bounds how many files move at once: the files of all
	// inputs (or outputs), those of DIRECTORY and wildcard ones included.
	// Default DefaultParallelism.
	Parallelism int

	// S3PartSize and S3Concurrency tune multipart transfers: the size of a
	// part (default 8 MiB; S3's minimum is 5 MiB) and how many parts of one
	// object move at once (default 4). An upload buffers (S3Concurrency+1)
	// parts in memory; one large upload runs at a time.
	S3PartSize    int64
	S3Concurrency int
}

// AWSOptions configure the S3 client. Empty fields are taken from the AWS
// shared config and credentials files, and the SDK's usual environment.
type AWSOptions struct {
	// ConfigFile and CredentialsFile name the shared config and credentials
	// files (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE); empty for the
	// SDK's defaults.
	ConfigFile, CredentialsFile string
	// Profile selects a profile of those files; empty for AWS_PROFILE or
	// "default".
	Profile string
	// Endpoint overrides the endpoint (endpoint_url of the config file).
	Endpoint string
	// Region overrides the region; with none configured, us-east-1.
	Region string
	// AccessKeyID and SecretAccessKey override the credentials.
	AccessKeyID, SecretAccessKey string
	// PathStyle selects path-style addressing (http://endpoint/bucket/key)
	// rather than virtual-hosted style (http://bucket.endpoint/key). Nil:
	// path style with a custom endpoint (S3-compatible servers), unless the
	// profile sets "addressing_style = virtual" in its s3 section; virtual
	// hosts without one (AWS).
	PathStyle *bool
	// DisableIMDS keeps the SDK from asking the EC2 instance metadata
	// service for credentials.
	DisableIMDS bool
	// KeysOnly takes credentials only from keys: AccessKeyID, else the
	// profile's keys in the shared files (the task's user's own, with
	// TESK_USER_CREDENTIALS); without keys requests are anonymous. Nothing
	// ambient is asked: not the instance metadata service, a web identity
	// token, a container credentials endpoint, the environment, a
	// credential process or a role to assume (behaviour §3.14).
	KeysOnly bool
}

func (o Options) withDefaults() Options {
	if o.TaskDir == "" {
		o.TaskDir = taskspec.FilerTaskDir
	}
	if o.HTTPTimeout <= 0 {
		o.HTTPTimeout = DefaultHTTPTimeout
	}
	if o.FTPTimeout <= 0 {
		o.FTPTimeout = DefaultHTTPTimeout
	}
	if o.S3Timeout <= 0 {
		o.S3Timeout = DefaultHTTPTimeout
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.S3PartSize <= 0 {
		o.S3PartSize = 8 << 20
	}
	if o.S3Concurrency <= 0 {
		o.S3Concurrency = 4
	}
	if o.ContainerBasePath == "" {
		o.ContainerBasePath = o.HostBasePath
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// OptionsFromEnv reads the filer's configuration from the environment, as
// the handler sets it in the filer jobs:
//
//	TESK_TASK_DIR                       task volume (default /tesk/task)
//	FILER_HTTP_TIMEOUT                  seconds (default 300; spaces allowed, empty = unset)
//	FILER_PARALLELISM                   files moved at once, 1-256 (default 8)
//	TESK_FTP_USERNAME, TESK_FTP_PASSWORD, TESK_FTP_HOSTS (comma-separated)
//	NETRC                               netrc file (default ~/.netrc if present)
//	AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE
//	HOST_BASE_PATH, CONTAINER_BASE_PATH file:// mapping
//	FILER_WRITE_AS, FILER_WRITE_GROUPS  UID:GID and supplementary groups
//	                                    (comma-separated) that write file://
//	                                    uploads when the filer runs as root
//	TESK_USER_CREDENTIALS               a directory with the task's user's own
//	                                    .netrc and FTP username and password
//	                                    files, in place of NETRC and TESK_FTP_*
//	FILER_ALLOWED_CIDRS                 private ranges HTTP(S) and FTP may
//	                                    reach, comma-separated (default none)
//	TESK_OUTPUTS_SKIP_MISSING           true: outputs the executors did not
//	                                    write are left out, not a failure
//
// The logger is left nil. It fails on a FILER_HTTP_TIMEOUT that is not a
// positive number of seconds, on a FILER_PARALLELISM that is not a whole
// number from 1 to MaxParallelism, on a FILER_ALLOWED_CIDRS entry that
// is not a CIDR, and on a FILER_WRITE_AS or FILER_WRITE_GROUPS that
// ParseFileWriter refuses.
func OptionsFromEnv() (Options, error) {
	var o Options
	var err error
	o.TaskDir = strings.TrimSpace(os.Getenv("TESK_TASK_DIR"))
	if v := strings.TrimSpace(os.Getenv("FILER_HTTP_TIMEOUT")); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			return o, fmt.Errorf("FILER_HTTP_TIMEOUT: %v", err)
		}
		o.HTTPTimeout = d
	}
	if v := strings.TrimSpace(os.Getenv("FILER_PARALLELISM")); v != "" {
		n, err := ParseParallelism(v)
		if err != nil {
			return o, fmt.Errorf("FILER_PARALLELISM: %v", err)
		}
		o.Parallelism = n
	}
	// Private addresses only where the operator allows them.
	if o.Reach, err = NewReach(os.Getenv("FILER_ALLOWED_CIDRS")); err != nil {
		return o, fmt.Errorf("FILER_ALLOWED_CIDRS: %v", err)
	}
	switch v := strings.TrimSpace(os.Getenv("TESK_OUTPUTS_SKIP_MISSING")); v {
	case "", "false":
	case "true":
		o.SkipMissingOutputs = true
	default:
		return o, fmt.Errorf("TESK_OUTPUTS_SKIP_MISSING: %q is neither true nor false", v)
	}
	o.FTPUser = os.Getenv("TESK_FTP_USERNAME")
	o.FTPPassword = os.Getenv("TESK_FTP_PASSWORD")
	o.FTPHosts = splitHosts(os.Getenv("TESK_FTP_HOSTS"))
	if v := os.Getenv("NETRC"); v != "" {
		o.NetrcPath = v
	} else if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".netrc")
		if _, err := os.Stat(p); err == nil {
			o.NetrcPath = p
		}
	}
	if dir := strings.TrimSpace(os.Getenv("TESK_USER_CREDENTIALS")); dir != "" {
		if err := userCredentials(&o, dir); err != nil {
			return o, fmt.Errorf("TESK_USER_CREDENTIALS: %v", err)
		}
	}
	o.AWS.ConfigFile = os.Getenv("AWS_CONFIG_FILE")
	o.AWS.CredentialsFile = os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	o.AWS.Profile = os.Getenv("AWS_PROFILE")
	// A user's own credentials, or none: never the node's or the pod's.
	o.AWS.KeysOnly = strings.TrimSpace(os.Getenv("TESK_USER_CREDENTIALS")) != ""
	if v := strings.TrimSpace(os.Getenv("FILER_WRITE_AS")); v != "" {
		if o.FileWriter, err = ParseFileWriter(v, os.Getenv("FILER_WRITE_GROUPS")); err != nil {
			return o, err
		}
	} else if strings.TrimSpace(os.Getenv("FILER_WRITE_GROUPS")) != "" {
		return o, errors.New("FILER_WRITE_GROUPS is set without FILER_WRITE_AS")
	}
	o.HostBasePath = os.Getenv("HOST_BASE_PATH")
	o.ContainerBasePath = os.Getenv("CONTAINER_BASE_PATH")
	if o.ContainerBasePath == "" {
		// As the handler: the transfer volume is mounted at the host's path.
		o.ContainerBasePath = o.HostBasePath
	}
	return o, nil
}

// userCredentials reads the task's user's own credentials, as the handler
// mounts the user's secret (behaviour §3.14): its keys .netrc, username and
// password, each absent one meaning none, never the shared credentials.
func userCredentials(o *Options, dir string) error {
	o.NetrcPath, o.FTPUser, o.FTPPassword = "", "", ""
	if _, err := os.Stat(filepath.Join(dir, ".netrc")); err == nil {
		o.NetrcPath = filepath.Join(dir, ".netrc")
	}
	for name, into := range map[string]*string{"username": &o.FTPUser, "password": &o.FTPPassword} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			*into = strings.TrimRight(string(b), "\r\n")
		}
	}
	return nil
}

// ParseParallelism reads how many files move at once: a whole number from 1
// to MaxParallelism.
func ParseParallelism(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxParallelism {
		return 0, fmt.Errorf("%q is not a whole number from 1 to %d", v, MaxParallelism)
	}
	return n, nil
}

// parseSeconds reads a positive number of seconds ("300", " 2.5 ").
func parseSeconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 || f > 1e9 {
		return 0, fmt.Errorf("%q is not a positive number of seconds", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// splitHosts reads a comma-separated host list, dropping blanks.
func splitHosts(v string) []string {
	var hs []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, strings.ToLower(h))
		}
	}
	return hs
}

// DebugFromEnv reads DEBUG: true for 1, true, yes or on (any case).
func DebugFromEnv() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("DEBUG"))) {
	case "1", "t", "true", "y", "yes", "on":
		return true
	}
	return false
}
