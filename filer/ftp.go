package filer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/jlaffaye/ftp"
)

// ftpTransport moves files over FTP, with a pool of logged-in connections per
// server and user. Credentials: the URL's own user info; else
// TESK_FTP_USERNAME/PASSWORD for the hosts of TESK_FTP_HOSTS; else the
// netrc's entry for the host; else anonymous.
type ftpTransport struct {
	opts  Options
	netrc *netrc
	log   *slog.Logger

	mu   sync.Mutex
	idle map[string][]*ftpConn
	dirs map[string]bool // remote directories known to exist, by key+path
}

type ftpConn struct {
	key      string
	c        *ftp.ServerConn
	loginDir string

	mu   sync.Mutex
	ctrl net.Conn
	data net.Conn
}

// abort closes the connection's sockets, ending a transfer in progress.
func (fc *ftpConn) abort() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, c := range []net.Conn{fc.ctrl, fc.data} {
		if c != nil {
			_ = c.Close()
		}
	}
}

type ftpTarget struct {
	addr, host, user, pass string
	path                   string // as sent to the server
	withCreds              bool
	u                      *url.URL
}

func newFTPTransport(opts Options, n *netrc, log *slog.Logger) *ftpTransport {
	return &ftpTransport{opts: opts, netrc: n, log: log, idle: map[string][]*ftpConn{}, dirs: map[string]bool{}}
}

// credsAllowed reports whether TESK_FTP_USERNAME/PASSWORD may go to a host:
// an entry of TESK_FTP_HOSTS names it, alone or with this port.
func credsAllowed(hosts []string, host, port string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if hh, pp, err := net.SplitHostPort(h); err == nil {
			if strings.TrimSuffix(hh, ".") == host && pp == port {
				return true
			}
			continue
		}
		if strings.TrimSuffix(strings.Trim(h, "[]"), ".") == host {
			return true
		}
	}
	return false
}

func (t *ftpTransport) target(raw string) (ftpTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return ftpTarget{}, fmt.Errorf("invalid URL: %v", plainErr(err))
	}
	if u.Hostname() == "" {
		return ftpTarget{}, errors.New("the URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = "21"
	}
	tg := ftpTarget{addr: net.JoinHostPort(u.Hostname(), port), host: u.Hostname(), u: u}
	switch {
	case u.User != nil:
		tg.user = u.User.Username()
		tg.pass, _ = u.User.Password()
		tg.withCreds = true
	case t.opts.FTPUser != "" && credsAllowed(t.opts.FTPHosts, u.Hostname(), port):
		tg.user, tg.pass, tg.withCreds = t.opts.FTPUser, t.opts.FTPPassword, true
	default:
		if e, ok := t.netrc.lookup(u.Hostname()); ok && e.login != "" {
			tg.user, tg.pass, tg.withCreds = e.login, e.password, true
		} else {
			tg.user, tg.pass = "anonymous", "anonymous@"
		}
	}
	// As in RFC 1738 and curl: the path is relative to the login directory;
	// an absolute one is written with a leading %2F (ftp://host/%2Fdata/x).
	tg.path = strings.TrimPrefix(u.Path, "/")
	if strings.ContainsAny(tg.path, "\r\n\x00") {
		return ftpTarget{}, errors.New("the URL's path has control characters")
	}
	return tg, nil
}

func (t *ftpTransport) connect(ctx context.Context, tg ftpTarget) (*ftpConn, error) {
	key := tg.addr + "\x00" + tg.user
	t.mu.Lock()
	if cs := t.idle[key]; len(cs) > 0 {
		fc := cs[len(cs)-1]
		t.idle[key] = cs[:len(cs)-1]
		t.mu.Unlock()
		return fc, nil
	}
	t.mu.Unlock()

	fc := &ftpConn{key: key}
	dial := deadlineDialer(t.opts.FTPTimeout, t.opts.Reach)
	c, err := ftp.Dial(tg.addr,
		ftp.DialWithTimeout(t.opts.FTPTimeout),
		ftp.DialWithDialFunc(func(network, address string) (net.Conn, error) {
			nc, err := dial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			fc.mu.Lock()
			if fc.ctrl == nil {
				fc.ctrl = nc
			} else {
				fc.data = nc
			}
			fc.mu.Unlock()
			return nc, nil
		}))
	if err != nil {
		return nil, fmt.Errorf("connect: %v", err)
	}
	fc.c = c
	if err := c.Login(tg.user, tg.pass); err != nil {
		_ = c.Quit()
		who := "anonymously"
		if tg.withCreds {
			who = "with the configured credentials"
		}
		return nil, fmt.Errorf("login %s: %v", who, err)
	}
	if fc.loginDir, err = c.CurrentDir(); err != nil {
		_ = c.Quit()
		return nil, fmt.Errorf("PWD: %v", err)
	}
	t.log.Debug("ftp connected", "host", tg.addr, "credentials", tg.withCreds)
	return fc, nil
}

// release returns a connection to the pool, or closes it after an error.
func (t *ftpTransport) release(fc *ftpConn, err error) {
	if err != nil {
		_ = fc.c.Quit()
		fc.abort()
		return
	}
	t.mu.Lock()
	t.idle[fc.key] = append(t.idle[fc.key], fc)
	t.mu.Unlock()
}

func (t *ftpTransport) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, cs := range t.idle {
		for _, fc := range cs {
			_ = fc.c.Quit()
		}
		delete(t.idle, k)
	}
}

// with runs fn on a pooled connection; a cancelled context aborts it.
func (t *ftpTransport) with(ctx context.Context, tg ftpTarget, fn func(fc *ftpConn) error) error {
	fc, err := t.connect(ctx, tg)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, fc.abort)
	err = fn(fc)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	t.release(fc, err)
	return err
}

// isDir reports whether a remote path is a directory (CWD into it works),
// and returns to the login directory.
func (fc *ftpConn) isDir(p string) (bool, error) {
	if err := fc.c.ChangeDir(p); err != nil {
		return false, nil
	}
	if err := fc.c.ChangeDir(fc.loginDir); err != nil {
		return true, fmt.Errorf("CWD %s: %v", fc.loginDir, err)
	}
	return true, nil
}

func (t *ftpTransport) get(ctx context.Context, raw string, w *os.File) (int64, error) {
	tg, err := t.target(raw)
	if err != nil {
		return 0, err
	}
	var n int64
	err = t.with(ctx, tg, func(fc *ftpConn) error {
		resp, err := fc.c.Retr(tg.path)
		if err != nil {
			return fmt.Errorf("RETR: %v", err)
		}
		n, err = copyStream(w, resp)
		if cerr := resp.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("RETR: after %d bytes: %v", n, err)
		}
		return nil
	})
	return n, err
}

func (t *ftpTransport) put(ctx context.Context, raw string, f *os.File, size int64) error {
	tg, err := t.target(raw)
	if err != nil {
		return err
	}
	if tg.path == "" || strings.HasSuffix(tg.path, "/") {
		return errors.New("the URL names a directory, not a file")
	}
	return t.with(ctx, tg, func(fc *ftpConn) error {
		dir, err := fc.isDir(tg.path)
		if err != nil {
			return err
		}
		if dir {
			return errors.New("refusing to upload a file onto an existing remote directory")
		}
		if err := t.mkdirAll(fc, path.Dir(tg.path)); err != nil {
			return err
		}
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		if err := fc.c.Stor(tg.path, f); err != nil {
			return fmt.Errorf("STOR: %v", err)
		}
		return nil
	})
}

// mkdirAll creates a remote directory and its parents, as needed.
func (t *ftpTransport) mkdirAll(fc *ftpConn, dir string) error {
	if dir == "." || dir == "/" || dir == "" {
		return nil
	}
	abs := strings.HasPrefix(dir, "/")
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	cur := ""
	if abs {
		cur = "/"
	}
	for _, p := range parts {
		cur = path.Join(cur, p)
		key := fc.key + "\x00" + cur
		t.mu.Lock()
		known := t.dirs[key]
		t.mu.Unlock()
		if known {
			continue
		}
		if ok, err := fc.isDir(cur); err != nil {
			return err
		} else if !ok {
			if err := fc.c.MakeDir(cur); err != nil {
				// Another connection may just have made it.
				if ok, _ := fc.isDir(cur); !ok {
					return fmt.Errorf("MKD %s: %v", cur, err)
				}
			}
		}
		t.mu.Lock()
		t.dirs[key] = true
		t.mu.Unlock()
	}
	return nil
}

// maxDepth bounds the depth of a remote directory tree.
const maxDepth = 64

func (t *ftpTransport) list(ctx context.Context, raw string, fn func(rel, url string, isDir bool) error) error {
	tg, err := t.target(raw)
	if err != nil {
		return err
	}
	return t.with(ctx, tg, func(fc *ftpConn) error {
		root := tg.path
		if root == "" {
			root = "."
		}
		if ok, err := fc.isDir(root); err != nil {
			return err
		} else if !ok {
			return errors.New("not a directory on the server (or it does not exist)")
		}
		var walk func(rel string, depth int) error
		walk = func(rel string, depth int) error {
			if depth > maxDepth {
				return fmt.Errorf("directory tree deeper than %d", maxDepth)
			}
			entries, err := fc.c.List(path.Join(root, rel))
			if err != nil {
				return fmt.Errorf("LIST: %v", err)
			}
			for _, e := range entries {
				if e.Name == "." || e.Name == ".." {
					continue
				}
				if err := safeName(e.Name); err != nil {
					return err
				}
				r := path.Join(rel, e.Name)
				switch e.Type {
				case ftp.EntryTypeFile:
					if err := fn(r, childURL(tg.u, r), false); err != nil {
						return err
					}
				case ftp.EntryTypeFolder:
					if err := fn(r, "", true); err != nil {
						return err
					}
					if err := walk(r, depth+1); err != nil {
						return err
					}
				default:
					t.log.Debug("ftp: not a file or directory; skipped", "url", Redact(childURL(tg.u, r)))
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
			return nil
		}
		return walk("", 0)
	})
}

// childURL is the URL of rel below the directory URL u, with u's user info.
func childURL(u *url.URL, rel string) string {
	c := *u
	c.Path = strings.TrimSuffix(u.Path, "/") + "/" + rel
	c.RawPath = ""
	return c.String()
}

// mkdir creates a directory and its parents (MKD), as needed.
func (t *ftpTransport) mkdir(ctx context.Context, raw string) error {
	tg, err := t.target(raw)
	if err != nil {
		return err
	}
	p := strings.TrimSuffix(tg.path, "/")
	if p == "" {
		return nil
	}
	return t.with(ctx, tg, func(fc *ftpConn) error { return t.mkdirAll(fc, p) })
}
