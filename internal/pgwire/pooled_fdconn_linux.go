//go:build linux

package pgwire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// A server connection of the pool that io_uring loops relay is kept out of
// Go's network poller: registered there, every reply the ring receives on
// it would also wake a thread of the runtime's, idle in epoll_wait, for
// nothing (about a tenth of the proxy's CPU in transaction pool mode).
// fdConn is such a connection: its socket in blocking mode, read and
// written with plain system calls (the few exchanges outside the loop:
// setup, the pool's goodbye, the goroutine relay), deadlines as socket
// timeouts.

// loopDial wraps dial so that the plain TCP connections it opens are
// fdConns, when io_uring loops relay pooled sessions.
func loopDial(cfg *Config, dial pool.DialFunc) pool.DialFunc {
	if !cfg.eventLoop() || cfg.EpollLoop {
		return dial // no loop relays pooled sessions: spare pooledRing's loops
	}
	return func(ctx context.Context, k pool.Key) (*pool.Conn, error) {
		c, err := dial(ctx, k)
		if err != nil {
			return nil, err
		}
		if pooledRing(cfg) == nil {
			return c, nil
		}
		fc, err := newFDConn(c.NetConn)
		if err != nil {
			return c, nil // over TLS: relayed by the goroutine relay
		}
		c.NetConn = fc
		return c, nil
	}
}

// fdConn is a net.Conn over a blocking socket of its own.
type fdConn struct {
	fd            int
	local, remote net.Addr

	mu      sync.Mutex
	users   int  // reads and writes in progress
	closed  bool // Close was called: the socket is shut down
	release bool // the descriptor is closed when the last user leaves
}

// newFDConn takes over a TCP connection's socket: a duplicate, in
// blocking mode, the original closed (out of Go's poller).
func newFDConn(c net.Conn) (*fdConn, error) {
	fd, err := dupFD(c)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		closeFD(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	fc := &fdConn{fd: fd, local: c.LocalAddr(), remote: c.RemoteAddr()}
	c.Close()
	return fc, nil
}

func (c *fdConn) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.users++
	return true
}

func (c *fdConn) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.release && c.users == 0 {
		c.release = false
		syscall.Close(c.fd)
	}
}

func (c *fdConn) Read(p []byte) (int, error) {
	if !c.enter() {
		return 0, net.ErrClosed
	}
	defer c.leave()
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, os.ErrDeadlineExceeded // SO_RCVTIMEO passed
		case err != nil:
			return 0, c.opError("read", err)
		case n == 0 && len(p) > 0 && c.isClosed():
			return 0, net.ErrClosed // ended by Close (its shutdown), as a net.Conn's read is
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *fdConn) Write(p []byte) (int, error) {
	if !c.enter() {
		return 0, net.ErrClosed
	}
	defer c.leave()
	done := 0
	for done < len(p) {
		n, err := syscall.SendmsgN(c.fd, p[done:], nil, nil, syscall.MSG_NOSIGNAL)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return done, os.ErrDeadlineExceeded // SO_SNDTIMEO passed
		case err != nil:
			return done, c.opError("write", err)
		}
		done += n
	}
	return done, nil
}

func (c *fdConn) opError(op string, err error) error {
	if c.isClosed() {
		return net.ErrClosed
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError(op, err)}
}

func (c *fdConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close shuts the socket down, which ends a read or write blocked on it,
// and closes the descriptor once none is in progress (a number closed
// under a read could be reused by another socket before that read).
func (c *fdConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	if c.users > 0 {
		c.release = true
		return nil
	}
	return syscall.Close(c.fd)
}

func (c *fdConn) LocalAddr() net.Addr  { return c.local }
func (c *fdConn) RemoteAddr() net.Addr { return c.remote }

func (c *fdConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *fdConn) SetReadDeadline(t time.Time) error {
	return c.setTimeout(syscall.SO_RCVTIMEO, t)
}

func (c *fdConn) SetWriteDeadline(t time.Time) error {
	return c.setTimeout(syscall.SO_SNDTIMEO, t)
}

// setTimeout sets a socket timeout for a deadline: none for the zero time,
// the shortest for one already past. (A timeout counts from each call, not
// to a point in time: a deadline is one here only for a single call, as
// the setup's and the goodbye's are.)
func (c *fdConn) setTimeout(opt int, t time.Time) error {
	if !c.enter() {
		return net.ErrClosed
	}
	defer c.leave()
	var d time.Duration
	if !t.IsZero() {
		d = max(time.Until(t), time.Microsecond)
	}
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	return os.NewSyscallError("setsockopt", syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, opt, &tv))
}
