package filer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// deadlineConn bounds each read and write of a connection by a timeout, not
// the whole transfer: a server may take as long as it likes in all, as long
// as it keeps sending or receiving. A write also extends the read deadline,
// as the peer is not expected to answer while it is being sent to.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.extend(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *deadlineConn) extend() error {
	t := time.Now().Add(c.timeout)
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

// ReadFrom sends what net/http (or the FTP client) copies to the connection,
// a request body above all, in writes of a pooled 1 MiB buffer, each under
// its own deadline. Without it their copies move 32 KiB per write; on
// loopback, 1 MiB writes also took less time and CPU than sendfile.
func (c *deadlineConn) ReadFrom(r io.Reader) (int64, error) {
	return copyStream(c, r)
}

// writerOnly hides a writer's ReadFrom, and readerOnly a reader's WriteTo,
// so that io.CopyBuffer uses its buffer.
type writerOnly struct{ io.Writer }

type readerOnly struct{ io.Reader }

// copyBufSize is the size of a streaming copy's writes and reads.
const copyBufSize = 1 << 20

// copyBufs are the buffers of streaming copies: a few per transfer, so memory
// stays constant whatever the file sizes.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

func copyStream(w io.Writer, r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(writerOnly{w}, readerOnly{r}, *bp)
}

// deadlineDialer dials with a connect timeout, to the addresses reach
// permits (any if nil), and wraps the connection in a deadlineConn.
func deadlineDialer(timeout time.Duration, reach *Reach) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if reach != nil {
		d.ControlContext = reach.control
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: c, timeout: timeout}, nil
	}
}

type httpTransport struct {
	client *http.Client
}

func newHTTPTransport(timeout time.Duration, n *netrc, reach *Reach) *httpTransport {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           deadlineDialer(timeout, reach),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		// A .gz file served with Content-Encoding: gzip must arrive as it
		// is stored, not unpacked.
		DisableCompression:  true,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     min(90*time.Second, timeout),
		WriteBufferSize:     256 << 10,
		ReadBufferSize:      256 << 10,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &httpTransport{client: &http.Client{Transport: &netrcRoundTripper{next: tr, netrc: n}}}
}

func (t *httpTransport) close() {
	t.client.CloseIdleConnections()
}

// netrcRoundTripper adds the netrc credentials of each request's own host,
// also after a redirect to another host, unless the request has some.
type netrcRoundTripper struct {
	next  http.RoundTripper
	netrc *netrc
}

func (rt *netrcRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if rt.netrc != nil && req.Header.Get("Authorization") == "" {
		if e, ok := rt.netrc.lookup(req.URL.Hostname()); ok && e.login != "" {
			req = req.Clone(req.Context())
			req.SetBasicAuth(e.login, e.password)
		}
	}
	return rt.next.RoundTrip(req)
}

// plainErr drops the URL that net/http puts into its errors (it may hold a
// query with credentials).
func plainErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (t *httpTransport) get(ctx context.Context, raw string, w *os.File) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return 0, fmt.Errorf("invalid URL: %v", plainErr(err))
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET: %v", plainErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("GET: HTTP status %s", resp.Status)
	}
	n, err := copyStream(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET: after %d bytes: %v", n, plainErr(err))
	}
	return n, nil
}

func (t *httpTransport) put(ctx context.Context, raw string, f *os.File, size int64) error {
	body := func() (io.ReadCloser, error) {
		if size == 0 {
			return http.NoBody, nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return io.NopCloser(f), nil
	}
	b, err := body()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, raw, b)
	if err != nil {
		return fmt.Errorf("invalid URL: %v", plainErr(err))
	}
	req.ContentLength = size
	req.GetBody = body
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("PUT: %v", plainErr(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT: HTTP status %s", resp.Status)
	}
	return nil
}
