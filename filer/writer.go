package filer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"sync"
	"syscall"
)

// A root outputs filer (behaviour §3.13) reads what the executors wrote
// with the capability DAC_OVERRIDE, but writes the shared file:// transfer
// volume only as the filer's own user: its file:// uploads are done by
// file writers, processes of the filer's binary started as that user and
// group (FileWriter). The kernel clears a process's capabilities when it
// changes from user 0 to another, so a writer has none: it creates,
// overwrites and makes directories only where the filer's user may. The
// filer opens each source itself and hands the writer the open file over
// a Unix socket; the writer copies it to its destination, so a file of any
// size moves in constant memory. Writers are started as needed, one per
// transfer under way at most, and serve one file after another until the
// run ends.

// WriterCommand, as the first argument of the filer's binary, makes it a
// file writer (ServeFileWriter); the filer starts it so, never a user.
const WriterCommand = "file-writer"

// The writer's requests and answers are single messages of a
// SOCK_SEQPACKET socket: a request is its kind and the destination's path
// relative to the base path, with the source's open file for opPut; an
// answer is answerOK, or answerErr and the error's text.
const (
	opPut      = 'P'
	opMkdir    = 'D'
	answerOK   = 'K'
	answerErr  = 'E'
	maxMessage = 64 << 10
)

// writerFD is the writer's end of the socket in the writer process.
const writerFD = 3

// writeFileIn writes r to rel below root, creating its missing parent
// directories: a file that exists is overwritten, a directory is not.
func writeFileIn(root *os.Root, rel string, r io.Reader) error {
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o777); err != nil {
			return err
		}
	}
	if fi, err := root.Stat(rel); err == nil && fi.IsDir() {
		return errors.New("refusing to write a file onto an existing directory")
	}
	w, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if f, ok := r.(*os.File); ok {
		_, err = io.Copy(w, f) // in the kernel where it can (copy_file_range)
	} else {
		_, err = copyStream(w, r)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// makeDirIn creates the directory rel and its parents below root.
func makeDirIn(root *os.Root, rel string) error {
	if fi, err := root.Stat(rel); err == nil && !fi.IsDir() {
		return errors.New("refusing to create a directory where a file exists")
	}
	return root.MkdirAll(rel, 0o777)
}

// ServeFileWriter is a file writer's process (the filer's binary run as
// "filer file-writer BASE" by the filer, with the socket as file
// descriptor 3): it writes below BASE what the filer asks, as the user it
// was started as, until the filer closes the socket. It returns the
// process's exit code.
func ServeFileWriter(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "filer %s: want one argument, the base path; got %d\n", WriterCommand, len(args))
		return 2
	}
	f := os.NewFile(writerFD, "file-writer")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "filer %s: the filer's socket: %v\n", WriterCommand, err)
		return 2
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		fmt.Fprintf(stderr, "filer %s: file descriptor %d is not a Unix socket\n", WriterCommand, writerFD)
		return 2
	}
	defer conn.Close()
	root, rootErr := os.OpenRoot(args[0])
	if rootErr == nil {
		defer root.Close()
	} else {
		rootErr = fmt.Errorf("CONTAINER_BASE_PATH: %v", rootErr)
	}
	buf := make([]byte, maxMessage)
	oob := make([]byte, syscall.CmsgSpace(4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return 0 // the filer is done
		}
		src, err := receivedFile(oob[:oobn])
		if err == nil {
			err = serve(root, rootErr, buf[0], string(buf[1:n]), src)
		}
		if src != nil {
			src.Close()
		}
		answer := []byte{answerOK}
		if err != nil {
			answer = append([]byte{answerErr}, err.Error()...)
		}
		if _, err := conn.Write(answer); err != nil {
			return 0
		}
	}
}

// serve does one request of the writer.
func serve(root *os.Root, rootErr error, op byte, rel string, src *os.File) error {
	switch {
	case rootErr != nil:
		return rootErr
	case op == opPut && src != nil:
		return writeFileIn(root, rel, src)
	case op == opMkdir && src == nil:
		return makeDirIn(root, rel)
	}
	return fmt.Errorf("a request the writer does not know (%q)", op)
}

// receivedFile is the file a message's control data passes, nil if none.
func receivedFile(oob []byte) (*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		fds = append(fds, got...)
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, fmt.Errorf("%d files passed, want one", len(fds))
	}
	return os.NewFile(uintptr(fds[0]), "source"), nil
}

// writers runs the file writers of one run of the filer.
type writers struct {
	w    FileWriter
	base string

	mu     sync.Mutex
	idle   []*writerProc
	closed bool
}

func newWriters(w FileWriter, base string) *writers {
	return &writers{w: w, base: base}
}

// writerProc is one writer process and the filer's end of its socket.
type writerProc struct {
	cmd    *exec.Cmd
	conn   *net.UnixConn
	stderr *tailWriter
	exited chan struct{} // closed once the process is waited for
}

// put writes src to rel below the base path as the writer's user; src is
// read from its current offset.
func (ws *writers) put(ctx context.Context, rel string, src *os.File) error {
	return ws.do(ctx, opPut, rel, src)
}

// mkdir creates the directory rel and its parents below the base path as
// the writer's user.
func (ws *writers) mkdir(ctx context.Context, rel string) error {
	return ws.do(ctx, opMkdir, rel, nil)
}

func (ws *writers) do(ctx context.Context, op byte, rel string, src *os.File) error {
	if len(rel)+1 > maxMessage {
		return errors.New("the path is too long")
	}
	p, err := ws.get()
	if err != nil {
		return err
	}
	answer, err := p.ask(ctx, append([]byte{op}, rel...), src)
	if err != nil {
		p.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the file writer (%s): %v%s", ws.w, err, p.stderr.text())
	}
	ws.release(p)
	if answer != "" {
		return fmt.Errorf("%s (file:// outputs are written as the filer's %s)", answer, ws.w)
	}
	return nil
}

// get takes an idle writer, or starts one.
func (ws *writers) get() (*writerProc, error) {
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, errors.New("the file writers are closed")
	}
	if n := len(ws.idle); n > 0 {
		p := ws.idle[n-1]
		ws.idle = ws.idle[:n-1]
		ws.mu.Unlock()
		return p, nil
	}
	ws.mu.Unlock()
	return ws.start()
}

// release keeps a writer for the next file.
func (ws *writers) release(p *writerProc) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		p.close()
		return
	}
	ws.idle = append(ws.idle, p)
}

// close ends the idle writers (each exits when its socket closes) and
// waits for them.
func (ws *writers) close() {
	ws.mu.Lock()
	idle := ws.idle
	ws.idle, ws.closed = nil, true
	ws.mu.Unlock()
	for _, p := range idle {
		p.close()
	}
}

// start runs a writer process as the writer's user and groups, without
// the filer's environment (no credentials), in /.
func (ws *writers) start() (*writerProc, error) {
	prog := ws.w.Program
	if prog == "" {
		var err error
		if prog, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the filer's binary, to run the file writer: %v", err)
		}
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the file writer's socket: %v", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "file-writer"), os.NewFile(uintptr(fds[1]), "file-writer")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("the file writer's socket: %v", err)
	}
	p := &writerProc{conn: c.(*net.UnixConn), stderr: &tailWriter{max: 4 << 10}, exited: make(chan struct{})}
	cmd := exec.Command(prog, WriterCommand, ws.base)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.Stderr = p.stderr
	cmd.ExtraFiles = []*os.File{theirs} // writerFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ws.w.UID, Gid: ws.w.GID, Groups: append([]uint32{}, ws.w.Groups...)}}
	if err := cmd.Start(); err != nil {
		p.conn.Close()
		return nil, fmt.Errorf("start the file writer as %s: %v", ws.w, err)
	}
	p.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// ask sends a request and reads its answer: "" for done, else the
// writer's error. It kills the writer if ctx ends first.
func (p *writerProc) ask(ctx context.Context, req []byte, src *os.File) (string, error) {
	if src == nil {
		if _, _, err := p.conn.WriteMsgUnix(req, nil, nil); err != nil {
			return "", err
		}
	} else {
		rc, err := src.SyscallConn()
		if err != nil {
			return "", err
		}
		var werr error
		if err := rc.Control(func(fd uintptr) {
			_, _, werr = p.conn.WriteMsgUnix(req, syscall.UnixRights(int(fd)), nil)
		}); err != nil {
			return "", err
		}
		if werr != nil {
			return "", werr
		}
	}
	stop := context.AfterFunc(ctx, p.kill)
	defer stop()
	buf := make([]byte, maxMessage)
	n, err := p.conn.Read(buf)
	switch {
	case err != nil:
		return "", fmt.Errorf("no answer: %v", err)
	case n == 0:
		return "", errors.New("no answer: it exited")
	case buf[0] == answerOK:
		return "", nil
	case buf[0] == answerErr && n > 1:
		return string(buf[1:n]), nil
	}
	return "", fmt.Errorf("an answer the filer does not know (%q)", buf[:n])
}

func (p *writerProc) kill() {
	_ = p.cmd.Process.Kill()
}

// close ends a writer that is done: it exits once its socket closes.
func (p *writerProc) close() {
	p.conn.Close()
	<-p.exited
}

// stop ends a writer that failed or whose run stops.
func (p *writerProc) stop() {
	p.kill()
	p.close()
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// text is what the writer wrote to its standard error, on one line after
// ": ", or "" if nothing.
func (t *tailWriter) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := oneLine(string(t.b)); s != "" {
		return ": " + s
	}
	return ""
}
