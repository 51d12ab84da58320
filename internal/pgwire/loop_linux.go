//go:build linux

package pgwire

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The event loop relays plain-TCP sessions past authentication the way
// PgBouncer does: a few goroutines (one per GOMAXPROCS), each waiting in
// epoll_wait for any of its sessions' sockets and reading only what epoll
// reported ready, with system calls that do not go through the Go
// scheduler. Two goroutines per session, each blocking in its own read,
// cost about 1.2 to 1.45 times as much CPU per transaction
// (docs/performance.md).
//
// The loop runs the same per-message code as the goroutine relay
// (clientStep, upstreamStep) on messages buffered whole. A session leaves
// the loop for good, and the goroutine relay takes it over with what is
// buffered, when a message is larger than the read buffer (a big row, a
// COPY: streaming it needs a goroutine that can block) or would hold the
// loop long (loopMaxText, loopSlowStep). A client message
// that must wait for gate to settle (Decision.Wait) is read again, from its
// start, once the upstream replies have settled it.

// epollET is EPOLLET as the uint32 of EpollEvent.Events (package syscall
// declares it as a negative int).
const epollET = 1 << 31

// maxLoopMessages bounds the messages one direction of a session relays in
// one turn, so that a busy session cannot starve the others of its loop.
const maxLoopMessages = 64

// A loop serves many sessions, so none may hold it long: a session whose
// client sends a Query or Parse text over loopMaxText bytes (analysing one
// can take milliseconds), or whose message took over loopSlowStep to
// parse, leaves the loop for the goroutine relay, where a slow message
// delays its own session alone. The parse is the one step of the relay
// that can take long (gate.Session.ParseTime); it is timed only when the
// gate parses, which a repeated statement does not: reading the clock
// around every message cost 3-4% of the proxy's CPU on a virtual machine.
// loopSlowStep is the parse's wall-clock time: the loop's thread may be
// descheduled mid-parse on a busy machine.
const loopMaxText = 4 << 10

var loopSlowStep = 20 * time.Millisecond // a variable for tests

// eventLoop is one epoll instance and the goroutine that serves it.
type eventLoop struct {
	epfd   int
	wakefd int             // eventfd: post wakes the loop with it
	poller syscall.RawConn // epfd, watched by Go's poller

	mu    sync.Mutex
	tasks []func() // posted by other goroutines, run by the loop
	spare []func() // the loop goroutine's: the next tasks slice
	// posted: tasks may hold something (set by post after it appends).
	// awake: the loop is not waiting in the kernel, and runs what is
	// posted before it waits again: post need not wake it (io_uring
	// loops; an epoll loop is always woken). The loop clears awake, then
	// loads posted; post sets posted, then loads awake: one of the two
	// sees the other's store, so no task waits for a wake-up never sent.
	posted atomic.Bool
	awake  atomic.Bool

	ends  map[int32]*loopEnd // the loop goroutine's own
	again []*looped          // sessions to serve again without an event

	// Over io_uring (loop_uring_linux.go); ring is nil for epoll.
	ring     *ring
	sessions map[uint64]*looped // by id
	nextID   uint64
	wakeBuf  []byte // the eventfd's count, read by the ring
}

type loopEnd struct {
	lp     *looped
	client bool
}

// looped is a session while an event loop relays it. Only the loop
// goroutine touches it, except post.
type looped struct {
	loop         *eventLoop
	s            *session
	cfd, ufd     int
	csrc, usrc   *fdSource
	csink, usink *fdSink
	crelay       byteCount // client to upstream
	urelay       byteCount // upstream to client
	clientWait   bool      // a client message waits for gate to settle
	upstreamDown bool      // a write upstream failed: the client is no longer read
	queued       bool      // in loop.again, or being served this turn
	gone         bool      // ended or handed back
	handBack     bool      // handed back to the goroutine relay
	deliver      bool      // at the end, write what the upstream could not take yet
	done         chan struct{}

	// Over io_uring: the session's id, its operations in the kernel, and
	// what to do once there are none (cancelRing).
	id     uint64
	ops    int
	finish func()

	// Transaction pool mode (loop_pooled_linux.go); nil in session mode.
	pl *loopLending
}

// loopSet is the process's event loops of one kind, started on first use.
type loopSet struct {
	once sync.Once
	all  []*eventLoop
	err  error
	next atomic.Uint32
}

var epollLoops, ringLoops loopSet

// pickLoop returns one of the process's event loops: over io_uring unless
// epoll is set or the kernel has no io_uring to offer (then over epoll),
// starting them on first use.
func pickLoop(epoll bool) (*eventLoop, error) {
	if !epoll {
		l, err := ringLoops.pick(startRingLoops)
		if err == nil {
			return l, nil
		}
		ringUnavailable.Do(func() {
			slog.Info("event loop: io_uring unavailable, relaying over epoll", "err", err)
		})
	}
	return epollLoops.pick(startEpollLoops)
}

// ringUnavailable logs, once, why the loops are not over io_uring.
var ringUnavailable sync.Once

func (set *loopSet) pick(start func() ([]*eventLoop, error)) (*eventLoop, error) {
	set.once.Do(func() { set.all, set.err = start() })
	if set.err != nil {
		return nil, set.err
	}
	return set.all[int(set.next.Add(1))%len(set.all)], nil
}

// startEpollLoops starts one epoll loop per CPU the Go runtime uses.
func startEpollLoops() ([]*eventLoop, error) {
	var all []*eventLoop
	for range runtime.GOMAXPROCS(0) {
		l, err := newEventLoop()
		if err != nil {
			return nil, err
		}
		all = append(all, l)
		go l.run()
	}
	return all, nil
}

// startRingLoops starts one io_uring loop per two CPUs the Go runtime uses
// (at least one), and gives the runtime as many more: each loop's thread
// keeps its processor while it waits in the kernel, so the others stay
// free for the rest of the proxy (logins, the goroutine relay, the admin
// server).
func startRingLoops() ([]*eventLoop, error) {
	procs := runtime.GOMAXPROCS(0)
	var all []*eventLoop
	for range max(1, procs/2) {
		l, err := startRingLoop()
		if err != nil {
			if len(all) == 0 {
				return nil, err
			}
			break
		}
		all = append(all, l)
	}
	runtime.GOMAXPROCS(procs + len(all))
	return all, nil
}

func newEventLoop() (*eventLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wakefd, err := newEventFD()
	if err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	l := &eventLoop{epfd: epfd, wakefd: wakefd, ends: map[int32]*loopEnd{}}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.wakefd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wakefd, &ev); err != nil {
		closeFD(epfd)
		closeFD(l.wakefd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		closeFD(epfd)
		closeFD(l.wakefd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	// The file stays open, with the loop's goroutine, for the life of the
	// process; closing it closes epfd.
	f := os.NewFile(uintptr(epfd), "epoll")
	if l.poller, err = f.SyscallConn(); err != nil {
		f.Close()
		closeFD(l.wakefd)
		return nil, err
	}
	return l, nil
}

// newEventFD returns a non-blocking eventfd, for waking a loop.
func newEventFD() (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return -1, os.NewSyscallError("eventfd2", e)
	}
	return int(r), nil
}

// post runs f on the loop goroutine.
func (l *eventLoop) post(f func()) {
	l.mu.Lock()
	l.tasks = append(l.tasks, f)
	l.mu.Unlock()
	l.posted.Store(true)
	if l.awake.Load() {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	syscall.Write(l.wakefd, one[:])
}

func (lp *looped) post(f func()) { lp.loop.post(f) }

func (l *eventLoop) run() {
	events := make([]syscall.EpollEvent, 256)
	var turn []*looped
	for {
		// Poll without blocking; when nothing is ready, park the goroutine
		// on Go's own poller, which watches the epoll descriptor: no thread
		// blocks in epoll_wait.
		var n int
		err := l.poller.Read(func(uintptr) bool {
			n, _ = epollPoll(l.epfd, events)
			return n > 0 || len(l.again) > 0
		})
		if err != nil {
			panic("pgwire: event loop: " + err.Error()) // the descriptor is never closed
		}
		turn = append(turn[:0], l.again...)
		l.again = l.again[:0]
		for _, ev := range events[:n] {
			if int(ev.Fd) == l.wakefd {
				var buf [8]byte
				syscall.Read(l.wakefd, buf[:])
				l.runTasks()
				continue
			}
			end := l.ends[ev.Fd]
			if end == nil {
				continue
			}
			lp := end.lp
			src, sink := lp.usrc, lp.usink
			if end.client {
				src, sink = lp.csrc, lp.csink
			}
			src.event(ev.Events)
			sink.writable = sink.writable || ev.Events&(syscall.EPOLLOUT|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
			if !lp.queued {
				lp.queued = true
				turn = append(turn, lp)
			}
		}
		for _, lp := range turn {
			lp.queued = false
			lp.serve()
		}
		clear(turn)
	}
}

// runTasks runs what other goroutines posted.
func (l *eventLoop) runTasks() {
	if !l.posted.Load() {
		return
	}
	l.posted.Store(false) // before taking them: a task posted after this sets it again
	l.mu.Lock()
	tasks := l.tasks
	l.tasks = l.spare[:0] // two slices in turn: posting allocates nothing
	l.mu.Unlock()
	for i, f := range tasks {
		f()
		tasks[i] = nil
	}
	l.spare = tasks[:0]
}

// relayInLoop hands the session to an event loop when both its connections
// are plain TCP, and waits until the loop lets go of it. It reports whether
// the session is over; false means the goroutine relay must go on with it.
func (s *session) relayInLoop() bool {
	lp := s.newLooped()
	if lp == nil {
		s.srv.metrics.relays.WithLabelValues(relayGoroutines).Inc()
		return false
	}
	if s.uw.Flush() != nil {
		// The upstream is gone: the goroutine relay reads its end and
		// tells the client why.
		closeFD(lp.cfd)
		closeFD(lp.ufd)
		s.srv.metrics.relays.WithLabelValues(relayGoroutines).Inc()
		return false
	}
	s.srv.metrics.relays.WithLabelValues(relayLoop).Inc()
	s.ur.src = lp.usrc
	s.uw.Reset(toUpstream(lp.usink))
	if !s.runInLoop(lp) {
		return true
	}
	return !s.takeBack(lp)
}

// runInLoop hands the session to lp's loop, its readers and writers set to
// the loop's sockets, and waits until the loop lets go of it; it reports
// whether the loop handed it back to the goroutine relay.
func (s *session) runInLoop(lp *looped) (handedBack bool) {
	s.cw.Flush()
	// The sockets are now the duplicates' alone: closing the originals
	// takes them out of Go's poller. (A pooled session's server
	// connections are the pool's: the loop uses their sockets as they
	// are.)
	s.client.Close()
	if s.upstream != nil {
		s.upstream.Close()
	}
	if loopHandingOver != nil {
		loopHandingOver(s)
	}
	s.cr.src = lp.csrc
	s.cw.Reset(toClient(lp.csink))
	s.inLoop = true
	s.stateMu.Lock()
	s.lp = lp
	s.stateMu.Unlock()
	lp.post(lp.adopt)
	// close and stopUpstream find s.lp from here on; before, they closed
	// the net.Conns, which no longer end the session.
	select {
	case <-s.closed:
		lp.post(lp.end)
	default:
	}
	if s.adminStop.Load() {
		lp.post(lp.stop)
	}
	<-lp.done
	return lp.handBack
}

// newLooped returns the session's state for an event loop, with duplicates
// of its sockets, or nil when the loop cannot relay it.
func (s *session) newLooped() *looped {
	if !s.cfg.eventLoop() {
		return nil
	}
	cfd, cerr := dupFD(s.client)
	ufd, uerr := dupFD(s.upstream)
	if cerr != nil || uerr != nil {
		closeFD(cfd)
		closeFD(ufd)
		return nil
	}
	l, err := pickLoop(s.cfg.EpollLoop)
	if err != nil {
		s.log.Warn("event loop unavailable; relaying with goroutines", "err", err)
		closeFD(cfd)
		closeFD(ufd)
		return nil
	}
	return s.loopedOn(l, cfd, ufd)
}

// loopedOn returns the session's state for loop l on sockets cfd and ufd
// (-1: none yet, a pooled session's).
func (s *session) loopedOn(l *eventLoop, cfd, ufd int) *looped {
	return &looped{loop: l, s: s, cfd: cfd, ufd: ufd,
		csrc: &fdSource{fd: cfd}, usrc: &fdSource{fd: ufd},
		csink: &fdSink{fd: cfd}, usink: &fdSink{fd: ufd},
		crelay: byteCount{counter: s.srv.metrics.bytesUpstream},
		urelay: byteCount{counter: s.srv.metrics.bytesToClient},
		done:   make(chan struct{})}
}

// loopHandingOver, when set (by tests), is called as relayInLoop hands a
// session to the loop, between closing its net.Conns and setting s.lp.
var loopHandingOver func(*session)

// adopt registers the session's sockets with the loop and serves what is
// already buffered.
func (lp *looped) adopt() {
	if lp.gone {
		return // ended before it was adopted
	}
	l := lp.loop
	if l.ring != nil {
		lp.adoptRing()
		lp.serve()
		return
	}
	for i, fd := range []int{lp.cfd, lp.ufd} {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			lp.s.log.Warn("event loop: cannot watch a socket", "err", err)
			lp.s.sendClient(fatal(codeConnectionFailure, "fenceproxy: cannot watch the connection: "+err.Error()))
			lp.end()
			return
		}
		l.ends[int32(fd)] = &loopEnd{lp: lp, client: i == 0}
	}
	lp.csrc.ready, lp.usrc.ready = true, true
	lp.serve()
}

// serve relays what each direction has ready until neither can go on.
func (lp *looped) serve() {
	s := lp.s
	for !lp.gone {
		if lp.pl != nil && lp.pl.releasing {
			lp.finishRelease()
		}
		if !lp.flushSinks() {
			return
		}
		progress := false
		if !lp.clientWait && !lp.upstreamDown && !lp.usink.held() && (lp.pl == nil || !lp.pl.paused()) {
			progress = lp.clientTurn() || progress
		} else if lp.pl != nil && lp.pl.waiting {
			lp.watchClient()
		}
		if lp.gone {
			return
		}
		if !lp.csink.held() && lp.upstreamLent() {
			progress = lp.upstreamTurn() || progress
		}
		if lp.clientWait && !lp.gone && s.heldInCopy() {
			lp.clientGone(errHeldInCopy())
			return
		}
		if lp.clientWait && !lp.gone && s.gateSettled() {
			// Read the held message again in the loop's next round rather
			// than now: should gate hold it back again at once, the
			// session would spin here and starve the loop's others.
			lp.clientWait = false
			lp.requeue()
			return
		}
		if !progress || lp.queued {
			// Queued: a direction relayed its maxLoopMessages; the
			// session is served again after the loop's other sessions.
			return
		}
	}
}

// flushSinks writes what the sockets could not take before; false when the
// session ended.
func (lp *looped) flushSinks() bool {
	if err := lp.csink.flushPending(); err != nil {
		lp.end()
		return false
	}
	if err := lp.usink.flushPending(); err != nil {
		lp.upstreamFailed()
	}
	return true
}

// upstreamFailed stops relaying the client once a write upstream failed:
// the upstream connection is broken, and its end, read next, tells the
// client why (upstreamReadFailed: 08006, unless the server's own FATAL
// error came first), as the goroutine relay does.
func (lp *looped) upstreamFailed() {
	lp.upstreamDown = true
	lp.usink.drop()
}

// clientTurn relays the client's whole buffered messages; it reports
// whether it relayed any.
func (lp *looped) clientTurn() (progress bool) {
	s := lp.s
	for i := 0; ; i++ {
		ok, err := lp.more(i, s.cr, lp.usink)
		if !ok {
			if err := lp.refuseHeader(); err != nil {
				lp.clientGone(err)
				return true
			}
		}
		if err != nil {
			lp.clientGone(s.clientReadFailed(err))
			return true
		}
		if !ok {
			break
		}
		next, moved := lp.clientMessage()
		progress = progress || moved
		if lp.gone {
			return true
		}
		if !next {
			break
		}
	}
	lp.crelay.flush()
	if err := s.uw.Flush(); err != nil {
		lp.upstreamFailed()
	}
	return progress
}

// more reports whether a turn reading r may relay its i-th message now:
// one is buffered whole (or larger than r's buffer), the turn has not
// relayed maxLoopMessages (else the session is served again after the
// others), and the socket it writes to, out, holds nothing back. err is
// r's error, other than errAgain.
func (lp *looped) more(i int, r *reader, out *fdSink) (bool, error) {
	if out.held() {
		return false, nil
	}
	if i == maxLoopMessages {
		lp.requeue()
		return false, nil
	}
	ok, err := r.ready()
	if err == errAgain {
		return false, nil
	}
	return ok, err
}

// refuseHeader refuses, as the goroutine relay would, a client header
// already read whose message is not whole yet: at once, not once the body
// it announces has come (or never). It returns a *clientError or nil.
func (lp *looped) refuseHeader() error {
	typ, n, whole := lp.s.cr.peekHeader()
	if !whole {
		return nil
	}
	return lp.s.checkClientMessage(typ, n)
}

// clientMessage relays the client's next message, buffered whole or too
// large for the buffer. next reports whether the turn goes on; moved,
// whether the message was relayed. The session may have ended or left the
// loop (lp.gone).
func (lp *looped) clientMessage() (next, moved bool) {
	s := lp.s
	mark := s.cr.mark()
	typ, n, _ := s.cr.header()
	if err := s.checkClientMessage(typ, n); err != nil {
		lp.clientGone(err) // refused here, as the goroutine relay would, not after a hand-over
		return false, false
	}
	if !s.cr.holds(n) || (typ == 'Q' || typ == 'P') && n > loopMaxText {
		s.cr.rewind(mark)
		reason := leaveLargeMessage
		if s.cr.holds(n) {
			reason = leaveLongText
		}
		lp.handOver(reason, typ, n)
		return false, false
	}
	if lp.pl != nil {
		if relay, next := lp.lendFor(typ, n, mark); !relay {
			return next, false
		}
	}
	parsed := s.gate.ParseTime()
	stop, err := s.clientStep(typ, n, &lp.crelay)
	switch {
	case err == errWaitSettled:
		s.cr.rewind(mark)
		lp.clientWait = true
		return false, false
	case stop:
		lp.clientGone(err)
		return false, true
	case s.gate.ParseTime()-parsed > loopSlowStep:
		lp.crelay.flush()
		if s.uw.Flush() != nil {
			lp.upstreamFailed()
			return false, true
		}
		lp.handOver(leaveSlowMessage, typ, n)
	}
	return true, true
}

// upstreamTurn relays the upstream's whole buffered messages.
func (lp *looped) upstreamTurn() (progress bool) {
	s := lp.s
	for i := 0; ; i++ {
		ok, err := lp.more(i, s.ur, lp.csink)
		if err != nil {
			// What this turn relayed goes first: the server's FATAL
			// error often comes in the same read as its end.
			lp.urelay.flush()
			s.cw.Flush()
			s.upstreamReadFailed(err)
			lp.end()
			return true
		}
		if !ok {
			break
		}
		mark := s.ur.mark()
		typ, n, _ := s.ur.header()
		if !s.ur.holds(n) {
			s.ur.rewind(mark)
			lp.handOver(leaveLargeMessage, typ, n)
			return true
		}
		progress = true
		if s.upstreamStep(typ, n, &lp.urelay) {
			lp.end()
			return true
		}
		if typ == 'Z' && lp.pl != nil && lp.releaseIfIdle() {
			break // the connection is going back: nothing more is read of it
		}
	}
	lp.urelay.flush()
	if err := s.cw.Flush(); err != nil {
		lp.end()
	}
	return progress
}

// upstreamLent reports whether the session has an upstream to read: always
// in session mode; in transaction pool mode while a connection is lent,
// and not going back.
func (lp *looped) upstreamLent() bool {
	return lp.pl == nil || lp.pl.lent != nil && !lp.pl.releasing
}

func (lp *looped) requeue() {
	if !lp.queued {
		lp.queued = true
		lp.loop.again = append(lp.loop.again, lp)
	}
}

// clientGone ends the session after the client direction stopped: err is
// a *clientError when the client's input was refused. When writing
// upstream failed, the session ends once the upstream's end is read.
func (lp *looped) clientGone(err error) {
	s := lp.s
	var ce *clientError
	if upstreamWriteFailed(err) {
		lp.upstreamFailed()
		return
	}
	if errors.As(err, &ce) {
		s.srv.metrics.refusedConns.WithLabelValues(failProtocol).Inc()
		s.log.Info("client message refused", "err", err)
		s.quiet.Store(true)
		s.sendClient(fatal(ce.code, ce.msg))
	} else if s.uw.Flush() == nil {
		// The client left (or sent Terminate): what it sent before goes
		// upstream, as the goroutine relay's blocking writes send it (a
		// COMMIT and then the client's end, read at once, must commit).
		lp.deliver = true
	}
	lp.end()
}

// stop ends the session for a shutdown, telling the client 57P01.
func (lp *looped) stop() {
	if lp.gone {
		return
	}
	lp.s.upstreamReadFailed(net.ErrClosed)
	lp.end()
}

// end closes the session's sockets; what the client could not take yet
// (and, when the client left, what the upstream could not) is written by a
// goroutine of its own, for up to a second.
func (lp *looped) end() {
	if lp.gone {
		return
	}
	lp.gone = true
	lp.crelay.flush()
	lp.urelay.flush()
	if lp.loop.ring != nil {
		lp.cancelRing(lp.closeSockets)
		return
	}
	lp.unwatch()
	lp.closeSockets()
}

// closeSockets closes the session's sockets, or has what is pending on
// them written first, and lets the session go.
func (lp *looped) closeSockets() {
	if lp.pl != nil {
		lp.closePooled()
		return
	}
	switch {
	case lp.deliver && lp.keepsUpstream():
		lp.s.reused.fd = lp.ufd // reset for the next client (releaseReused)
	case lp.deliver && lp.s.reused != nil && lp.s.terminated.Load() && len(lp.usink.pending) == 0:
		closeWriting(lp.ufd, terminateMsg) // the client's Terminate, held back for a reuse
	case lp.deliver:
		closeWriting(lp.ufd, lp.usink.pending)
	default:
		closeFD(lp.ufd)
	}
	closeWriting(lp.cfd, lp.csink.pending)
	lp.release()
}

// keepsUpstream reports whether the server connection of a session whose
// client left may serve the next client (Config.Reuse): the session left
// it idle (reusable), and the loop holds nothing of it unsent or unread,
// nor saw its end.
func (lp *looped) keepsUpstream() bool {
	s := lp.s
	if s.reused == nil || lp.upstreamDown || lp.usrc.hup || len(lp.usink.pending) > 0 || lp.usrc.buffered() > 0 || !s.ur.idle() {
		return false
	}
	if rx := lp.usrc.rx; rx != nil && rx.err != nil {
		return false
	}
	return s.reusable()
}

// closeWriting closes fd, after pending is written to it (finishWrite, on
// a goroutine of its own) when there is any.
func closeWriting(fd int, pending []byte) {
	if len(pending) > 0 {
		go finishWrite(fd, pending)
		return
	}
	closeFD(fd)
}

// handOver gives the session back to the goroutine relay (takeBack), with
// everything buffered, for the reason given (a leave* metric label).
func (lp *looped) handOver(reason string, typ byte, n int) {
	lp.s.srv.metrics.loopLeaves.WithLabelValues(reason).Inc()
	lp.s.log.Debug("leaving the event loop", "reason", reason, "type", string(typ), "bytes", n+headerLen)
	lp.gone, lp.handBack = true, true
	lp.crelay.flush()
	lp.urelay.flush()
	lp.s.inLoop = false
	lp.s.waitFirst = lp.clientWait
	if lp.loop.ring != nil {
		lp.cancelRing(lp.release)
		return
	}
	lp.unwatch()
	lp.release()
}

func (lp *looped) unwatch() {
	for _, fd := range []int{lp.cfd, lp.ufd} {
		if lp.loop.ends[int32(fd)] != nil {
			syscall.EpollCtl(lp.loop.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
			delete(lp.loop.ends, int32(fd))
		}
	}
}

func (lp *looped) release() {
	s := lp.s
	s.stateMu.Lock()
	s.lp = nil
	s.stateMu.Unlock()
	close(lp.done)
}

// takeBack turns the loop's sockets back into net.Conns for the goroutine
// relay; false when the session is over.
func (s *session) takeBack(lp *looped) bool {
	client, cerr := fileConn(lp.cfd)
	upstream, uerr := fileConn(lp.ufd)
	if cerr != nil || uerr != nil {
		s.log.Warn("event loop: cannot hand the session back", "err", errors.Join(cerr, uerr))
		if client != nil {
			// Best effort: tell the client why before closing.
			client.SetWriteDeadline(time.Now().Add(time.Second))
			s.cw.Reset(toClient(client))
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: internal error: cannot go on relaying the session"))
			client.Close()
		}
		if upstream != nil {
			upstream.Close()
		}
		return false
	}
	lp.csrc.conn, lp.csink.conn = client, client
	lp.usrc.conn, lp.usink.conn = upstream, upstream
	s.stateMu.Lock()
	s.client, s.upstream = client, upstream
	s.stateMu.Unlock()
	select {
	case <-s.closed:
		client.Close()
		upstream.Close()
		return false
	default:
	}
	if s.adminStop.Load() {
		upstream.Close()
	}
	// What the sockets could not take yet is written by the pumps, each
	// its own direction's, as they run at once: written here, before
	// either runs, it could wait for an upstream that is itself waiting
	// for the proxy to read.
	s.cPending, s.uPending = lp.csink, lp.usink
	return true
}
