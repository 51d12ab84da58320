//go:build linux

package pgwire

// The event loop over io_uring (uring_linux.go): where the kernel has it,
// a loop owns one ring on one locked thread; each session keeps a receive
// queued on both its sockets and a send whenever it has output, and one
// io_uring_enter per turn submits what the turn queued and waits for what
// is next, however many sessions were ready. Against the epoll loop, which
// reads and writes with a system call each and parks on Go's poller, this
// brings the relay's CPU per transaction to about PgBouncer's
// (docs/performance.md).
//
// The sessions' own code (serve and what it calls) is the epoll loop's: it
// reads and writes through fdSource and fdSink, which keep here what the
// ring received and what it is sending. A session leaves the loop, or
// ends, only once none of its operations is in the kernel: its
// receives and sends are cancelled, and what a cancelled send did not send
// is written afterwards, as the epoll loop's pending output is.

import (
	"io"
	"runtime"
	"syscall"
)

// ringEntries is the submission ring's size; each session has at most
// four operations and their cancels queued.
const ringEntries = 4096

// ringRecvSize is the size of each socket's receive buffer.
const ringRecvSize = 16 << 10

// User data of the loop's own completions; a session's is its id times 4
// plus the operation (opClientRecv ...), ids counting from 1.
const (
	userCancel = 0 // cancellations: their completions say nothing
	userWake   = 1 << 63
)

const (
	opClientRecv = iota
	opUpstreamRecv
	opClientSend
	opUpstreamSend
)

// startRingLoop starts an event loop over io_uring and returns it once its
// ring is set up, or the reason there is none.
func startRingLoop() (*eventLoop, error) {
	wakefd, err := newEventFD()
	if err != nil {
		return nil, err
	}
	l := &eventLoop{epfd: -1, wakefd: wakefd, sessions: map[uint64]*looped{}}
	// Every buffer the kernel writes to is on the heap, which does not
	// move, never on a goroutine's stack, which does: the ring's calls
	// pass addresses as integers, which escape analysis does not follow.
	l.wakeBuf = make([]byte, 8)
	ready := make(chan error)
	go l.runRing(ready)
	if err := <-ready; err != nil {
		closeFD(wakefd)
		return nil, err
	}
	return l, nil
}

// runRing is the loop's goroutine, locked to its thread for the ring's life.
func (l *eventLoop) runRing(ready chan<- error) {
	runtime.LockOSThread()
	r, err := newRing(ringEntries)
	if err == nil {
		l.ring = r // before ready: the loop's users read it once started
	}
	ready <- err
	if err != nil {
		return
	}
	r.read(l.wakefd, l.wakeBuf, userWake)
	var turn []*looped
	for {
		wait := uint32(1)
		l.awake.Store(false)
		if len(l.again) > 0 || l.posted.Load() {
			wait = 0
			l.awake.Store(true)
		}
		r.enter(wait)
		if wait != 0 {
			l.awake.Store(true)
		}
		l.runTasks() // posted while it was awake, without a wake-up
		turn = append(turn[:0], l.again...)
		l.again = l.again[:0]
		r.reap(func(user uint64, res int32) {
			switch user {
			case userCancel:
				return
			case userWake:
				r.read(l.wakefd, l.wakeBuf, userWake)
				l.runTasks()
				return
			}
			lp := l.sessions[user>>2]
			if lp == nil {
				return
			}
			serve := lp.completed(int(user&3), res)
			if lp.gone {
				lp.finishIfIdle()
				return
			}
			if serve && !lp.queued {
				lp.queued = true
				turn = append(turn, lp)
			}
		})
		for _, lp := range turn {
			lp.queued = false
			lp.serve()
		}
		clear(turn)
	}
}

// ringRecv is what the ring received on one socket of a session: buf[r:w],
// a receive queued while inflight, the socket's end in err.
type ringRecv struct {
	lp       *looped
	op       int
	fd       int
	buf      []byte
	r, w     int
	inflight bool
	err      error // io.EOF or the receive's error
}

// take copies into p what was received and not yet taken. The next
// receive is queued only when a read finds nothing (fdSource.Read): a
// pooled session that hands its server connection back after the last
// message leaves no receive in the kernel on it.
func (x *ringRecv) take(p []byte) int {
	n := copy(p, x.buf[x.r:x.w])
	x.r += n
	return n
}

// arm queues a receive unless one is queued, the socket ended, the session
// is leaving the loop or (a pooled session between lendings) has no
// socket.
func (x *ringRecv) arm() {
	if x.inflight || x.err != nil || x.lp.gone || x.fd < 0 {
		return
	}
	x.r, x.w = 0, 0
	x.inflight = true
	x.lp.ops++
	x.lp.loop.ring.recv(x.fd, x.buf, x.lp.user(x.op))
}

func (x *ringRecv) completed(res int32) {
	x.inflight = false
	switch {
	case res > 0:
		x.r, x.w = 0, int(res)
	case res == 0:
		x.err = io.EOF
	case retry(res):
		// Nothing received; the next read queues another.
	default:
		x.err = syscall.Errno(-res)
	}
}

// retry reports whether an operation's result is a failure that did
// nothing: cancelled, or interrupted in the kernel's worker.
func retry(res int32) bool {
	switch syscall.Errno(-res) {
	case syscall.ECANCELED, syscall.EINTR, syscall.EAGAIN:
		return true
	}
	return false
}

// ringSend is what the ring is sending on one socket of a session (flight,
// while inflight) and what waits for it (more).
type ringSend struct {
	lp           *looped
	op           int
	fd           int
	flight, more []byte
	inflight     bool
	err          error
}

func (x *ringSend) write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	if x.inflight {
		x.more = append(x.more, p...)
	} else {
		x.flight = append(x.flight[:0], p...)
		x.start()
	}
	return len(p), nil
}

func (x *ringSend) start() {
	if x.lp.gone {
		return
	}
	x.inflight = true
	x.lp.ops++
	x.lp.loop.ring.send(x.fd, x.flight, x.lp.user(x.op))
}

func (x *ringSend) completed(res int32) {
	x.inflight = false
	switch {
	case int(res) == len(x.flight):
		x.flight = x.flight[:0] // all sent: the buffer is kept whole for the next send
	case res >= 0:
		x.flight = x.flight[res:]
	case retry(res):
		// Nothing sent: sent again unless the session is leaving the loop.
	default:
		x.err = syscall.Errno(-res)
		return
	}
	if len(x.flight) == 0 {
		x.flight, x.more = x.more, x.flight[:0]
		if cap(x.more) > ioBufferSize {
			x.more = nil // an idle session holds no burst's buffer
		}
	}
	if len(x.flight) > 0 {
		x.start()
	}
}

// held reports whether output waits for the send in flight: the socket
// is not taking it as fast as it comes.
func (x *ringSend) held() bool { return len(x.more) > 0 }

// unsent returns what was not sent, in order.
func (x *ringSend) unsent() []byte {
	if len(x.flight) == 0 {
		return x.more
	}
	return append(x.flight, x.more...)
}

func (lp *looped) user(op int) uint64 { return lp.id<<2 | uint64(op) }

// adoptRing registers the session with the ring loop and queues its
// receives.
func (lp *looped) adoptRing() {
	l := lp.loop
	l.nextID++
	lp.id = l.nextID
	l.sessions[lp.id] = lp
	lp.csrc.rx = &ringRecv{lp: lp, op: opClientRecv, fd: lp.cfd, buf: make([]byte, ringRecvSize)}
	lp.usrc.rx = &ringRecv{lp: lp, op: opUpstreamRecv, fd: lp.ufd}
	if lp.pl == nil {
		lp.usrc.rx.buf = make([]byte, ringRecvSize) // a pooled session's comes with each lending (attach)
	}
	lp.csink.tx = &ringSend{lp: lp, op: opClientSend, fd: lp.cfd}
	lp.usink.tx = &ringSend{lp: lp, op: opUpstreamSend, fd: lp.ufd}
	lp.csrc.rx.arm()
	lp.usrc.rx.arm()
}

// completed records the completion of the session's operation op, and
// reports whether the session has something to serve since: anything
// received; after a send, output that was held back (a turn stopped for
// it: fdSink.held), the socket's error, or in transaction pool mode a
// connection's release, which waits for its sends. Most sends complete
// with nothing behind them, and serving the session then would find
// nothing to do.
func (lp *looped) completed(op int, res int32) (serve bool) {
	lp.ops--
	var tx *ringSend
	switch op {
	case opClientRecv:
		lp.csrc.rx.completed(res)
		return true
	case opUpstreamRecv:
		lp.usrc.rx.completed(res)
		return true
	case opClientSend:
		tx = lp.csink.tx
	case opUpstreamSend:
		tx = lp.usink.tx
	}
	held := tx.held()
	tx.completed(res)
	return held || tx.err != nil || lp.pl != nil
}

// cancelRing cancels the session's operations in the kernel; finish runs
// once none is left.
func (lp *looped) cancelRing(finish func()) {
	if lp.id == 0 {
		finish() // ended before it was adopted: nothing in the kernel
		return
	}
	lp.finish = finish
	r := lp.loop.ring
	for op, busy := range []bool{lp.csrc.rx.inflight, lp.usrc.rx.inflight, lp.csink.tx.inflight, lp.usink.tx.inflight} {
		if busy {
			r.cancel(lp.user(op))
		}
	}
	lp.finishIfIdle()
}

// finishIfIdle runs the session's finish once its operations are done:
// what the sends did not send becomes the sinks' pending output.
func (lp *looped) finishIfIdle() {
	if lp.ops > 0 || lp.finish == nil {
		return
	}
	delete(lp.loop.sessions, lp.id)
	for _, sink := range []*fdSink{lp.csink, lp.usink} {
		// Even after a failed send: the next write to the socket fails
		// too, rather than going on past a gap.
		sink.pending = sink.tx.unsent()
		sink.tx = nil
	}
	finish := lp.finish
	lp.finish = nil
	finish()
}
