package pgwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Startup-phase request codes (PostgreSQL src/include/libpq/pqcomm.h).
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
)

// session is one client connection and its upstream connection.
//
// Goroutines: run (the caller's) owns the session and reads from the client;
// it starts one upstream reader (pumpUpstream) after authentication and waits
// for it before returning. close, reached on every path, unblocks both.
type session struct {
	srv    *Server
	id     uint64
	log    *slog.Logger
	client net.Conn

	upstream net.Conn
	key      *pgproto3.BackendKeyData // the key the client was given

	cr *reader       // from client
	cw *bufio.Writer // to client; written by the upstream reader after startup
	ur *reader       // from upstream
	uw *bufio.Writer // to upstream; written by the client reader

	gateMu sync.Mutex    // serializes the two directions' calls into gate
	gate   *gate.Session // fencing decisions for this session
	encBuf []byte        // scratch for encoding injected messages (client direction)

	clientTLSOn bool // the client connection is TLS
	overLimit   bool // accepted beyond Config.MaxClientConns: refuse after startup

	settled chan struct{} // signalled by the upstream reader when gate may have settled
	closed  chan struct{} // closed by close

	closeOnce  sync.Once
	terminated atomic.Bool // the client sent Terminate: upstream EOF is expected
	quiet      atomic.Bool // the upstream is being closed on purpose: report nothing
	adminStop  atomic.Bool // the upstream was closed for shutdown: tell the client 57P01

	// Shutdown state. draining is set by Server.Shutdown (or at creation
	// during one); proxying once the pumps run; inflight counts the Query,
	// Sync and FunctionCall messages forwarded whose ReadyForQuery has not
	// come back; txStatus is the last ReadyForQuery's status.
	stateMu  sync.Mutex
	draining bool
	proxying bool
	inflight int
	txStatus byte
}

// drain asks the session to end at its next idle moment: now, if it is
// idle; otherwise after the ReadyForQuery that leaves it idle. A session
// still starting up ends when it gets there.
func (s *session) drain() {
	s.stateMu.Lock()
	s.draining = true
	idle := s.proxying && s.inflight == 0 && s.txStatus == 'I'
	s.stateMu.Unlock()
	if idle {
		s.log.Info("closing idle session for shutdown")
		s.stopUpstream()
	}
}

// stop ends the session now, telling the client 57P01 when it is past
// startup.
func (s *session) stop() {
	s.stateMu.Lock()
	s.draining = true
	proxying := s.proxying
	s.stateMu.Unlock()
	if proxying {
		s.log.Info("closing session for shutdown", "tx_status", string(s.status()))
		s.stopUpstream()
		return
	}
	s.close()
}

func (s *session) status() byte {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.txStatus
}

// stopUpstream closes the upstream connection so that the upstream reader,
// which owns s.cw, tells the client 57P01 and ends the session.
func (s *session) stopUpstream() {
	s.adminStop.Store(true)
	s.upstream.Close()
}

func shutdownError() *pgproto3.ErrorResponse {
	return fatal(codeAdminShutdown, "fenceproxy: terminating connection because the proxy is shutting down")
}

func (s *session) close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.client.Close()
		if s.upstream != nil {
			s.upstream.Close()
		}
	})
}

func (s *session) run(ctx context.Context) {
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()

	s.client.SetDeadline(time.Now().Add(s.srv.cfg.startupTimeout()))
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
	if s.srv.cfg.RequireClientTLS && !s.clientTLSOn {
		s.log.Info("plaintext client refused", "user", startup.Parameters["user"])
		s.sendClient(fatal(codeInvalidAuthorization, "fenceproxy: TLS is required (client_tls: require); connect with sslmode=require or stronger"))
		return
	}
	if s.overLimit {
		s.srv.metrics.refusedConns.WithLabelValues(failTooMany).Inc()
		s.log.Warn("too many client connections", "max_client_conns", s.srv.cfg.maxClientConns())
		s.sendClient(fatal(codeTooManyConnections, fmt.Sprintf("fenceproxy: too many client connections (max_client_conns is %d)", s.srv.cfg.maxClientConns())))
		return
	}
	if err := s.connectUpstream(startup); err != nil {
		s.srv.metrics.refusedConns.WithLabelValues(failUpstreamConnect).Inc()
		s.log.Warn("upstream connect failed", "err", err)
		s.sendClient(fatal(codeCannotConnect, "fenceproxy: cannot connect to the upstream server: "+err.Error()))
		return
	}
	defer s.srv.cancels.remove(s.key)
	s.gate = gate.NewSession(s.srv.fencing, startup.Parameters)
	if err := s.relayAuth(); err != nil {
		s.log.Info("authentication failed", "err", err)
		return
	}
	s.client.SetDeadline(time.Time{})
	s.upstream.SetDeadline(time.Time{})
	s.log.Debug("session ready", "user", startup.Parameters["user"], "database", startup.Parameters["database"])
	s.proxy()
}

// startup reads the client's startup packets, answering SSL and GSSAPI
// encryption requests with 'N' and serving cancel requests. It returns the
// StartupMessage, or nil when the connection was a cancel request.
func (s *session) startup() (*pgproto3.StartupMessage, error) {
	for {
		pkt, err := readStartup(s.client)
		if errors.Is(err, errProtocol) {
			return nil, protocolViolation(err.Error())
		}
		if err != nil {
			return nil, err
		}
		switch code := binary.BigEndian.Uint32(pkt); code {
		case codeSSLRequest:
			if s.clientTLSOn {
				return nil, protocolViolation("SSLRequest over TLS")
			}
			if s.srv.cfg.TLS != nil {
				if err := s.clientTLS(); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case codeGSSENCRequest:
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case codeCancelRequest:
			var req pgproto3.CancelRequest
			if err := req.Decode(pkt); err != nil {
				return nil, protocolViolation("invalid cancel request: " + err.Error())
			}
			s.cancel(&req)
			return nil, nil
		default:
			var msg pgproto3.StartupMessage
			if err := msg.Decode(pkt); err != nil {
				return nil, protocolViolation("invalid startup packet: " + err.Error())
			}
			return &msg, nil
		}
	}
}

func (s *session) cancel(req *pgproto3.CancelRequest) {
	up, ok := s.srv.cancels.lookup(req)
	if !ok {
		s.log.Info("cancel request with unknown key")
		return
	}
	if err := forwardCancel(up, s.srv.cfg.dialTimeout()); err != nil {
		s.log.Warn("forward cancel request", "err", err)
	}
}

func (s *session) connectUpstream(startup *pgproto3.StartupMessage) error {
	raw, err := net.DialTimeout("tcp", s.srv.cfg.Upstream, s.srv.cfg.dialTimeout())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.srv.cfg.startupTimeout())
	conn, err := s.srv.cfg.upstreamTLS(raw, deadline)
	if err != nil {
		raw.Close()
		return err
	}
	s.upstream = conn
	conn.SetDeadline(deadline)
	s.cr, s.cw = newReader(s.client), bufio.NewWriterSize(s.client, 32*1024)
	s.ur, s.uw = newReader(conn), bufio.NewWriterSize(conn, 32*1024)
	buf, err := startup.Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	return nil
}

// relayAuth relays the upstream's authentication exchange until its first
// ReadyForQuery. The proxy never sees a password in the clear unless the
// server asked the client for a cleartext one; it only forwards bytes.
func (s *session) relayAuth() error {
	for {
		typ, n, err := s.ur.header()
		if err != nil {
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: upstream closed the connection during authentication"))
			return err
		}
		body, err := s.ur.body(n)
		if err != nil {
			return err
		}
		switch typ {
		case 'K':
			var k pgproto3.BackendKeyData
			if err := k.Decode(body); err != nil {
				return err
			}
			s.key = s.srv.cancels.register(upstreamKey{addr: s.srv.cfg.Upstream, pid: k.ProcessID, secret: k.SecretKey})
			if err := s.writeClient(s.key); err != nil {
				return err
			}
			continue
		}
		if typ == 'R' && len(body) >= 4 && binary.BigEndian.Uint32(body) == 10 {
			body = stripChannelBinding(body) // AuthenticationSASL
		}
		if typ == 'S' {
			var ps pgproto3.ParameterStatus
			if err := ps.Decode(body); err != nil {
				return err
			}
			s.gate.Server(gate.Reply{Type: 'S', Param: ps.Name, Value: ps.Value})
		}
		if typ == 'Z' {
			if err := s.startupProbe(); err != nil {
				return err
			}
		}
		if err := s.writeRaw(s.cw, typ, body); err != nil {
			return err
		}
		if err := s.cw.Flush(); err != nil {
			return err
		}
		switch typ {
		case 'E':
			return errors.New("upstream refused the connection")
		case 'Z':
			return nil
		case 'R':
			if len(body) >= 4 && authNeedsReply(binary.BigEndian.Uint32(body)) {
				if err := s.relayAuthReply(); err != nil {
					return err
				}
			}
		}
	}
}

// startupProbe asks the server, hidden from the client, whether the new
// session holds a fencing token (from startup parameters in any form, or
// role and database defaults), before the client may send its first query.
func (s *session) startupProbe() error {
	if err := s.writeMessages(s.gate.Probe()); err != nil {
		return err
	}
	if err := s.uw.Flush(); err != nil {
		return err
	}
	for !s.gateSettled() {
		typ, n, err := s.ur.header()
		if err != nil {
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: lost the connection to the upstream server"))
			return err
		}
		if _, err := s.upstreamMessage(typ, n); err != nil {
			return err
		}
	}
	return nil
}

// gateSettled reports whether gate has every reply to what was sent.
func (s *session) gateSettled() bool {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	return s.gate.Settled()
}

// authNeedsReply reports whether an Authentication request expects a message
// from the client (PostgreSQL protocol "Message Formats": AuthenticationXxx).
func authNeedsReply(kind uint32) bool {
	switch kind {
	case 3, 5, 7, 8, 9, 10, 11: // cleartext, MD5, GSS, GSS continue, SSPI, SASL, SASL continue
		return true
	}
	return false
}

func (s *session) relayAuthReply() error {
	typ, n, err := s.cr.header()
	if err != nil {
		return err
	}
	if typ != 'p' {
		s.sendClient(fatal(codeProtocolViolation, fmt.Sprintf("fenceproxy: expected a password message, got %q", typ)))
		return fmt.Errorf("%w: expected password message, got %q", errProtocol, typ)
	}
	if n > maxStartupLen {
		s.sendClient(fatal(codeProtocolViolation, "fenceproxy: authentication message too long"))
		return fmt.Errorf("%w: password message of %d bytes", errProtocol, n)
	}
	body, err := s.cr.body(n)
	if err != nil {
		return err
	}
	if err := s.writeRaw(s.uw, typ, body); err != nil {
		return err
	}
	return s.uw.Flush()
}

// proxy relays messages both ways until either side closes.
//
// When the client's input breaks the protocol, the upstream connection is
// closed first (session mode: nothing half-forwarded survives), its reader
// stops, and then the client is told why: the reader owns s.cw until it has
// exited.
func (s *session) proxy() {
	s.stateMu.Lock()
	s.proxying, s.txStatus = true, 'I'
	draining := s.draining
	s.stateMu.Unlock()
	if draining {
		s.sendClient(shutdownError())
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
		s.cw.Reset(s.client)
		s.sendClient(fatal(ce.code, ce.msg))
	} else if s.adminStop.Load() {
		<-done // the upstream reader is telling the client why
	}
	s.close()
	<-done
}

// pumpClient forwards client messages upstream until the client leaves,
// showing gate the messages it decides on.
// It returns a *clientError when the client's input must be refused.
func (s *session) pumpClient() error {
	for {
		typ, n, err := s.cr.header()
		if errors.Is(err, errProtocol) {
			return protocolViolation(err.Error())
		}
		if err != nil {
			if !isClosed(err) && err != io.EOF {
				s.log.Info("client read", "err", err)
			}
			return nil
		}
		if err := s.checkClientMessage(typ, n); err != nil {
			return err
		}
		s.srv.metrics.bytesUpstream.Add(float64(n + headerLen))
		if err := s.clientMessage(typ, n); err != nil {
			var ce *clientError
			if errors.As(err, &ce) {
				return err
			}
			if !isClosed(err) {
				s.log.Info("client message", "type", string(typ), "err", err)
			}
			return nil
		}
		if typ == 'X' {
			s.terminated.Store(true)
			s.uw.Flush()
			return nil
		}
		if s.cr.idle() {
			if err := s.uw.Flush(); err != nil {
				return nil
			}
		}
	}
}

// checkClientMessage refuses a message type PostgreSQL does not accept
// after startup and a length beyond the proxy's limits, before a byte of
// the message is forwarded.
//
// Unknown types are refused here, as PostgreSQL would (postgres.c
// SocketBackend: "invalid frontend message type"), rather than forwarded:
// the proxy cannot frame what it does not know, and gate must see every
// message that can run SQL.
func (s *session) checkClientMessage(typ byte, n int) error {
	switch typ {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'H', 'S', 'F', 'X', 'd', 'c', 'f':
	default:
		return protocolViolation(fmt.Sprintf("invalid frontend message type %d", typ))
	}
	if n > maxAnyMessage-4 {
		return protocolViolation(fmt.Sprintf("invalid message length %d", n+4))
	}
	switch typ {
	case 'Q', 'P', 'E', 'D', 'C':
		if limit := s.srv.cfg.maxMessageBytes(); n+4 > limit {
			return protocolViolation(fmt.Sprintf("message %q of %d bytes exceeds max_message_bytes (%d)", typ, n+4, limit))
		}
	}
	return nil
}

// clientMessage forwards one client message whose header has been read,
// as gate decides: unchanged, with messages before or after it, replaced,
// dropped, or after waiting for the replies to what was sent before.
func (s *session) clientMessage(typ byte, n int) error {
	switch typ {
	case 'Q', 'P', 'E', 'D', 'C':
		body, err := s.cr.body(n)
		if err != nil {
			return err
		}
		m, err := decodeClient(typ, body)
		if err != nil {
			return err
		}
		d, err := s.decide(m)
		if err != nil {
			return err
		}
		return s.apply(d, func() error {
			if err := s.writeRaw(s.uw, typ, body); err != nil {
				return err
			}
			s.sent(typ)
			return nil
		})
	case 'B':
		return s.bind(n)
	case 'S', 'F':
		d, err := s.decide(gate.Msg{Type: typ})
		if err != nil {
			return err
		}
		if d.Replace != nil || d.Drop {
			if err := s.cr.discard(n); err != nil {
				return err
			}
		}
		return s.apply(d, func() error { return s.forward(typ, n) })
	}
	return s.forward(typ, n)
}

// forward streams a client message's body upstream unchanged.
func (s *session) forward(typ byte, n int) error {
	if err := writeHeader(s.uw, typ, n); err != nil {
		return err
	}
	if err := s.cr.copyBody(s.uw, n); err != nil {
		return err
	}
	s.sent(typ)
	return nil
}

// decodeClient decodes what gate needs of a Query, Parse, Execute,
// Describe or Close.
func decodeClient(typ byte, body []byte) (gate.Msg, error) {
	m := gate.Msg{Type: typ}
	switch typ {
	case 'Q':
		var q pgproto3.Query
		if err := q.Decode(body); err != nil {
			return m, protocolViolation("invalid Query message: " + err.Error())
		}
		m.Text = q.String
	case 'P':
		var p pgproto3.Parse
		if err := p.Decode(body); err != nil {
			return m, protocolViolation("invalid Parse message: " + err.Error())
		}
		m.Name, m.Text = p.Name, p.Query
	case 'E':
		var e pgproto3.Execute
		if err := e.Decode(body); err != nil {
			return m, protocolViolation("invalid Execute message: " + err.Error())
		}
		m.Portal = e.Portal
	case 'D', 'C':
		if len(body) < 2 || body[len(body)-1] != 0 || bytes.IndexByte(body[1:len(body)-1], 0) >= 0 {
			return m, protocolViolation(fmt.Sprintf("invalid %q message", typ))
		}
		m.Object, m.Name = body[0], string(body[1:len(body)-1])
	}
	return m, nil
}

// decide asks gate about m, waiting as long as gate says to: until every
// reply to what was sent before has arrived.
func (s *session) decide(m gate.Msg) (gate.Decision, error) {
	for {
		s.gateMu.Lock()
		d := s.gate.Client(m)
		s.gateMu.Unlock()
		if !d.Wait {
			return d, nil
		}
		if err := s.writeMessages(d.Before); err != nil {
			return d, err
		}
		if err := s.uw.Flush(); err != nil {
			return d, err
		}
		if err := s.waitSettled(); err != nil {
			return d, err
		}
	}
}

// waitSettled blocks until gate has every reply to what was sent.
func (s *session) waitSettled() error {
	for !s.gateSettled() {
		select {
		case <-s.settled:
		case <-s.closed:
			return net.ErrClosed
		}
	}
	return nil
}

// apply carries out d around the client's own message, which own writes.
func (s *session) apply(d gate.Decision, own func() error) error {
	if len(d.Before) > 0 || d.Replace != nil || d.Drop {
		s.srv.metrics.checks.Inc()
	}
	if err := s.writeMessages(d.Before); err != nil {
		return err
	}
	switch {
	case d.Replace != nil:
		if err := s.writeUpstream(d.Replace); err != nil {
			return err
		}
	case !d.Drop:
		if err := own(); err != nil {
			return err
		}
	}
	return s.writeMessages(d.After)
}

// writeMessages writes injected messages upstream.
func (s *session) writeMessages(msgs []pgproto3.FrontendMessage) error {
	for _, m := range msgs {
		if err := s.writeUpstream(m); err != nil {
			return err
		}
	}
	return nil
}

// sent counts a message sent upstream that a ReadyForQuery answers.
func (s *session) sent(typ byte) {
	switch typ {
	case 'Q', 'S', 'F':
		s.stateMu.Lock()
		s.inflight++
		s.stateMu.Unlock()
	}
}

// bind forwards a Bind, reading only the portal and statement names and
// streaming the parameters.
func (s *session) bind(n int) error {
	portal, err := s.cr.cstring(n)
	if err != nil {
		return bindError(err)
	}
	stmt, err := s.cr.cstring(n - len(portal) - 1)
	if err != nil {
		return bindError(err)
	}
	rest := n - len(portal) - len(stmt) - 2
	d, err := s.decide(gate.Msg{Type: 'B', Portal: portal, Name: stmt})
	if err != nil {
		return err
	}
	if d.Drop {
		if err := s.cr.discard(rest); err != nil {
			return err
		}
	}
	return s.apply(d, func() error {
		if err := writeHeader(s.uw, 'B', n); err != nil {
			return err
		}
		s.uw.WriteString(portal)
		s.uw.WriteByte(0)
		s.uw.WriteString(stmt)
		s.uw.WriteByte(0)
		return s.cr.copyBody(s.uw, rest)
	})
}

func bindError(err error) error {
	if errors.Is(err, errProtocol) {
		return protocolViolation("invalid Bind message: " + err.Error())
	}
	return err
}

// pumpUpstream forwards upstream messages to the client until the upstream
// leaves; then it tells the client why, if the upstream did not. Replies to
// messages the gate injected are dropped.
func (s *session) pumpUpstream() {
	var lastFatal bool
	for {
		typ, n, err := s.ur.header()
		if err != nil {
			if s.adminStop.Load() {
				s.sendClient(shutdownError())
				return
			}
			if !lastFatal && !s.quiet.Load() && !isClosed(err) && !s.terminated.Load() {
				s.srv.metrics.refusedConns.WithLabelValues(failUpstreamLost).Inc()
				s.log.Warn("upstream lost", "err", err)
				s.sendClient(fatal(codeConnectionFailure, "fenceproxy: lost the connection to the upstream server"))
			}
			return
		}
		s.srv.metrics.bytesToClient.Add(float64(n + headerLen))
		closing, err := s.upstreamMessage(typ, n)
		var re *replyError
		if errors.As(err, &re) {
			s.log.Error("ending session", "err", err)
			s.cw.Flush()
			s.sendClient(fatal(codeProtocolViolation, "fenceproxy: "+err.Error()+"; the session cannot continue"))
			return
		}
		if err != nil {
			if s.adminStop.Load() {
				s.cw.Reset(s.client) // drop the unsent part of the message
				s.sendClient(shutdownError())
			}
			return
		}
		lastFatal = closing
		if typ == 'Z' && s.readyForQuery() {
			s.log.Info("closing session for shutdown at the end of its transaction")
			s.adminStop.Store(true)
			s.cw.Flush()
			s.sendClient(shutdownError())
			return
		}
		if s.ur.idle() {
			if err := s.cw.Flush(); err != nil {
				return
			}
		}
	}
}

// upstreamMessage relays one upstream message whose header has been read,
// as gate says: forwarded, hidden (it answers an injected message) or
// replaced. closing reports an ErrorResponse of severity FATAL or PANIC:
// the server is about to close.
func (s *session) upstreamMessage(typ byte, n int) (closing bool, err error) {
	r := gate.Reply{Type: typ}
	var body []byte
	switch typ {
	case 'E', 'Z', 'S':
		if body, err = s.ur.body(n); err != nil {
			return false, err
		}
		if r, err = decodeReply(typ, body); err != nil {
			return false, err
		}
		closing = r.Error != nil && (r.Error.Severity == "FATAL" || r.Error.Severity == "PANIC")
	}
	s.gateMu.Lock()
	v := s.gate.Server(r)
	settled := s.gate.Settled()
	s.gateMu.Unlock()
	if typ == 'Z' {
		s.stateMu.Lock()
		s.txStatus = r.Status
		s.inflight = max(s.inflight-1, 0)
		s.stateMu.Unlock()
	}
	if settled {
		select {
		case s.settled <- struct{}{}:
		default:
		}
	}
	switch v.Act {
	case gate.Fail:
		return false, &replyError{reason: v.Reason}
	case gate.Replace:
		s.srv.metrics.refusal(v.Error.Code)
		return closing, s.writeClient(v.Error)
	case gate.Hide:
		if body == nil {
			return false, s.ur.discard(n)
		}
		return closing, nil
	}
	if body != nil {
		return closing, s.writeRaw(s.cw, typ, body)
	}
	if err := writeHeader(s.cw, typ, n); err != nil {
		return false, err
	}
	return false, s.ur.copyBody(s.cw, n)
}

// decodeReply decodes what gate needs of an ErrorResponse, ReadyForQuery
// or ParameterStatus.
func decodeReply(typ byte, body []byte) (gate.Reply, error) {
	r := gate.Reply{Type: typ}
	switch typ {
	case 'E':
		var e pgproto3.ErrorResponse
		if err := e.Decode(body); err != nil {
			return r, err
		}
		r.Error = &e
	case 'Z':
		if len(body) != 1 {
			return r, fmt.Errorf("%w: ReadyForQuery of %d bytes", errProtocol, len(body))
		}
		r.Status = body[0]
	case 'S':
		var ps pgproto3.ParameterStatus
		if err := ps.Decode(body); err != nil {
			return r, err
		}
		r.Param, r.Value = ps.Name, ps.Value
	}
	return r, nil
}

// replyError is a server reply gate could not match to what was sent: the
// session ends rather than shift every later answer by one.
type replyError struct{ reason string }

func (e *replyError) Error() string { return "unmatched server reply: " + e.reason }

// readyForQuery is called after a ReadyForQuery was relayed: it reports
// whether the session should now end for a shutdown.
func (s *session) readyForQuery() bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.draining && s.inflight == 0 && s.txStatus == 'I'
}

func (s *session) writeUpstream(msg pgproto3.FrontendMessage) error {
	buf, err := msg.Encode(s.encBuf[:0])
	if err != nil {
		return err
	}
	s.encBuf = buf
	if _, err = s.uw.Write(buf); err != nil {
		return err
	}
	s.sent(buf[0])
	return nil
}

func (s *session) writeRaw(w *bufio.Writer, typ byte, body []byte) error {
	if err := writeHeader(w, typ, len(body)); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

func (s *session) writeClient(msg pgproto3.BackendMessage) error {
	buf, err := msg.Encode(nil)
	if err != nil {
		return err
	}
	_, err = s.cw.Write(buf)
	return err
}

// sendClient writes msg to the client directly and flushes; used on error
// paths where the buffered writer may not exist yet.
func (s *session) sendClient(msg pgproto3.BackendMessage) {
	buf, err := msg.Encode(nil)
	if err != nil {
		return
	}
	if s.cw != nil {
		s.cw.Write(buf)
		s.cw.Flush()
		return
	}
	s.client.SetWriteDeadline(time.Now().Add(time.Second))
	s.client.Write(buf)
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed)
}
