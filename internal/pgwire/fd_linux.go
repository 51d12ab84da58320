//go:build linux

package pgwire

// The event loop's sockets (loop_linux.go): non-blocking reads and writes
// with raw system calls, and the descriptors the loop owns.

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// fdSource reads a loop's socket: only when epoll reported it readable
// since a read last found it drained, else errAgain. After takeBack it
// reads the net.Conn.
type fdSource struct {
	fd    int
	ready bool
	hup   bool // the peer has shut down or the socket failed: read on to the end
	conn  net.Conn
	rx    *ringRecv // over io_uring: what the ring received (nil: epoll)
}

// event records what epoll reported of the socket.
func (f *fdSource) event(events uint32) {
	if events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		f.hup = true
	}
	f.ready = f.ready || f.hup || events&syscall.EPOLLIN != 0
}

var errAgain = errors.New("no input ready")

// buffered returns how much the ring received that was not read yet.
func (f *fdSource) buffered() int {
	if f.rx == nil {
		return 0
	}
	return f.rx.w - f.rx.r
}

func (f *fdSource) Read(p []byte) (int, error) {
	if f.rx != nil && len(p) > 0 {
		if f.rx.r < f.rx.w {
			return f.rx.take(p), nil
		}
		if f.conn == nil {
			if f.rx.err != nil {
				return 0, f.rx.err
			}
			f.rx.arm()
			return 0, errAgain
		}
	}
	if f.conn != nil {
		return f.conn.Read(p)
	}
	if !f.ready || len(p) == 0 {
		return 0, errAgain
	}
	for {
		n, err := rawIO(syscall.SYS_READ, f.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			f.ready = false
			return 0, errAgain
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		if n < len(p) && !f.hup {
			// Edge-triggered: data or a shutdown arriving after this read
			// raises a new event, so a short read means drained. One that
			// came before it was reported with the event (hup).
			f.ready = false
		}
		return n, nil
	}
}

// fdSink writes a loop's socket without blocking: what the socket cannot
// take is kept in pending and written when epoll reports it writable. After
// takeBack it writes the net.Conn, pending first.
type fdSink struct {
	fd       int
	pending  []byte
	writable bool
	conn     net.Conn
	tx       *ringSend // over io_uring: what the ring sends (nil: epoll)
}

func (f *fdSink) Write(p []byte) (int, error) {
	if f.conn != nil {
		if err := f.flushPending(); err != nil {
			return 0, err
		}
		return f.conn.Write(p)
	}
	if f.tx != nil {
		return f.tx.write(p)
	}
	if len(f.pending) > 0 {
		f.pending = append(f.pending, p...)
		return len(p), nil
	}
	rest, err := f.writeSome(p)
	if err != nil {
		return 0, err
	}
	f.pending = append(f.pending, rest...)
	return len(p), nil
}

// writeSome writes p until the socket would block, returning what is left.
func (f *fdSink) writeSome(p []byte) ([]byte, error) {
	for len(p) > 0 {
		n, err := rawIO(syscall.SYS_WRITE, f.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			f.writable = false
			return p, nil
		case err != nil:
			return p, err
		}
		p = p[n:]
	}
	return nil, nil
}

// held reports whether the socket holds output back: the loop reads no
// more of the other end until it takes it.
func (f *fdSink) held() bool {
	if f.tx != nil {
		return f.tx.held()
	}
	return len(f.pending) > 0
}

// drop forgets the output not yet written (the connection is broken).
func (f *fdSink) drop() {
	f.pending = nil
	if f.tx != nil {
		f.tx.more = nil
	}
}

func (f *fdSink) flushPending() error {
	if f.tx != nil {
		return f.tx.err // the ring sends by itself
	}
	if len(f.pending) == 0 {
		return nil
	}
	if f.conn != nil {
		_, err := f.conn.Write(f.pending)
		f.pending = nil
		return err
	}
	if !f.writable {
		return nil
	}
	rest, err := f.writeSome(f.pending)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		f.pending = nil // an idle session holds no burst's buffer
		return nil
	}
	f.pending = append(f.pending[:0], rest...)
	return nil
}

// rawIO is read(2) or write(2) on a non-blocking socket, without the Go
// scheduler's system-call bookkeeping (it never blocks).
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// epollPoll is epoll_wait(2) with a zero timeout: it never blocks.
func epollPoll(epfd int, events []syscall.EpollEvent) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// dupFD returns a close-on-exec duplicate of a plain TCP connection's
// socket, in non-blocking mode (it shares the original's file status).
func dupFD(c net.Conn) (int, error) {
	fd := -1
	var derr error
	err := withSocket(c, func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = os.NewSyscallError("fcntl", e)
			return
		}
		fd = int(r)
	})
	return fd, errors.Join(err, derr)
}

// quiet reports whether a kept server connection has nothing to say: no
// byte to read, no end. An idle backend that sends something unasked has
// ended (a FATAL error before it closes: pg_terminate_backend,
// idle_session_timeout, a server shutdown) or is not what it was kept as.
func quiet(c net.Conn) bool {
	var one [1]byte
	n, again := 0, false
	err := withSocket(c, func(fd uintptr) {
		var err error
		n, _, err = syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		again = err == syscall.EAGAIN
	})
	return err == nil && n <= 0 && again
}

// withSocket calls f with a plain TCP connection's socket.
func withSocket(c net.Conn, f func(fd uintptr)) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return errors.New("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(f)
}

func closeFD(fd int) {
	if fd >= 0 {
		syscall.Close(fd)
	}
}

// fileConn makes a net.Conn of a loop's socket and closes fd.
func fileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileConn(f)
}

// finishWrite writes a session's last bytes to a socket, blocking for up
// to a second, and closes it.
func finishWrite(fd int, p []byte) {
	defer closeFD(fd)
	if syscall.SetNonblock(fd, false) != nil {
		return
	}
	deadline := time.Now().Add(time.Second)
	for len(p) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return // a client that reads a trickle does not keep the socket
		}
		tv := syscall.NsecToTimeval(left.Nanoseconds())
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
		n, err := syscall.Write(fd, p)
		if err != nil || n <= 0 {
			return
		}
		p = p[n:]
	}
}
