package filer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// s3Transport moves files to and from S3 and S3-compatible servers through
// the SDK's transfer manager: ranged parallel downloads written in place,
// multipart uploads for large files, in memory bounded by the part size;
// files below a part go up in one streamed PUT.
type s3Transport struct {
	client *s3.Client
	tm     *transfermanager.Client
	// threshold is the size from which an upload is multipart.
	threshold int64
	// big bounds the multipart uploads that run at once, as each buffers
	// S3Concurrency+1 parts.
	big chan struct{}
}

// maxBigUploads is how many multipart uploads run at once: one keeps the
// filer's memory near (S3Concurrency+2) parts, while its parts still move in
// parallel.
const maxBigUploads = 1

func newS3Transport(opts Options, scrub *scrubber) (*s3Transport, error) {
	a := opts.AWS
	// The SDK logs warnings only (its debug messages, e.g. about checksums,
	// would flood the filer's logs), through the filer's logger.
	sdkLog := logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		if c == logging.Warn {
			opts.Logger.Warn("s3: " + scrub.scrub(fmt.Sprintf(format, v...)))
		}
	})
	// The SDK sets no read timeout for S3: a server that stops sending
	// would hold the filer for ever. The connections bound each read and
	// write as the HTTP transport's do; a write also extends the wait for
	// the answer, so that a part that takes long to send is not cut off
	// (the SDK's own read timeout would count from before the request).
	hc := awshttp.NewBuildableClient()
	if opts.S3Timeout > 0 {
		hc = hc.WithTransportOptions(func(tr *http.Transport) {
			tr.DialContext = deadlineDialer(opts.S3Timeout, nil)
		})
	}
	lo := []func(*config.LoadOptions) error{config.WithLogger(sdkLog), config.WithHTTPClient(hc)}
	if a.ConfigFile != "" {
		lo = append(lo, config.WithSharedConfigFiles([]string{a.ConfigFile}))
	}
	if a.CredentialsFile != "" {
		lo = append(lo, config.WithSharedCredentialsFiles([]string{a.CredentialsFile}))
	}
	if a.Profile != "" {
		lo = append(lo, config.WithSharedConfigProfile(a.Profile))
	}
	if a.Region != "" {
		lo = append(lo, config.WithRegion(a.Region))
	}
	if a.AccessKeyID != "" {
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(a.AccessKeyID, a.SecretAccessKey, "")))
	}
	if a.DisableIMDS || a.KeysOnly {
		lo = append(lo, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), lo...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %v", err)
	}
	if a.KeysOnly && a.AccessKeyID == "" {
		if cfg.Credentials, err = profileKeys(a); err != nil {
			return nil, fmt.Errorf("AWS credentials: %v", err)
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	virtual := addressingStyle(a) == "virtual"
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// The payload is not hashed into the signature (UNSIGNED-PAYLOAD):
		// hashing would read every part twice. The SDK's request checksums
		// (RequestChecksumCalculation) still apply.
		o.APIOptions = append(o.APIOptions, unsignedPayloadFirst)
		if a.Endpoint != "" {
			o.BaseEndpoint = aws.String(a.Endpoint)
		}
		switch {
		case a.PathStyle != nil:
			o.UsePathStyle = *a.PathStyle
		default:
			// BaseEndpoint holds endpoint_url of the config file here, if
			// any: an S3-compatible server, which needs path style unless
			// the config says otherwise.
			o.UsePathStyle = o.BaseEndpoint != nil && !virtual
		}
	})
	threshold := max(opts.S3PartSize, 5<<20)
	tm := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = threshold
		o.MultipartUploadThreshold = threshold
		o.Concurrency = opts.S3Concurrency
		o.GetObjectType = tmtypes.GetObjectRanges
		o.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	})
	return &s3Transport{client: client, tm: tm, threshold: threshold, big: make(chan struct{}, maxBigUploads)}, nil
}

// unsignedPayloadFirst marks the payload UNSIGNED-PAYLOAD as the request
// starts, before any step that would hash it: the signer's payload hash
// step, and, over plain HTTP (an S3-compatible server in the cluster, say),
// the request checksum step, which computes the checksum in a pass of its
// own over the body and, unless the payload hash is already set, a SHA-256
// of the body in the same pass that then signs the payload after all (the
// client hashes every byte, and the server checks that hash). Over HTTPS
// the checksum is a trailer, which sets a streaming payload hash of its own.
func unsignedPayloadFirst(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("UnsignedPayloadFirst",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(v4.SetPayloadHash(ctx, unsignedPayload), in)
		}), middleware.After)
}

// unsignedPayload is the x-amz-content-sha256 of a payload left out of the
// signature.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// addressingStyle reads "addressing_style" of the s3 section of the profile
// in the AWS config file, as the AWS CLI writes it:
//
//	[default]
//	s3 =
//	    addressing_style = path
func addressingStyle(a AWSOptions) string {
	file := a.ConfigFile
	if file == "" {
		file = os.Getenv("AWS_CONFIG_FILE")
	}
	if file == "" {
		if home, err := os.UserHomeDir(); err == nil {
			file = home + "/.aws/config"
		}
	}
	profile := a.Profile
	if profile == "" {
		profile = os.Getenv("AWS_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	inProfile, inS3 := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";") {
			continue
		}
		if strings.HasPrefix(t, "[") {
			name := strings.TrimSpace(strings.Trim(t, "[]"))
			name = strings.TrimSpace(strings.TrimPrefix(name, "profile "))
			inProfile, inS3 = name == profile, false
			continue
		}
		if !inProfile {
			continue
		}
		k, v, _ := strings.Cut(t, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		indented := line[0] == ' ' || line[0] == '\t'
		switch {
		case !indented:
			inS3 = k == "s3" && v == ""
		case inS3 && k == "addressing_style":
			return strings.ToLower(v)
		}
	}
	return ""
}

// parseS3 splits s3://bucket/key. The key is taken as written (no
// percent-decoding), as the AWS CLI does.
func parseS3(raw string) (bucket, key string, err error) {
	rest, ok := cutPrefixFold(raw, "s3://")
	if !ok {
		return "", "", errors.New("not an s3:// URL")
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", errors.New("the URL has no bucket")
	}
	if strings.ContainsAny(bucket, "@?#") {
		return "", "", errors.New("the URL's bucket is not a bucket name")
	}
	return bucket, key, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func (t *s3Transport) get(ctx context.Context, raw string, w *os.File) (int64, error) {
	bucket, key, err := parseS3(raw)
	if err != nil {
		return 0, err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return 0, errors.New("the URL names a directory, not an object (is the input's type DIRECTORY?)")
	}
	out, err := t.tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{
		Bucket:   aws.String(bucket),
		Key:      aws.String(key),
		WriterAt: w,
	})
	if err != nil {
		return 0, err
	}
	return aws.ToInt64(out.ContentLength), nil
}

func (t *s3Transport) put(ctx context.Context, raw string, f *os.File, size int64) error {
	bucket, key, err := parseS3(raw)
	if err != nil {
		return err
	}
	if key == "" || strings.HasSuffix(key, "/") {
		return errors.New("the URL names a directory, not an object key")
	}
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	if size < t.threshold {
		// One PUT that streams the file: the transfer manager would read it
		// into memory first, up to a part's size, for each of the files
		// that move at once.
		_, err = t.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(bucket),
			Key:           aws.String(key),
			Body:          f,
			ContentLength: aws.Int64(size),
		})
		return err
	}
	select {
	case t.big <- struct{}{}:
		defer func() { <-t.big }()
	case <-ctx.Done():
		return ctx.Err()
	}
	_, err = t.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   f,
	})
	return err
}

func (t *s3Transport) list(ctx context.Context, raw string, fn func(rel, url string, isDir bool) error) error {
	bucket, prefix, err := parseS3(raw)
	if err != nil {
		return err
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	p := s3.NewListObjectsV2Paginator(t.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(bucket),
		Prefix: aws.String(prefix),
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			n++
			rel, ok := strings.CutPrefix(k, prefix)
			if !ok {
				return fmt.Errorf("the server listed key %q outside prefix %q", k, prefix)
			}
			if rel == "" {
				continue // the directory's own marker
			}
			if err := fn(rel, "s3://"+bucket+"/"+k, strings.HasSuffix(rel, "/")); err != nil {
				return err
			}
		}
	}
	if n == 0 {
		return errors.New("no objects below this prefix: the directory does not exist")
	}
	return nil
}

// mkdir creates an empty directory: a zero-byte object whose key ends in
// "/", as the S3 console does. The bucket itself needs none.
func (t *s3Transport) mkdir(ctx context.Context, raw string) error {
	bucket, key, err := parseS3(raw)
	if err != nil {
		return err
	}
	key = strings.TrimSuffix(key, "/")
	if key == "" {
		return nil
	}
	_, err = t.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key + "/"),
		Body:          strings.NewReader(""),
		ContentLength: aws.Int64(0),
	})
	return err
}

// profileKeys are the keys of the profile in the shared files, or anonymous
// credentials when it has none (KeysOnly).
func profileKeys(a AWSOptions) (aws.CredentialsProvider, error) {
	profile := a.Profile
	if profile == "" {
		profile = "default"
	}
	sc, err := config.LoadSharedConfigProfile(context.Background(), profile, func(o *config.LoadSharedConfigOptions) {
		o.ConfigFiles, o.CredentialsFiles = []string{}, []string{}
		if a.ConfigFile != "" {
			o.ConfigFiles = []string{a.ConfigFile}
		}
		if a.CredentialsFile != "" {
			o.CredentialsFiles = []string{a.CredentialsFile}
		}
	})
	var missing config.SharedConfigProfileNotExistError
	switch {
	case errors.As(err, &missing):
		return aws.AnonymousCredentials{}, nil
	case err != nil:
		return nil, err
	case !sc.Credentials.HasKeys():
		return aws.AnonymousCredentials{}, nil
	}
	return credentials.NewStaticCredentialsProvider(sc.Credentials.AccessKeyID, sc.Credentials.SecretAccessKey, sc.Credentials.SessionToken), nil
}
