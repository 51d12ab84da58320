package pgwire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Server connection reuse in session mode (Config.Reuse), as PgBouncer's
// session mode does it. The proxy authenticates the client itself, as in
// transaction pool mode, and gives it, for its whole session, a server
// connection of its key (database, user and every other startup
// parameter, so that the session's defaults are the client's own): one an
// earlier client left, or a new one. The session is relayed as any in
// session mode: the gate reads the server's settings, nothing is tracked
// for it.
//
// When the client leaves, the connection is kept only if the server is
// idle and nothing of the session is unanswered, unsent or unread, and the
// session's defaults held no fencing token (reusable; only the event loop
// keeps one, looped.keepsUpstream, the goroutine relay closes it). A
// Terminate is then not forwarded. Once no cancel request of the client's
// can still reach the backend, DISCARD ALL resets it (settings, fencing
// ones included, back to the startup values; prepared statements,
// cursors, temporary tables, advisory locks and LISTENs gone), and a
// connection that answers anything but DISCARD ALL's CommandComplete and
// ReadyForQuery 'I' is closed. A kept connection that has anything to read
// when a client would get it has ended (quiet) and is closed instead; and
// one is neither kept nor given while a role or database setting of
// lock.* applies to its user and database (noFencingDefaults): a new
// backend would start with it, DISCARD ALL goes back to what this one
// started with.

// reusedConn is a session's server connection under Config.Reuse.
type reusedConn struct {
	c *pool.Conn
	// fd is the socket the event loop kept, the session over, for the
	// next client; -1 when it closed it. Set by the loop before it lets
	// the session go (lp.done).
	fd int
	// defaultToken: the session's defaults (startup parameters, role and
	// database settings) held a fencing token when it began. Its
	// connection is not kept: DISCARD ALL would bring the token back for
	// the next client after an ALTER ROLE … RESET had withdrawn it, and a
	// token in the startup parameters is one holder's, whose key no other
	// client shares. (noFencingDefaults finds it again after DISCARD ALL,
	// and a resource too; this spares the reset.)
	defaultToken bool
	// unclear: a cancel request's delivery is not known (forwardCancel
	// failed): the backend may still be signalled, so it is not kept.
	unclear atomic.Bool

	mu      sync.Mutex
	ended   bool           // the session is over: no cancel request is forwarded
	cancels sync.WaitGroup // cancel requests being forwarded to the backend
}

// cancelling counts a cancel request about to be forwarded; false when the
// session is over (the backend may be another client's soon).
func (r *reusedConn) cancelling() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	r.cancels.Add(1)
	return true
}

// end stops cancel requests, and waits for those being forwarded: when
// it returns, the backend has been signalled by every one of them.
func (r *reusedConn) end() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.cancels.Wait()
}

// served marks a kept connection that served a client (pool.Conn.Borrower).
type served struct{}

// newReusePool returns the pool of session mode's kept server connections
// (cfg.Reuse set), logging in with the passwords auth has. Each session
// holds one, and max_client_conns bounds the sessions: the pool bounds
// only the idle ones, pool_size of them over all keys (the one idle
// longest is closed first), and their idle time and age.
func newReusePool(cfg *Config, auth func() *clientauth.File) *pool.Pool {
	pc := cfg.Reuse
	p, err := pool.New(pool.Config{
		Dial:          poolDial(cfg, auth),
		Size:          math.MaxInt32,
		MaxIdle:       pc.size(),
		DropEmptyKeys: true,
		IdleTimeout:   orDefault(pc.IdleTimeout, DefaultPoolIdleTimeout),
		Lifetime:      orDefault(pc.Lifetime, DefaultPoolLifetime),
		DialTimeout:   cfg.dialTimeout(),
	})
	if err != nil {
		panic("pgwire: " + err.Error()) // every setting above is valid
	}
	return p
}

// runReusing serves a client, past its startup checks, in session mode
// with server connection reuse: authentication by the proxy, a server
// connection of the client's key, the relay, and then the connection
// kept for the next client or closed.
func (s *session) runReusing(startup *pgproto3.StartupMessage) {
	user, db := startup.Parameters["user"], startup.Parameters["database"]
	if db == "" {
		db = user
	}
	if user == "" {
		s.sendClient(fatal(codeInvalidAuthorization, "fenceproxy: no PostgreSQL user name specified in startup packet"))
		return
	}
	if err := s.authenticate(s.cfg.Reuse, user); err != nil {
		s.log.Info("client authentication failed", "user", user, "err", err)
		return
	}
	key := pool.Key{Database: db, User: user, Startup: pool.StartupKey(startup.Parameters)}
	c, event, err := s.acquireServer(key)
	if err != nil {
		s.sendClient(s.reuseFailed(err))
		return
	}
	s.srv.metrics.serverReuse.WithLabelValues(event).Inc()
	s.srv.upstreamOK.Store(time.Now().UnixNano())
	s.reused = &reusedConn{c: c, fd: -1}
	defer s.releaseReused()
	s.attach(c.NetConn)
	s.gate = gate.NewSession(s.cfg.Fencing, startup.Parameters)
	if err := s.reuseLogin(); err != nil {
		s.log.Info("session start failed", "err", err)
		return
	}
	s.reused.defaultToken = s.gate.TokenMaybe()
	s.client.SetDeadline(time.Time{})
	s.upstream.SetDeadline(time.Time{})
	s.log.Debug("session ready", "user", user, "database", db, "server_reuse", event == reuseReused)
	s.proxy()
}

// acquireServer returns a server connection for key, within the client's
// startup_timeout: a kept one that is still quiet (a backend can end while
// it waits: its FATAL error and end are then unread on it) and would start
// the session as a new backend would (noFencingDefaults), else a new one;
// event says which.
func (s *session) acquireServer(key pool.Key) (*pool.Conn, string, error) {
	ctx, cancel := context.WithDeadline(context.Background(), s.startDeadline)
	defer cancel()
	for {
		c, err := s.srv.reuse.Acquire(ctx, key)
		switch {
		case err != nil:
			return nil, "", err
		case c.Borrower == nil:
			c.Borrower = served{}
			return c, reuseOpened, nil
		case !quiet(c.NetConn):
			s.log.Info("kept server connection ended while idle: closed", "pid", c.PID)
		default:
			err := noFencingDefaults(c, time.Until(s.startDeadline))
			if err == nil {
				return c, reuseReused, nil
			}
			s.log.Info("kept server connection not given", "pid", c.PID, "err", err)
		}
		s.srv.reuse.Release(c, false)
	}
}

// reuseFailed is what a client is told when no server connection could be
// had for it.
func (s *session) reuseFailed(err error) *pgproto3.ErrorResponse {
	if errors.Is(err, pool.ErrClosed) {
		return s.stopError()
	}
	s.srv.metrics.refusedConns.WithLabelValues(failUpstreamConnect).Inc()
	s.log.Warn("upstream connect failed", "err", err)
	return upstreamConnectError(err)
}

// reuseLogin tells the client what the server would after authentication:
// the settings the connection reports now (its startup values: the last
// client's changes were reset), a cancel key for its backend, then, past
// the gate's startup probe, ReadyForQuery.
func (s *session) reuseLogin() error {
	c := s.reused.c
	s.upstream.SetDeadline(time.Now().Add(s.cfg.startupTimeout()))
	for _, n := range sortedKeys(c.Params) {
		v := c.Params[n]
		s.gate.Server(gate.Reply{Type: 'S', Param: n, Value: v})
		if n == "application_name" {
			s.info.setAppName(v)
		}
		if err := s.writeClient(&pgproto3.ParameterStatus{Name: n, Value: v}); err != nil {
			return err
		}
	}
	s.info.setBackendPID(c.PID)
	s.key = s.srv.cancels.register(upstreamKey{addr: s.cfg.Upstream, pid: c.PID, secret: c.SecretKey, reused: s.reused})
	if err := s.writeClient(s.key); err != nil {
		return err
	}
	if err := s.startupProbe(); err != nil {
		return err
	}
	if err := s.writeClient(&pgproto3.ReadyForQuery{TxStatus: 'I'}); err != nil {
		return err
	}
	return s.cw.Flush()
}

// reusable reports whether the session, its client gone, leaves the
// server idle with nothing of its own in flight: no transaction, no COPY,
// no extended-protocol sequence without its Sync, every message sent
// answered (the gate's own too), and no end or FATAL error of the
// server's, shutdown, refusal or cancel request of unknown fate since;
// and whether its defaults held no fencing token. The caller owns the
// session's relay.
func (s *session) reusable() bool {
	r := s.reused
	if r == nil || r.defaultToken || r.unclear.Load() || s.lastFatal || s.copyIn || s.adminStop.Load() || s.quiet.Load() || s.extOpen.Load() {
		return false
	}
	if !s.gateSettled() {
		return false
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.proxying && !s.draining && s.txStatus == 'I' && s.inflight == 0
}

// releaseReused gives the session's server connection back, the session
// over: reset for the next client when the event loop kept it, else
// closed.
func (s *session) releaseReused() {
	r := s.reused
	s.srv.cancels.remove(s.key)
	r.end()
	if r.fd >= 0 && r.unclear.Load() {
		// A cancel request being forwarded when the loop kept the
		// connection failed since (end waited for it): the backend may
		// still be signalled.
		closeFD(r.fd)
		r.fd = -1
	}
	if r.fd < 0 {
		s.srv.metrics.serverReuse.WithLabelValues(reuseClosed).Inc()
		s.srv.reuse.Release(r.c, false)
		return
	}
	conn, err := fileConn(r.fd)
	if err == nil {
		r.c.NetConn = conn
		err = resetServer(r.c)
	}
	if err == nil {
		err = noFencingDefaults(r.c, resetTimeout)
	}
	if err != nil {
		s.log.Info("server connection not kept", "err", err)
		s.srv.metrics.serverReuse.WithLabelValues(reuseClosed).Inc()
		s.srv.reuse.Release(r.c, false)
		return
	}
	s.srv.metrics.serverReuse.WithLabelValues(reuseKept).Inc()
	s.srv.reuse.Release(r.c, true)
}

// terminateMsg is the protocol's Terminate.
var terminateMsg = []byte{'X', 0, 0, 0, 4}

// resetTimeout bounds each exchange of a leaving client's connection:
// resetServer's, then noFencingDefaults'.
const resetTimeout = 5 * time.Second

// discardAll is the Query resetServer sends.
var discardAll = func() []byte {
	b, _ := (&pgproto3.Query{String: "DISCARD ALL"}).Encode(nil)
	return b
}()

// resetServer runs DISCARD ALL on c and reads its answer: CommandComplete
// and ReadyForQuery 'I', with nothing after it, or it fails.
func resetServer(c *pool.Conn) error {
	var done bool
	return exchange(c, discardAll, resetTimeout, func(typ byte, body []byte) bool {
		ok := typ == 'C' && !done && string(body) == "DISCARD ALL\x00"
		done = done || ok
		return ok
	}, func() bool { return done })
}

// fencingSettings counts what would make the connection's next session
// start otherwise than a new backend's, or with fencing settings of its
// own: the role and database settings (ALTER ROLE … SET, ALTER DATABASE …
// SET, for all roles or databases or for these) of a lock.* setting, and,
// after DISCARD ALL, a token or resource the backend holds (those it
// started with: a setting withdrawn since comes back). Every name and
// operator is pg_catalog's: the user's search_path may hold its own.
var fencingSettings = func() []byte {
	b, _ := (&pgproto3.Query{String: `SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) AS c(v)
WHERE s.setdatabase OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid, (SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())])
AND s.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid, (SELECT oid FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) session_user)])
AND pg_catalog.starts_with(pg_catalog.lower(c.v), 'lock.'))
OPERATOR(pg_catalog.+) (COALESCE(pg_catalog.current_setting('lock.fencing_token', true), '') OPERATOR(pg_catalog.<>) ''
 OR COALESCE(pg_catalog.current_setting('lock.resource', true), '') OPERATOR(pg_catalog.<>) '')::pg_catalog.int4`}).Encode(nil)
	return b
}()

// noFencingDefaults fails when c's next session would not start as a new
// backend's, with no fencing setting (fencingSettings), or when the
// answer, within timeout, is not one row of one count.
func noFencingDefaults(c *pool.Conn, timeout time.Duration) error {
	var count string
	var described, completed bool
	err := exchange(c, fencingSettings, timeout, func(typ byte, body []byte) bool {
		switch {
		case typ == 'T' && !described:
			described = true
			return true
		case typ == 'D' && described && count == "":
			var d pgproto3.DataRow
			if d.Decode(body) != nil || len(d.Values) != 1 || len(d.Values[0]) == 0 {
				return false
			}
			count = string(d.Values[0])
			return true
		case typ == 'C' && count != "" && !completed:
			completed = true
			return true
		}
		return false
	}, func() bool { return completed })
	if err == nil && count != "0" {
		err = fmt.Errorf("%s fencing settings of the role or database, or held since the backend started", count)
	}
	return err
}

// exchange sends the Query q on c and reads its answer up to ReadyForQuery
// 'I', with nothing after it: reply, told each other message, says
// whether it is expected; complete, at the end, whether the answer was
// whole. A notice, a notification sent before an UNLISTEN, and the
// settings the server reports (kept in c.Params, for the next client) may
// come anywhere.
func exchange(c *pool.Conn, q []byte, timeout time.Duration, reply func(typ byte, body []byte) bool, complete func() bool) error {
	conn := c.NetConn
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(q); err != nil {
		return err
	}
	r := newReader(conn)
	for {
		typ, n, err := r.header()
		if err != nil {
			return err
		}
		if n > maxStartupLen {
			return fmt.Errorf("reply %q of %d bytes", typ, n)
		}
		body, err := r.body(n)
		if err != nil {
			return err
		}
		switch typ {
		case 'S':
			var ps pgproto3.ParameterStatus
			if err := ps.Decode(body); err != nil {
				return err
			}
			c.Params[ps.Name] = ps.Value
		case 'N', 'A':
		case 'Z':
			if !complete() || len(body) != 1 || body[0] != 'I' || !r.idle() {
				return fmt.Errorf("ReadyForQuery %q after an incomplete answer", body)
			}
			return conn.SetDeadline(time.Time{})
		case 'E':
			var e pgproto3.ErrorResponse
			if e.Decode(body) != nil {
				return errors.New("malformed ErrorResponse")
			}
			return fmt.Errorf("server error %s: %s", e.Code, e.Message)
		default:
			if !reply(typ, body) {
				return fmt.Errorf("reply %q", typ)
			}
		}
	}
}
