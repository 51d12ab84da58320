package pgwire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Transaction pool mode (Config.Pool). A pooled session authenticates its
// client itself (clientauth), and holds a server connection of the pool
// only while it needs one: from the first client message that needs the
// server (lend) to the ReadyForQuery 'I' that leaves the session idle,
// with nothing sent unanswered and no extended sequence open; then the
// upstream reader hands the connection back (pumpLent). Before a lent
// connection runs the client's first message, setup makes its reported
// settings the client's and prepares the client's statements it lacks
// (pooled_setup.go); statements have server names of their own
// (pooled_names.go).
//
// The client reader and the upstream reader agree on when the connection
// may go back through stateMu: the client reader marks each message it
// sends (writing), and the upstream reader, finding the session idle while
// a message is being sent, waits for it (releaseWanted, wrote) and looks
// again.

// pooledState is a pooled session's state across lendings.
type pooledState struct {
	key pool.Key
	ctx context.Context // ends with the session: bounds waiting for the pool
	// Under session.stateMu: lent, the connection lent now (nil between
	// lendings); writing, the client reader is sending a message to it;
	// releaseWanted, the upstream reader waits for that to end (wrote);
	// broken, a message to it was left unfinished (the client left in its
	// middle, or writing failed): it never goes back to the pool, where
	// the next client's bytes would be read as the rest of it.
	lent          *pool.Conn
	writing       bool
	releaseWanted bool
	broken        bool // the session closed lent: it must not go back
	// cur is the connection the client reader sends the current message
	// to: lent when the message began (the client reader's alone; lent
	// may be cleared meanwhile when the lending ends with an error).
	cur   *pool.Conn
	wrote chan struct{}
	// cancels counts the cancel requests being forwarded to the backend
	// lent now (pooledCancelKey): the lending waits for them before the
	// connection goes back, so that none reaches another client's
	// statement.
	cancels sync.WaitGroup
	// cancelling counts them too, under session.stateMu, for an event
	// loop, which cannot wait: it hands the release to a goroutine.
	cancelling int
	done       chan struct{} // closed when the last lending's upstream reader has ended
	// lendings hands each lending to relayLendings.
	lendings chan lending

	// params is the client's view of the settings the server reports
	// (ParameterStatus), which setup restores on a lent connection.
	// Written by the upstream reader while lent, by the client reader
	// between lendings. settings is its settingsKey, "" once it changed.
	params   map[string]string
	settings string
	// stmts are the client's named protocol-level statements by server
	// name, as their Parse went upstream; the gate says which exist
	// (gate.Session.PooledStatements). unnamed is the last Parse of the
	// unnamed statement sent (or, the client's own, unnamedBody, its body
	// as sent, decoded when setup needs it), and unnamedServer its
	// Msg.Server.
	stmts         map[string]*pgproto3.Parse
	unnamed       *pgproto3.Parse
	unnamedBody   []byte
	unnamedServer string
	// ended: the upstream reader of a lending ended the session, and told
	// the client why.
	ended atomic.Bool
}

// lentConn is what pgwire keeps with a server connection of the pool
// (pool.Conn.Borrower): its buffered reader and writer, and the server
// name of the Parse that defined its unnamed statement.
type lentConn struct {
	r       *reader
	w       *bufio.Writer
	unnamed string
	swept   int // len(Prepared) after the last sweep of dead statements
	// settings is settingsKey of the connection's Params; "" when they
	// changed since it was taken.
	settings string
	// fd is NetConn's socket, for an event loop (-1: not looked up yet;
	// -2: none the ring can relay, a TLS connection).
	// Not a duplicate: the connection stays the pool's, and the loop
	// never has an operation on it once it is released.
	fd int
	// lio is what an event loop relays the connection with (made at its
	// first lending in a loop).
	lio *loopIO
}

// loopIO is a lent connection's reader, writer and receive buffer in an
// event loop, kept with the connection rather than the session: a pool's
// few connections hold them, not its many clients (a pooled client in a
// loop holds only its own side's buffers). They hold nothing between
// lendings.
type loopIO struct {
	r  *reader
	w  *bufio.Writer
	rx []byte
}

func borrowed(c *pool.Conn) *lentConn {
	if lc, ok := c.Borrower.(*lentConn); ok {
		return lc
	}
	lc := &lentConn{r: newReader(c.NetConn), w: bufio.NewWriterSize(toUpstream(c.NetConn), ioBufferSize), fd: -1}
	c.Borrower = lc
	return lc
}

// settable are the settings PostgreSQL 15 reports that a client can set:
// setup restores them (their names as ParameterStatus spells them).
var settable = []string{
	"application_name", "client_encoding", "DateStyle", "default_transaction_read_only",
	"IntervalStyle", "standard_conforming_strings", "TimeZone",
}

// settableName returns the ParameterStatus name of the setting a startup
// parameter k sets, "" when it is not one of settable.
func settableName(k string) string {
	for _, n := range settable {
		if strings.EqualFold(k, n) {
			return n
		}
	}
	return ""
}

// pooledStartupParam says whether a startup parameter (past
// gate.PooledStartup, which took the fencing settings out) can be kept in
// transaction pool mode: the settings setup restores, and
// extra_float_digits at a value that prints floats as the default does.
func pooledStartupParam(k, v string) bool {
	switch {
	case k == "user" || k == "database" || settableName(k) != "":
		return true
	case strings.EqualFold(k, "extra_float_digits"):
		// Since PostgreSQL 12 any value above 0 prints the shortest exact
		// form, as the default 1 does (drivers send 2 or 3).
		return v == "1" || v == "2" || v == "3"
	}
	return false
}

// runPooled serves a client, past its startup checks, in transaction pool
// mode: authentication by the proxy, the first parameters from a lent
// connection, then the relay.
func (s *session) runPooled(startup *pgproto3.StartupMessage) {
	_, rest, _ := gate.PooledStartup(startup.Parameters) // CheckStartup accepted them
	user, db := rest["user"], rest["database"]
	if db == "" {
		db = user
	}
	if user == "" {
		s.sendClient(fatal(codeInvalidAuthorization, "fenceproxy: no PostgreSQL user name specified in startup packet"))
		return
	}
	for _, k := range sortedKeys(rest) {
		if !pooledStartupParam(k, rest[k]) {
			s.log.Info("startup parameter refused in transaction pool mode", "param", k)
			e := fatal(codeFeatureNotSupported, fmt.Sprintf("fenceproxy: startup parameter %s is not supported in transaction pool mode", k))
			e.Hint = "Set it for the role or database (ALTER ROLE … SET), or inside each transaction with SET LOCAL; or connect to a proxy in session pool mode."
			s.sendClient(e)
			return
		}
	}
	if err := s.authenticate(s.cfg.Pool, user); err != nil {
		s.log.Info("client authentication failed", "user", user, "err", err)
		return
	}
	s.cr, s.cw = newReader(s.client), bufio.NewWriterSize(toClient(s.client), ioBufferSize)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.pooled = &pooledState{key: pool.Key{Database: db, User: user}, ctx: ctx, wrote: make(chan struct{}, 1), lendings: make(chan lending),
		params: map[string]string{}, stmts: map[string]*pgproto3.Parse{}}
	defer s.srv.cancels.remove(s.key)
	defer s.forgetStatements()
	s.gate = gate.NewSession(s.cfg.Fencing, startup.Parameters)
	if err := s.pooledLogin(rest); err != nil {
		return
	}
	s.log.Debug("session ready", "user", user, "database", db, "pool_mode", "transaction")
	over, handed := s.relayPooledInLoop()
	if over {
		return
	}
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		s.relayLendings(handed)
	}()
	s.proxyPooled()
	<-relayed
}

// lending is a server connection lent to the session, for its upstream
// reader (relayLendings) to relay until done.
type lending struct {
	c    *pool.Conn
	done chan struct{}
}

// relayLendings is a pooled session's upstream reader: it relays each
// lending (pumpLent) until the session ends. One goroutine for the
// session's life, not one per lending: a new goroutine's stack grows
// again at every transaction.
//
// first, when set, is the lending in progress when an event loop handed
// the session over; the output the loop could not write to the client yet
// goes first.
func (s *session) relayLendings(first *lending) {
	flushPending(s.cPending) // a failure means the client is gone: its reader ends the session
	if first != nil {
		s.pumpLent(first.c, first.done)
	}
	for {
		select {
		case l := <-s.pooled.lendings:
			s.pumpLent(l.c, l.done)
		case <-s.closed:
			return
		}
	}
}

// authenticate verifies the client is user, as pc's AuthMethod says
// against its Auth file; trust with no file lets every user in.
func (s *session) authenticate(pc *PoolConfig, user string) error {
	if pc.Auth == nil {
		if pc.AuthMethod != clientauth.Trust {
			s.sendClient(fatal(codeInvalidPassword, `password authentication failed for user "`+user+`"`))
			return errors.New("no auth_file")
		}
		buf, _ := (&pgproto3.AuthenticationOk{}).Encode(nil)
		_, err := s.client.Write(buf)
		return err
	}
	return clientauth.Authenticate(s.client, user, pc.AuthMethod, pc.Auth)
}

// pooledLogin tells the client what a server would after authentication:
// the reported settings, from a lent connection set to the client's
// startup values, a cancel key of the proxy's own, and ReadyForQuery.
func (s *session) pooledLogin(startup map[string]string) error {
	c, err := s.acquire()
	if err != nil {
		return err
	}
	for k, v := range startup {
		if n := settableName(k); n != "" {
			s.pooled.params[n] = v
		}
	}
	for _, n := range settable {
		if _, ok := s.pooled.params[n]; !ok {
			// The server's defaults, not c.Params: the last borrower's SETs.
			// (PostgreSQL before 14 reports no default_transaction_read_only.)
			if v, reported := c.Defaults[n]; reported {
				s.pooled.params[n] = v
			}
		}
	}
	if err := s.setup(c, true, true); err != nil {
		return err
	}
	// The probe asks whether the client's role or database sets a token
	// for every session (a token on the shared connection is never read,
	// and a check then refuses to run beside it).
	lc := borrowed(c)
	s.ur, s.uw = lc.r, lc.w
	if err := s.startupProbe(); err != nil {
		s.srv.pool.Release(c, false)
		return err
	}
	s.srv.pool.Release(c, lc.r.idle())
	for _, n := range sortedKeys(c.Params) {
		v := c.Params[n]
		if settableName(n) != "" {
			v = s.pooled.params[n]
		}
		s.gate.Server(gate.Reply{Type: 'S', Param: n, Value: v})
		if n == "application_name" {
			s.info.setAppName(v)
		}
		if err := s.writeClient(&pgproto3.ParameterStatus{Name: n, Value: v}); err != nil {
			return err
		}
	}
	s.key = s.srv.cancels.register(upstreamKey{pid: uint32(s.id), secret: make([]byte, 4), pooled: s})
	if err := s.writeClient(s.key); err != nil {
		return err
	}
	// Past startup before the client can see it is: a shutdown or an
	// administrator's terminate from now on tells it 57P01 (stopUpstream
	// wakes the client reader with a read deadline: the startup's goes
	// first).
	s.client.SetDeadline(time.Time{})
	if !s.startProxying() {
		return errStopped
	}
	if err := s.writeClient(&pgproto3.ReadyForQuery{TxStatus: 'I'}); err != nil {
		return err
	}
	return s.cw.Flush()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// acquire gets a server connection from the pool for the session's key;
// on failure the client has been told why.
func (s *session) acquire() (*pool.Conn, error) {
	c, err := s.srv.pool.Acquire(s.pooled.ctx, s.pooled.key)
	if err != nil {
		s.sendClient(s.acquireFailed(err))
	}
	return c, err
}

// errLeftQueued ends a session whose client left while it waited in the
// pool's queue.
var errLeftQueued = errors.New("client left while waiting for a server connection")

// acquireForMessage is acquire for a client message whose header the relay
// has read, and whose n-byte body it has not: while the session waits in the pool's queue, what its client
// sends is read on into the client reader's buffer (watchQueued), and a
// client that leaves (its end, or a Terminate) is dropped from the queue
// with nothing it sent run, as the event loop drops it and PgBouncer does.
func (s *session) acquireForMessage(n int) (*pool.Conn, error) {
	granted := make(chan pool.Grant, 1)
	g, t := s.srv.pool.AcquireAsync(s.pooled.key, func(g pool.Grant) { granted <- g })
	if t != nil {
		var err error
		if g, err = s.waitQueued(t, granted, n); err != nil {
			return nil, err
		}
	}
	c, err := g.Conn, g.Err
	if err == nil && g.Dial {
		c, err = s.srv.pool.DialSlot(s.pooled.ctx, s.pooled.key)
	}
	if err != nil {
		s.sendClient(s.acquireFailed(err))
	}
	return c, err
}

// waitQueued waits for the pool's answer to a queued acquire, watching the
// client meanwhile. It fails, having given back what the pool gave, with
// errLeftQueued when the client left, and with errStopped (the client
// told) when the proxy stops the session.
func (s *session) waitQueued(t *pool.Ticket, granted chan pool.Grant, skip int) (pool.Grant, error) {
	watched := make(chan error, 1)
	go func() { watched <- s.watchQueued(skip) }()
	watch, watching := watched, true
	var g pool.Grant
	var err error
wait:
	for {
		select {
		case g = <-granted:
			break wait
		case err = <-watch:
			watching = false
			if err != nil || s.adminStop.Load() {
				break wait
			}
			watch = nil // the buffer is full: the pool's answer alone is waited for
		case <-s.pooled.ctx.Done():
			err = s.pooled.ctx.Err()
			break wait
		}
	}
	stopped := s.adminStop.Load()
	if (err != nil || stopped) && !s.srv.pool.CancelWait(t) && g == (pool.Grant{}) {
		g = <-granted // it came first
	}
	s.srv.pool.ReportWait(s.pooled.key, g)
	if watching {
		// End the watch's read, and wait for it: the client reader is this
		// goroutine's again.
		s.client.SetReadDeadline(time.Now())
		<-watched
	}
	s.client.SetReadDeadline(time.Time{})
	if stopped = s.adminStop.Load(); stopped {
		s.client.SetReadDeadline(time.Now()) // a stop's (stopUpstream) stays
	}
	switch {
	case err == nil && !stopped:
		return g, nil
	case err == errLeftQueued:
		s.log.Debug("client left while waiting for a server connection")
	case stopped:
		s.sendClient(s.stopError())
		err = errStopped
	default:
		s.sendClient(s.acquireFailed(err))
	}
	s.srv.pool.Forgo(s.pooled.key, g)
	return pool.Grant{}, err
}

// watchQueued reads on, into the client reader's buffer, what the client
// of a session waiting in the pool's queue sends, until the buffer is full
// or a read fails, past the skip bytes of the message being relayed. It
// returns errLeftQueued when the client left (its end, or a Terminate
// buffered), or nil: a read ended by a deadline (the wait's
// end, or a stop) is not the client's leaving.
func (s *session) watchQueued(skip int) error {
	r := s.cr
	for !r.buffersTerminate(skip) {
		if r.w-r.r >= len(r.buf) {
			return nil // full: nothing more is read until a connection is lent
		}
		if err := r.ensure(r.w - r.r + 1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return errLeftQueued
		}
	}
	return errLeftQueued
}

// acquireFailed returns what a client is told when no server connection
// could be had for it (err from the pool).
func (s *session) acquireFailed(err error) *pgproto3.ErrorResponse {
	switch {
	case errors.Is(err, pool.ErrWaitTimeout):
		s.srv.metrics.refusedConns.WithLabelValues(failPoolWait).Inc()
		s.log.Warn("no server connection within query_wait_timeout", "user", s.pooled.key.User, "database", s.pooled.key.Database)
		return fatal(codeTooManyConnections, "fenceproxy: no server connection became free within query_wait_timeout")
	case errors.Is(err, pool.ErrClosed), s.pooled.ctx.Err() != nil:
		return s.stopError()
	default:
		s.srv.metrics.refusedConns.WithLabelValues(failUpstreamConnect).Inc()
		s.log.Warn("upstream connect failed", "err", err)
		return upstreamConnectError(err)
	}
}

// upstreamConnectError is what a client is told when the server cannot be
// reached, or refused the proxy's login: the server's own error when it
// sent one (a missing database, a bad password in the auth file).
func upstreamConnectError(err error) *pgproto3.ErrorResponse {
	e := fatal(codeCannotConnect, "fenceproxy: cannot connect to the upstream server: "+err.Error())
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) && pe.SQLState() != "" {
		e.Code = pe.SQLState()
	}
	return e
}

// proxyPooled relays a pooled session, past startup (pooledLogin), until
// the client leaves; see proxy for the error paths, which are the same
// once no upstream reader runs.
func (s *session) proxyPooled() {
	err := s.pumpPooled()
	var ce *clientError
	switch {
	case errors.As(err, &ce):
		s.srv.metrics.refusedConns.WithLabelValues(failProtocol).Inc()
		s.log.Info("client message refused", "err", err)
		s.quiet.Store(true)
		s.closeLent()
		s.waitLending()
		s.cw.Reset(toClient(s.client))
		s.sendClient(fatal(ce.code, ce.msg))
	case s.adminStop.Load() && s.lentNow() == nil:
		s.waitLending()
		if !s.pooled.ended.Load() { // the last lending's reader did not tell the client already
			s.sendClient(s.stopError())
		}
	}
	s.close()
	s.waitLending()
}

// pumpPooled reads client messages, lending a server connection for each
// that needs one and has none.
func (s *session) pumpPooled() error {
	relayed := byteCount{counter: s.srv.metrics.bytesUpstream}
	defer relayed.flush()
	if err := s.flushHandedLending(); err != nil {
		return err
	}
	if over, err := s.resumeFromLoop(); over {
		return err
	}
	for {
		typ, n, err := s.cr.header()
		if err != nil {
			if s.adminStop.Load() {
				return nil
			}
			return s.clientReadFailed(err)
		}
		if err := s.checkClientMessage(typ, n); err != nil {
			return err
		}
		if typ == 'X' {
			// What the client sent before it left goes upstream (a COMMIT
			// and then a Terminate, read at once, must commit).
			s.terminated.Store(true)
			s.beginWrite(typ)
			var err error
			if s.pooled.cur != nil {
				err = s.uw.Flush()
			}
			s.endWrite(err != nil)
			return nil
		}
		if !s.beginWrite(typ) {
			// No server connection is lent, and the message needs none:
			// a Flush with nothing to flush, copy messages outside COPY
			// (which the server ignores).
			if err := s.cr.discard(n); err != nil {
				return s.clientReadFailed(err)
			}
			continue
		}
		if s.pooled.cur == nil {
			keep := typ == 'Q' || typ == 'P' && n > 0 && s.cr.peekByte() == 0
			if err := s.lend(keep, n); err != nil {
				return nil // the client has been told
			}
		}
		stop, err := s.clientStep(typ, n, &relayed)
		if err == nil && !stop && s.cr.idle() {
			relayed.flush()
			err = s.uw.Flush()
		}
		s.endWrite(stop || err != nil)
		if stop || err != nil {
			return err
		}
	}
}

// flushHandedLending writes, for a lending an event loop handed over
// (takeBackPooled, which marked the client reader writing), what the loop
// could not send yet and what s.uw holds, then lets the upstream reader
// hand the connection back: no byte of this client's may follow it to the
// next borrower.
func (s *session) flushHandedLending() error {
	if s.uPending == nil {
		return nil
	}
	err := flushPending(s.uPending)
	if err == nil {
		err = s.uw.Flush()
	}
	s.uPending = nil
	s.endWrite(err != nil)
	if err != nil {
		return &writeError{upstream: true, err: err}
	}
	return nil
}

// beginWrite marks the start of sending a client message of type typ, and
// reports false when it needs no server connection and none is lent (the
// message is then dropped).
func (s *session) beginWrite(typ byte) bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if s.pooled.lent == nil {
		switch typ {
		case 'H', 'd', 'c', 'f':
			return false
		}
	}
	s.pooled.writing, s.pooled.cur = true, s.pooled.lent
	return true
}

// endWrite marks the end of sending a client message, waking the upstream
// reader if it waits to hand the connection back. unfinished: the message
// may not have been written whole, and the connection is broken.
func (s *session) endWrite(unfinished bool) {
	s.stateMu.Lock()
	s.pooled.writing = false
	s.pooled.broken = s.pooled.broken || unfinished
	wanted := s.pooled.releaseWanted
	s.pooled.releaseWanted = false
	s.stateMu.Unlock()
	if wanted {
		if !unfinished && s.uw.Buffered() > 0 {
			s.uw.Flush()
		}
		select {
		case s.pooled.wrote <- struct{}{}:
		default:
		}
	}
}

// lend gets a server connection for the session, sets it up for the
// client, and starts the upstream reader that relays it until it goes
// back. keepUnnamed: the client message that needs it replaces the
// unnamed statement (a Query, a Parse of it); n: that message's body
// length (its header is read, its body not yet).
func (s *session) lend(keepUnnamed bool, n int) error {
	if s.adminStop.Load() {
		s.sendClient(s.stopError())
		return errStopped
	}
	s.waitLending()
	c, err := s.acquireForMessage(n)
	if err != nil {
		return err
	}
	if err := s.setup(c, keepUnnamed, false); err != nil {
		return err
	}
	lc := borrowed(c)
	done := make(chan struct{})
	s.stateMu.Lock()
	if s.isClosed() {
		// The session's close has begun and may have read s.upstream
		// already: nothing would close c.
		s.stateMu.Unlock()
		s.srv.pool.Release(c, lc.r.idle())
		return net.ErrClosed
	}
	s.pooled.lent, s.pooled.cur, s.pooled.done, s.pooled.broken = c, c, done, false
	s.upstream, s.ur, s.uw = c.NetConn, lc.r, lc.w
	s.stateMu.Unlock()
	s.info.setBackendPID(c.PID)
	select {
	case s.pooled.lendings <- lending{c, done}: // relayLendings waits for it: the last lending is done
		return nil
	case <-s.closed:
		s.stateMu.Lock()
		s.pooled.lent, s.upstream = nil, nil
		s.stateMu.Unlock()
		s.srv.pool.Release(c, false) // close may have closed it
		close(done)
		return net.ErrClosed
	}
}

var errStopped = errors.New("session stopped")

// waitLending waits until the last lending's upstream reader has ended.
func (s *session) waitLending() {
	s.stateMu.Lock()
	done := s.pooled.done
	s.stateMu.Unlock()
	if done != nil {
		<-done
	}
}

// lentNow returns the connection lent now, or nil.
func (s *session) lentNow() *pool.Conn {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.pooled.lent
}

// closeLent closes the connection lent now, if any: its upstream reader
// then ends and the pool replaces it.
func (s *session) closeLent() {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if c := s.pooled.lent; c != nil {
		s.pooled.broken = true
		c.NetConn.Close()
	}
}

// pumpLent relays the lent connection c to the client until it goes back
// to the pool (at an idle ReadyForQuery) or the session ends.
func (s *session) pumpLent(c *pool.Conn, done chan struct{}) {
	reusable := false
	relayed := byteCount{counter: s.srv.metrics.bytesToClient}
	flushed := true
	flush := func() {
		relayed.flush()
		s.cw.Flush() // a failure means the client is gone: its reader ends the session
		flushed = true
	}
	defer func() {
		s.stateMu.Lock()
		s.pooled.lent, s.upstream = nil, nil
		s.stateMu.Unlock()
		s.info.setBackendPID(0)
		s.pooled.cancels.Wait()
		s.srv.pool.Release(c, reusable)
		if !flushed {
			flush() // the last ReadyForQuery, once the connection is back
		}
		close(done)
	}()
	defer relayed.flush()
	for {
		typ, n, err := s.ur.header()
		if err != nil {
			s.upstreamReadFailed(err)
			s.endFromLending()
			return
		}
		if s.upstreamStep(typ, n, &relayed) {
			s.endFromLending()
			return
		}
		if typ == 'Z' {
			flushed = false
			if s.returnable(flush) {
				// Back in the pool before the client sees this
				// ReadyForQuery (unless the client reader was sending a
				// message): a client that leaves at once (Terminate)
				// cannot close the connection under the release, and one
				// that saw it finds the connection free.
				reusable = s.ur.drained()
				return
			}
		}
		if s.ur.idle() || typ == 'Z' {
			relayed.flush()
			flushed = true
			if err := s.cw.Flush(); err != nil {
				s.endFromLending()
				return
			}
		}
	}
}

// endFromLending ends the session from its upstream reader, which has
// told the client why (or the client is gone).
func (s *session) endFromLending() {
	s.pooled.ended.Store(true)
	if !s.quiet.Load() {
		s.close()
	}
}

// returnable reports, after a ReadyForQuery, whether the lent connection
// goes back now: the session is idle (status 'I', nothing sent
// unanswered, no extended sequence open), and it has not closed the
// connection (the session's close, which closes s.closed first, or
// closeLent and stopUpstream, which mark it broken). When the client
// reader is sending a message meanwhile, it calls beforeWait (once),
// waits for that message and looks again.
func (s *session) returnable(beforeWait func()) bool {
	for {
		settled := s.gateSettled()
		s.stateMu.Lock()
		idle := settled && s.txStatus == 'I' && s.inflight == 0 && !s.extOpen.Load() && !s.pooled.broken && !s.isClosed()
		if !idle {
			s.stateMu.Unlock()
			return false
		}
		if !s.pooled.writing {
			if s.uw.Buffered() > 0 {
				// A message that gets no reply (Flush, copy data outside
				// COPY) is the client's to the end: not the next borrower's.
				s.uw.Flush()
			}
			s.pooled.lent, s.upstream = nil, nil
			s.stateMu.Unlock()
			return true
		}
		s.pooled.releaseWanted = true
		s.stateMu.Unlock()
		if beforeWait != nil {
			beforeWait()
			beforeWait = nil
		}
		select {
		case <-s.pooled.wrote:
		case <-s.closed:
			return false
		}
	}
}

// isClosed reports whether the session's close has begun.
func (s *session) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// paramReported follows a ParameterStatus relayed from the lent
// connection: the connection's setting and the client's view both change.
func (s *session) paramReported(name, value string) {
	if c := s.pooled.lent; c != nil {
		c.Params[name] = value
		borrowed(c).settings = ""
	}
	if settableName(name) != "" {
		s.pooled.params[name] = value
		s.pooled.settings = ""
	}
}

// pooledCancelKey returns the key of the backend lent to s now, and keeps
// it lent to s until done is called, once the cancel has been forwarded:
// a cancel that reached the server after the connection went back would
// cancel the next client's statement. (The server drops a cancel that
// arrives while its backend waits for a command.)
func (s *session) pooledCancelKey() (key upstreamKey, done func(), ok bool) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	c := s.pooled.lent
	if c == nil {
		return upstreamKey{}, nil, false
	}
	s.pooled.cancels.Add(1)
	s.pooled.cancelling++
	done = func() {
		s.stateMu.Lock()
		s.pooled.cancelling--
		lp := s.lp
		if s.pooled.cancelling > 0 {
			lp = nil
		}
		s.stateMu.Unlock()
		s.pooled.cancels.Done()
		if lp != nil {
			lp.post(lp.cancelDone) // its release may wait for this
		}
	}
	return upstreamKey{addr: s.cfg.Upstream, pid: c.PID, secret: c.SecretKey}, done, true
}
