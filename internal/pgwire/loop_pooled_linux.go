//go:build linux

package pgwire

// Transaction pool mode in the io_uring event loop. A pooled session
// (pooled.go) is relayed by a ring loop as a session-mode one is, with
// what the goroutine relay's two readers agree on through stateMu done in
// order on the loop's goroutine:
//
//   - a client message that needs the server, when none is lent, is read
//     again once one is: the pool answers at once (an idle connection) or
//     calls back (pool.AcquireAsync); meanwhile the client's messages are
//     only buffered (watchClient), and a client that leaves is dropped
//     from the queue with nothing it sent run; dialling a connection, or a
//     setup that must talk to the server (pooled_setup.go), runs on a
//     goroutine of its own while the session waits;
//   - a lent connection brings its reader, writer and receive buffer
//     (loopIO), and its socket is out of Go's poller (fdConn);
//   - after the ReadyForQuery that leaves the session idle, the connection
//     goes back to the pool before the client's output is flushed, once
//     the ring has no operation on its socket (receives are queued only
//     when a read finds nothing, so after the last message there is none)
//     and no cancel is being forwarded to its backend;
//   - the server connection's socket is the pool's own, never closed by
//     the loop: a connection the session ends with is closed by
//     releasing it as not reusable, after its operations are cancelled.
//
// A pooled session leaves the loop for the goroutine relay as a
// session-mode one does (a large message, a long text, a slow step), and
// when it is lent a connection over TLS, with its lending, if any, handed
// to relayLendings.

import (
	"bufio"
	"errors"
	"net"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// loopLending is a pooled session's lending state in the loop; only the
// loop's goroutine touches it.
type loopLending struct {
	lent      *pool.Conn // lent now (or, releasing, going back)
	releasing bool       // lent goes back once nothing of the ring's or a cancel's is on it
	cancelled bool       // releasing: the receive in flight on it was cancelled
	waiting   bool       // a connection is being acquired: the client is not read
	keep      bool       // the message waiting replaces the unnamed statement
	ticket    *pool.Ticket
	// The session's upstream reader and writer between lendings: they
	// hold nothing (a lending brings the connection's, loopIO).
	idleR    *reader
	idleW    *bufio.Writer
	granted  func(pool.Grant) // for AcquireAsync: keeps the grant and posts onGrant
	grant    pool.Grant       // what the pool gave a queued acquire
	onGrant  func()
	outside  bool // a goroutine dials or sets up a connection for the session
	endLater bool // the session ended while outside: let it go when that is done
}

func (pl *loopLending) paused() bool { return pl.waiting || pl.releasing }

// relayPooledInLoop hands a pooled session, past login, to an io_uring
// event loop when its client is plain TCP, and waits until the loop lets
// go of it (a session lent a connection over TLS leaves the loop with
// it). over reports the session is over; otherwise the goroutine relay
// goes on, with handed, when set, the lending in progress.
func (s *session) relayPooledInLoop() (over bool, handed *lending) {
	lp := s.newPooledLooped()
	if lp == nil {
		s.srv.metrics.relays.WithLabelValues(relayGoroutines).Inc()
		return false, nil
	}
	s.srv.metrics.relays.WithLabelValues(relayLoop).Inc()
	// The upstream reader and writer were the login connection's; between
	// lendings they are placeholders that hold nothing (attach).
	s.ur, s.uw = lp.pl.idleR, lp.pl.idleW
	if !s.runInLoop(lp) {
		return true, nil
	}
	return s.takeBackPooled(lp)
}

// pooledRing returns a ring loop to relay a pooled session, or nil when
// none does: relay goroutines or epoll, or no io_uring.
func pooledRing(cfg *Config) *eventLoop {
	if !cfg.eventLoop() || cfg.EpollLoop {
		return nil
	}
	if l, err := pickLoop(false); err == nil && l.ring != nil {
		return l
	}
	return nil
}

// newPooledLooped returns a pooled session's state for a ring loop, with a
// duplicate of its client socket, or nil when no ring loop can relay it.
func (s *session) newPooledLooped() *looped {
	l := pooledRing(s.cfg)
	if l == nil {
		return nil
	}
	cfd, err := dupFD(s.client)
	if err != nil {
		return nil
	}
	lp := s.loopedOn(l, cfd, -1)
	lp.pl = &loopLending{}
	lp.pl.idleR = &reader{src: lp.usrc}
	lp.pl.idleW = bufio.NewWriterSize(toUpstream(lp.usink), 16)
	// Made once: a wait costs no allocation of a closure. The pool calls
	// granted once per wait, and post orders the write of grant before
	// onGrant reads it.
	lp.pl.onGrant = lp.onGrant
	lp.pl.granted = func(g pool.Grant) {
		lp.pl.grant = g
		lp.post(lp.pl.onGrant)
	}
	return lp
}

// lendFor prepares the relay of a client message whose header was read
// (at mark) in a pooled session: relay reports it goes upstream now;
// otherwise next says whether the turn reads on (the message was dropped,
// or a connection was lent at once and the message is read again).
func (lp *looped) lendFor(typ byte, n, mark int) (relay, next bool) {
	s, pl := lp.s, lp.pl
	if typ == 'X' {
		// What the client sent before it left goes upstream, as in
		// session mode (clientGone): a COMMIT and then a Terminate, read
		// at once, must commit.
		s.terminated.Store(true)
		if s.uw.Flush() == nil {
			lp.deliver = true
		}
		lp.end()
		return false, false
	}
	if pl.lent != nil {
		s.pooled.cur = pl.lent
		return true, false
	}
	switch typ {
	case 'H', 'd', 'c', 'f':
		// No server connection is lent, and the message needs none: a
		// Flush with nothing to flush, copy messages outside COPY.
		s.cr.discard(n) // buffered whole
		return false, true
	}
	if s.adminStop.Load() {
		s.sendClient(s.stopError())
		lp.end()
		return false, false
	}
	pl.keep = typ == 'Q' || typ == 'P' && n > 0 && s.cr.peekByte() == 0
	s.cr.rewind(mark)
	lp.acquire()
	if pl.waiting && !lp.gone {
		lp.watchClient() // queues a receive: the client's leaving wakes the session
	}
	return false, pl.lent != nil && !lp.gone
}

// acquire asks the pool for a connection; the session waits (pl.waiting)
// until it has one, or ends.
func (lp *looped) acquire() {
	s, pl := lp.s, lp.pl
	pl.waiting = true
	g, t := s.srv.pool.AcquireAsync(s.pooled.key, pl.granted)
	if t != nil {
		pl.ticket = t
		return
	}
	lp.take(g)
}

// watchClient reads on, into the client reader's buffer, what a client
// waiting for a connection sends, so that its leaving (its end, or a
// Terminate) is seen: the session then ends, and nothing it sent runs (as
// PgBouncer drops a client that leaves while queued).
func (lp *looped) watchClient() {
	r := lp.s.cr
	var err error
	for r.w-r.r < len(r.buf) && err == nil {
		err = r.ensure(r.w - r.r + 1)
	}
	if err != errAgain && err != nil || r.buffersTerminate(0) {
		lp.s.log.Debug("client left while waiting for a server connection", "err", err)
		lp.end()
	}
}

// onGrant takes the pool's answer to a queued acquire.
func (lp *looped) onGrant() {
	s, g := lp.s, lp.pl.grant
	lp.pl.grant, lp.pl.ticket = pool.Grant{}, nil
	s.srv.pool.ReportWait(s.pooled.key, g)
	if lp.gone {
		s.srv.pool.Forgo(s.pooled.key, g)
		return
	}
	lp.take(g)
	lp.serve()
}

// take uses what the pool gave: a connection ready for the client is lent
// at once; dialling one, or setting one up, is done outside the loop.
func (lp *looped) take(g pool.Grant) {
	s, pl := lp.s, lp.pl
	switch {
	case g.Err != nil:
		s.sendClient(s.acquireFailed(g.Err))
		lp.end()
	case g.Dial:
		keep := pl.keep
		lp.runOutside(func() (*pool.Conn, error) {
			c, err := s.srv.pool.DialSlot(s.pooled.ctx, s.pooled.key)
			if err != nil {
				return nil, err
			}
			return c, s.runSetup(c, s.planSetup(c, keep), false)
		})
	default:
		plan := s.planSetup(g.Conn, pl.keep)
		if len(plan.msgs) == 0 {
			lp.attach(g.Conn)
			return
		}
		lp.runOutside(func() (*pool.Conn, error) { return g.Conn, s.runSetup(g.Conn, plan, false) })
	}
}

// runOutside runs get (a dial, a setup that talks to the server) on a
// goroutine of its own while the session waits; outsideDone takes the
// connection it gives, or its error (the connection then released).
func (lp *looped) runOutside(get func() (*pool.Conn, error)) {
	lp.pl.outside = true
	go func() {
		c, err := get()
		if err != nil {
			c = nil
		}
		lp.post(func() { lp.outsideDone(c, err) })
	}()
}

// outsideDone takes the connection a goroutine dialled or set up for the
// session (c nil when it failed with err).
func (lp *looped) outsideDone(c *pool.Conn, err error) {
	s, pl := lp.s, lp.pl
	pl.outside = false
	if lp.gone {
		if c != nil {
			s.srv.pool.ReleaseAsync(c, borrowed(c).r.idle())
		}
		if pl.endLater {
			lp.release()
		}
		return
	}
	if err != nil {
		var f *pooledFailure
		if errors.As(err, &f) {
			s.tell(err)
		} else {
			s.sendClient(s.acquireFailed(err))
		}
		lp.end()
		return
	}
	lp.attach(c)
	lp.serve()
}

// attach lends c to the session: the ring reads and writes its socket.
// A connection over TLS (upstream_tls prefer or stricter) the ring cannot
// relay: the session leaves the loop with it, for the goroutine relay.
func (lp *looped) attach(c *pool.Conn) {
	s, pl := lp.s, lp.pl
	lc := borrowed(c)
	if lc.fd < 0 {
		fd, err := rawFD(c.NetConn)
		if err != nil {
			lc.fd = -2 // not to be asked again
		} else {
			lc.fd = fd
		}
	}
	pl.lent, pl.waiting = c, false
	s.stateMu.Lock()
	s.pooled.lent, s.pooled.cur, s.pooled.broken = c, c, false
	s.stateMu.Unlock()
	s.info.setBackendPID(c.PID)
	if lc.lio == nil {
		lc.lio = &loopIO{r: newReader(nil), w: bufio.NewWriterSize(nil, ioBufferSize), rx: make([]byte, ringRecvSize)}
	}
	lio := lc.lio
	lio.r.src = lp.usrc
	lio.w.Reset(toUpstream(lp.usink))
	lp.usrc.rx.buf = lio.rx
	s.ur, s.uw = lio.r, lio.w
	if lc.fd < 0 {
		lp.handOver(leaveUpstreamTLS, 0, 0) // the goroutine relay reads and writes it through lio
		return
	}
	lp.ufd, lp.usrc.fd, lp.usink.fd = lc.fd, lc.fd, lc.fd
	lp.usrc.rx.fd, lp.usink.tx.fd = lc.fd, lc.fd
}

// releaseIfIdle, after a ReadyForQuery, gives the lent connection back when
// the session is idle (as returnable says), and reports whether it did
// (or will, once the ring's operations on it are done): the upstream is
// then not read.
func (lp *looped) releaseIfIdle() bool {
	s := lp.s
	if !s.gateSettled() {
		return false
	}
	if lp.upstreamDown {
		return false // a write to it failed: its end, read next, ends the session
	}
	s.stateMu.Lock()
	if s.txStatus != 'I' || s.inflight != 0 || s.extOpen.Load() || s.pooled.broken || s.isClosed() {
		s.stateMu.Unlock()
		return false
	}
	s.pooled.lent = nil // no cancel reaches it from now on
	s.stateMu.Unlock()
	if s.uw.Buffered() > 0 {
		// A message that gets no reply (Flush, copy data outside COPY)
		// is the client's to the end: not the next borrower's.
		s.uw.Flush()
	}
	lp.pl.releasing = true
	lp.finishRelease()
	return true
}

// finishRelease hands the connection being released back to the pool once
// the ring has no operation on its socket and no cancel is being
// forwarded to its backend (one that arrived after it went back would
// cancel the next client's statement); until then the session waits.
func (lp *looped) finishRelease() {
	s, pl := lp.s, lp.pl
	rx, tx := lp.usrc.rx, lp.usink.tx
	if rx.inflight && !pl.cancelled {
		pl.cancelled = true
		lp.loop.ring.cancel(lp.user(opUpstreamRecv))
	}
	s.stateMu.Lock()
	cancelling := s.pooled.cancelling > 0
	s.stateMu.Unlock()
	if rx.inflight || tx.inflight || cancelling {
		return // served again at their completion (cancelDone for a cancel)
	}
	c := pl.lent
	reusable := s.ur.drained() && rx.err == nil && tx.err == nil && !tx.held()
	pl.lent, pl.releasing, pl.cancelled = nil, false, false
	lp.detach()
	s.info.setBackendPID(0)
	s.srv.pool.ReleaseAsync(c, reusable) // a connection to close is closed off the loop
}

// detach forgets the lent connection's socket.
func (lp *looped) detach() {
	rx, tx := lp.usrc.rx, lp.usink.tx
	lp.ufd, lp.usrc.fd, lp.usink.fd = -1, -1, -1
	rx.fd, rx.r, rx.w, rx.err, rx.buf = -1, 0, 0, nil, nil
	tx.fd, tx.err, tx.flight, tx.more = -1, nil, tx.flight[:0], tx.more[:0]
	lp.s.ur.reset()
	lp.s.ur, lp.s.uw = lp.pl.idleR, lp.pl.idleW
}

// cancelDone wakes a session whose release waited for a cancel being
// forwarded.
func (lp *looped) cancelDone() {
	if !lp.gone && lp.pl.releasing {
		lp.serve()
	}
}

// closePooled is closeSockets for a pooled session: the connection lent
// (or going back) is closed, after what the client sent before it left is
// written to it (deliver), and a wait in the pool's queue is given up.
func (lp *looped) closePooled() {
	s, pl := lp.s, lp.pl
	if c := pl.lent; c != nil {
		var pending []byte
		if lp.deliver {
			pending = lp.usink.pending
		}
		pl.lent = nil
		s.stateMu.Lock()
		s.pooled.lent = nil
		s.stateMu.Unlock()
		s.info.setBackendPID(0)
		go func() {
			if len(pending) > 0 {
				c.NetConn.SetWriteDeadline(time.Now().Add(time.Second))
				c.NetConn.Write(pending)
			}
			s.srv.pool.Release(c, false)
		}()
	}
	if pl.ticket != nil {
		// False: the grant is on its way, and onGrant gives it back.
		s.srv.pool.CancelWait(pl.ticket)
		pl.ticket = nil
	}
	closeWriting(lp.cfd, lp.csink.pending)
	if pl.outside {
		pl.endLater = true // outsideDone lets the session go
		return
	}
	lp.release()
}

// takeBackPooled turns the loop's client socket back into a net.Conn for
// the goroutine relay, and the lending in progress, if any, into one for
// relayLendings (handed); over reports the session is over.
func (s *session) takeBackPooled(lp *looped) (over bool, handed *lending) {
	client, err := fileConn(lp.cfd)
	if err != nil {
		s.log.Warn("event loop: cannot hand the session back", "err", err)
		if c := lp.pl.lent; c != nil {
			s.srv.pool.Release(c, false)
		}
		return true, nil
	}
	lp.csrc.conn, lp.csink.conn = client, client
	s.cPending, s.uPending = lp.csink, nil
	s.stateMu.Lock()
	s.client = client
	if c := lp.pl.lent; c != nil {
		lp.usrc.conn, lp.usink.conn = c.NetConn, c.NetConn
		s.uPending = lp.usink
		handed = &lending{c: c, done: make(chan struct{})}
		s.pooled.lent, s.pooled.cur, s.pooled.done = c, c, handed.done
		s.upstream = c.NetConn
		// The client reader writes what the loop could not send yet (and
		// what s.uw holds) before anything else (pumpPooled): until then
		// it is writing, and the upstream reader does not hand the
		// connection back, whatever it reads meanwhile.
		s.pooled.writing = true
	}
	s.stateMu.Unlock()
	if s.isClosed() {
		client.Close()
		if handed != nil {
			s.stateMu.Lock()
			s.pooled.lent, s.upstream = nil, nil
			s.stateMu.Unlock()
			s.srv.pool.Release(handed.c, false)
			close(handed.done)
		}
		return true, nil
	}
	if s.adminStop.Load() {
		s.stopUpstream()
	}
	return false, handed
}

// rawFD returns a plain TCP connection's socket (an fdConn's, normally:
// loopDial's), which stays the connection's: valid until it is closed.
func rawFD(c net.Conn) (int, error) {
	if fc, ok := c.(*fdConn); ok {
		return fc.fd, nil
	}
	fd := -1
	err := withSocket(c, func(s uintptr) { fd = int(s) })
	return fd, err
}
