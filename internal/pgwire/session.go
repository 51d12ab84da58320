package pgwire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// session is one client connection and its upstream connection.
//
// Goroutines: run (the caller's) owns the session and reads from the client;
// it starts one upstream reader (pumpUpstream) after authentication and waits
// for it before returning. close, reached on every path, unblocks both.
type session struct {
	srv *Server
	cfg *Config // the Server's Config when the session was accepted; read-only
	// reloaded is the fencing policy of a reload since, for the gate to
	// take at the client's next unit (Server.Reload).
	reloaded atomic.Pointer[gate.Config]
	id       uint64
	log      *slog.Logger
	client   net.Conn

	upstream net.Conn
	key      *pgproto3.BackendKeyData // the key the client was given

	cr *reader       // from client
	cw *bufio.Writer // to client; written by the upstream reader after startup
	ur *reader       // from upstream
	uw *bufio.Writer // to upstream; written by the client reader

	// gateMu serializes the goroutine relay's two directions' calls into
	// gate (lockGate); stateMu may be taken under it, never the reverse.
	gateMu sync.Mutex
	gate   gater // fencing decisions for this session
	// lastCheckSeen: what gate's last check carried (gate's LastCheck),
	// published for the admin view and refusal logs, which read it from
	// other goroutines; nil before the first check.
	lastCheckSeen atomic.Pointer[fencestore.CheckArgs]
	lastCheckPub  fencestore.CheckArgs // what was published there (client direction)
	encBuf        []byte               // scratch for encoding injected messages (client direction)
	// COPY FROM STDIN or CopyBoth mode, under gateMu (heldInCopy): copyIn,
	// the server's CopyInResponse or CopyBothResponse relayed and the copy
	// not ended by the server since (CommandComplete, ErrorResponse or
	// ReadyForQuery);
	// copyEnds, the client's CopyDone and CopyFail forwarded; copyEndsRef,
	// copyEnds when gate last settled.
	copyIn                bool
	copyEnds, copyEndsRef int

	clientTLSOn   bool      // the client connection is TLS
	startDeadline time.Time // when the client must have finished starting up (startup_timeout)
	overLimit     bool      // accepted beyond Config.MaxClientConns: refuse after startup

	settled chan struct{} // signalled by the upstream reader when gate may have settled
	closed  chan struct{} // closed by close

	// Event loop (loop_linux.go). inLoop: the loop relays the session
	// (set before it is handed over, cleared by the loop when it hands the
	// session back); waitFirst: it handed back a client message waiting for
	// gate to settle. lp is read by other goroutines under stateMu.
	inLoop    bool
	waitFirst bool
	lp        *looped
	// Set when the loop hands the session back with output its sockets
	// could not take yet: pumpUpstream writes cPending's (to the client)
	// first, pumpClient uPending's (upstream).
	cPending, uPending pendingWriter
	lastFatal          bool // the last upstream message was a FATAL or PANIC error

	closeOnce  sync.Once
	terminated atomic.Bool // the client sent Terminate: upstream EOF is expected
	quiet      atomic.Bool // the upstream is being closed on purpose: report nothing
	adminStop  atomic.Bool // the upstream was closed for shutdown: tell the client 57P01
	adminKill  atomic.Bool // Server.Terminate ended the session: say so in the 57P01

	info sessionInfo // for the admin view (admin.go)

	pooled *pooledState // transaction pool mode (pooled.go); nil in session mode
	reused *reusedConn  // session mode with Config.Reuse (reuse.go); else nil

	checkSent atomic.Int64 // unix ns when the check awaiting its reply went upstream, 0: none (metrics.go)

	// Shutdown state. draining is set by Server.Shutdown (or at creation
	// during one); proxying once the pumps run; inflight counts the Query,
	// Sync and FunctionCall messages forwarded whose ReadyForQuery has not
	// come back; extOpen (atomic, not under stateMu), an extended-protocol
	// message forwarded since the last Sync; txStatus is the last
	// ReadyForQuery's status.
	stateMu  sync.Mutex
	draining bool
	proxying bool
	inflight int
	extOpen  atomic.Bool
	txStatus byte
}

// gater is what the relay asks of a session's fencing state machine: a
// *gate.Session (a stub in tests).
type gater interface {
	Client(gate.Msg) gate.Decision
	Server(gate.Reply) gate.Verdict
	Settled() bool
	Probe() []pgproto3.FrontendMessage
	LastCheck() fencestore.CheckArgs
	ParseTime() time.Duration
	TokenMaybe() bool
}

// newRelay returns a session that relays between client and upstream, two
// connections past startup and authentication, with its gate set up for a
// client whose startup parameters were params. The caller runs
// startupProbe, then proxy. Server.Serve builds its sessions step by step
// instead (startup, connect, authentication); newRelay lets the relay run
// over any pair of net.Conns, such as net.Pipe in tests.
func (srv *Server) newRelay(client, upstream net.Conn, params map[string]string) *session {
	s := srv.newSession(client)
	s.attach(upstream)
	s.info.setStartup(params)
	s.gate = gate.NewSession(s.cfg.Fencing, params)
	return s
}

// ioBufferSize is the size of each buffered reader and writer of a session.
const ioBufferSize = 32 * 1024

// attach makes upstream the session's upstream connection and sets up
// buffered readers and writers on both connections.
func (s *session) attach(upstream net.Conn) {
	s.upstream = upstream
	s.cr, s.cw = newReader(s.client), bufio.NewWriterSize(toClient(s.client), ioBufferSize)
	s.ur, s.uw = newReader(upstream), bufio.NewWriterSize(toUpstream(upstream), ioBufferSize)
}

func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.stateMu.Lock()
		client, upstream, lp := s.client, s.upstream, s.lp
		s.stateMu.Unlock()
		client.Close()
		if upstream != nil {
			upstream.Close()
		}
		if lp != nil {
			lp.post(lp.end)
		}
	})
}

// looped reports whether the event loop relays the session.
func (s *session) looped() bool { return s.inLoop }

// lockGate takes gateMu unless an event loop relays the session: the loop
// calls into gate from one goroutine, so a lock per message would order
// nothing. It returns whether it locked, for unlockGate (the loop may hand
// the session over meanwhile). Another goroutine calls into gate only
// while the loop holds the session's turns back for it and orders its work
// with the loop's (runOutside: its go statement, then the post of its
// result); the admin view and refusal logs read lastCheckSeen instead.
func (s *session) lockGate() bool {
	if s.inLoop {
		return false
	}
	s.gateMu.Lock()
	return true
}

func (s *session) unlockGate(locked bool) {
	if locked {
		s.gateMu.Unlock()
	}
}

func (s *session) run(ctx context.Context) {
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()

	s.startDeadline = time.Now().Add(s.cfg.startupTimeout())
	s.client.SetDeadline(s.startDeadline)
	startup, err := s.startup()
	if err != nil || startup == nil {
		var ce *clientError
		if errors.As(err, &ce) {
			s.sendClient(fatal(ce.code, ce.msg))
		}
		if err != nil && !isClosed(err) && err != io.EOF {
			s.log.Info("startup failed", "err", err)
		}
		return
	}
	s.info.setStartup(startup.Parameters)
	if s.cfg.RequireClientTLS && !s.clientTLSOn {
		s.log.Info("plaintext client refused", "user", startup.Parameters["user"])
		s.sendClient(fatal(codeInvalidAuthorization, "fenceproxy: TLS is required (client_tls: require); connect with sslmode=require or stronger"))
		return
	}
	if s.overLimit {
		s.srv.metrics.refusedConns.WithLabelValues(failTooMany).Inc()
		s.log.Warn("too many client connections", "max_client_conns", s.cfg.maxClientConns())
		s.sendClient(fatal(codeTooManyConnections, fmt.Sprintf("fenceproxy: too many client connections (max_client_conns is %d)", s.cfg.maxClientConns())))
		return
	}
	if v, ok := startup.Parameters["replication"]; ok && walsender(v) {
		s.srv.metrics.refusedConns.WithLabelValues(failReplication).Inc()
		s.log.Info("replication connection refused", "user", startup.Parameters["user"], "replication", v)
		s.sendClient(fatal(codeFeatureNotSupported, "fenceproxy: replication connections are not supported (startup parameter replication="+v+"); connect to the server directly"))
		return
	}
	if err := gate.CheckStartup(s.cfg.Fencing, startup.Parameters); err != nil {
		s.log.Info("startup refused", "user", startup.Parameters["user"], "err", err)
		e := fatal(sqlstate.SessionToken, err.Error())
		var se *gate.StartupError
		if errors.As(err, &se) {
			e.Hint = se.Hint
		}
		s.sendClient(e)
		return
	}
	if s.cfg.Pool != nil {
		s.runPooled(startup)
		return
	}
	if s.cfg.Reuse != nil {
		s.runReusing(startup)
		return
	}
	if err := s.timedConnect(startup); err != nil {
		s.srv.metrics.refusedConns.WithLabelValues(failUpstreamConnect).Inc()
		s.log.Warn("upstream connect failed", "err", err)
		s.sendClient(upstreamConnectError(err))
		return
	}
	defer s.srv.cancels.remove(s.key)
	s.gate = gate.NewSession(s.cfg.Fencing, startup.Parameters)
	if err := s.relayAuth(); err != nil {
		s.log.Info("authentication failed", "err", err)
		return
	}
	s.client.SetDeadline(time.Time{})
	s.upstream.SetDeadline(time.Time{})
	s.log.Debug("session ready", "user", startup.Parameters["user"], "database", startup.Parameters["database"])
	s.proxy()
}

// proxy relays messages both ways until either side closes.
//
// When the client's input breaks the protocol, the upstream connection is
// closed first (session mode: nothing half-forwarded survives), its reader
// stops, and then the client is told why: the reader owns s.cw until it has
// exited.
func (s *session) proxy() {
	if !s.startProxying() {
		return
	}
	if s.relayInLoop() {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pumpUpstream()
		if !s.quiet.Load() {
			s.close()
		}
	}()
	err := s.pumpClient()
	var ce *clientError
	if errors.As(err, &ce) {
		s.srv.metrics.refusedConns.WithLabelValues(failProtocol).Inc()
		s.log.Info("client message refused", "err", err)
		s.quiet.Store(true)
		s.upstream.Close()
		<-done
		// Drop whatever part of an upstream message was left unsent, so the
		// ErrorResponse starts on a message boundary.
		s.cw.Reset(toClient(s.client))
		s.sendClient(fatal(ce.code, ce.msg))
	} else if s.adminStop.Load() || upstreamWriteFailed(err) {
		// The upstream reader is telling the client why: the upstream
		// connection broke, and its reads end too (08006, or the server's
		// own FATAL error read before the end).
		<-done
	}
	s.close()
	<-done
}

// startProxying marks the session past startup, and reports false, having
// told the client, when a shutdown began meanwhile.
func (s *session) startProxying() bool {
	s.stateMu.Lock()
	s.proxying, s.txStatus = true, 'I'
	draining := s.draining
	s.stateMu.Unlock()
	if draining {
		s.sendClient(s.stopError())
		return false
	}
	return true
}

// pendingWriter holds output an event loop could not write yet.
type pendingWriter interface{ flushPending() error }

// flushPending writes p's output, if any.
func flushPending(p pendingWriter) error {
	if p == nil {
		return nil
	}
	return p.flushPending()
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed)
}
