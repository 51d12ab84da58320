package pgwire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Server. The zero value of each optional field is
// documented beside it.
type Config struct {
	// Upstream is the PostgreSQL server's host:port. Required.
	Upstream string
	// DialTimeout bounds connecting to the upstream; zero means 10s.
	DialTimeout time.Duration
	// StartupTimeout bounds how long a client may take to send its startup
	// packet and finish authenticating; zero means 10s (like PgBouncer's
	// client_login_timeout... which defaults to 60s; we are stricter).
	StartupTimeout time.Duration
	// MaxClientConns bounds the client connections served at once; a client
	// beyond it is answered 53300 after its startup packet and closed. Zero
	// means DefaultMaxClientConns. Cancel requests are always served.
	MaxClientConns int
	// MaxMessageBytes bounds the client messages the proxy decodes whole
	// (Query, Parse, Describe, Close, Execute, and the names at the head of
	// a Bind); a longer one is answered 08P01 and the session closed. Zero
	// means DefaultMaxMessageBytes. Messages the proxy streams (Bind
	// parameters, CopyData) are bounded only by PostgreSQL's own 1 GiB.
	MaxMessageBytes int
	// TLS, when non-nil, is offered to clients that send SSLRequest; it
	// must carry a certificate (Certificates or GetCertificate, which is
	// asked at every handshake, so a reloaded certificate applies to new
	// sessions). Nil answers SSLRequest 'N'.
	TLS *tls.Config
	// RequireClientTLS refuses clients that did not set up TLS with 28000
	// after their startup packet. Cancel requests are served either way.
	RequireClientTLS bool
	// UpstreamTLS is the upstream connection's TLS mode; "" is disable.
	UpstreamTLS UpstreamTLS
	// UpstreamRootCAs verify the upstream under UpstreamTLSVerifyFull;
	// nil means the system's roots.
	UpstreamRootCAs *x509.CertPool
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Fencing is the fencing policy; nil means no protected tables and no
	// default resource (tokens are still checked).
	Fencing *gate.Config
	// Metrics receives the proxy's Prometheus metrics (see doc.go); nil
	// keeps them unregistered.
	Metrics prometheus.Registerer

	// RefusalLogRate and RefusalLogBurst bound the "fencing refused a
	// statement" log lines of all sessions together: a token bucket of
	// RefusalLogBurst lines refilled at RefusalLogRate lines per second.
	// Lines beyond it are counted (fenceproxy_refusal_log_suppressed_total)
	// and reported every 10s in one line. Zero means
	// DefaultRefusalLogRate and DefaultRefusalLogBurst.
	RefusalLogRate  float64
	RefusalLogBurst int

	// GoroutineRelay relays every session with two goroutines, one per
	// direction, instead of the event loop (Linux, plain TCP on both legs;
	// loop_linux.go).
	GoroutineRelay bool

	// EpollLoop has the event loop wait with epoll, and read and write
	// with a system call each, even where io_uring is there to use.
	EpollLoop bool

	// Pool, when non-nil, is transaction pool mode (PoolConfig); nil is
	// session mode: one upstream connection per client, for its life.
	Pool *PoolConfig
	// Reuse, when non-nil in session mode, has the proxy authenticate
	// clients itself (its AuthMethod and Auth) and give a server
	// connection a client left idle to the next client of the same
	// database, user and startup parameters, reset with DISCARD ALL
	// (reuse.go); its IdleTimeout and Lifetime bound the connections
	// kept, its Size and WaitTimeout are unused. Nil opens a server
	// connection for each client, which authenticates to the server.
	Reuse *PoolConfig
}

func (c *Config) eventLoop() bool { return !c.GoroutineRelay }

// LastUpstreamContact returns when a session last connected to the
// upstream successfully; zero if none has.
func (s *Server) LastUpstreamContact() time.Time {
	if n := s.upstreamOK.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Draining reports whether Shutdown has begun: the server accepts no more
// clients, so a readiness probe should fail.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inShutdown
}

func (c *Config) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return 10 * time.Second
}

func (c *Config) startupTimeout() time.Duration {
	if c.StartupTimeout > 0 {
		return c.StartupTimeout
	}
	return 10 * time.Second
}

func (c *Config) maxClientConns() int {
	if c.MaxClientConns > 0 {
		return c.MaxClientConns
	}
	return DefaultMaxClientConns
}

func (c *Config) maxMessageBytes() int {
	if c.MaxMessageBytes > 0 {
		return c.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// Defaults of Config's limits.
const (
	// DefaultMaxClientConns is PgBouncer's max_client_conn default.
	DefaultMaxClientConns = 100
	// DefaultMaxMessageBytes is far below PostgreSQL's 1 GiB
	// (PQ_LARGE_MESSAGE_LIMIT) yet far above any sane query text.
	DefaultMaxMessageBytes = 64 << 20
)

// maxAnyMessage is PostgreSQL's own bound on any frontend message
// (PQ_LARGE_MESSAGE_LIMIT in src/include/libpq/libpq.h): longer is refused
// even when streamed.
const maxAnyMessage = 1<<30 - 1

// DefaultAnalyzerCacheSize is the number of distinct query texts whose
// analysis a Server caches when Config.Fencing is nil.
const DefaultAnalyzerCacheSize = 4096

// Server accepts PostgreSQL clients and relays each to its own upstream
// connection. Its methods are safe for concurrent use.
type Server struct {
	live    atomic.Pointer[Config] // in force for new sessions; never changed once stored (Reload stores another)
	log     *slog.Logger
	cancels cancelRegistry
	metrics *metrics
	nextID  atomic.Uint64

	refusals  *refusalLimiter // the refusal log's rate limit
	resources resourceTable   // resources refused, for the admin view

	pool  *pool.Pool // transaction pool mode (Config.Pool), else nil
	reuse *pool.Pool // session mode's kept server connections (Config.Reuse), else nil
	// statements holds the server names of the pooled clients'
	// statements that still exist for their clients (pooled_setup.go);
	// nextStatement numbers them.
	statements    sync.Map
	nextStatement atomic.Uint64

	upstreamOK atomic.Int64 // unix nanoseconds of the last successful upstream connect
	active     atomic.Int64 // sessions accepted and not yet ended

	mu         sync.Mutex
	sessions   map[*session]struct{}
	listeners  map[net.Listener]struct{}
	inShutdown bool // under mu
	wg         sync.WaitGroup
}

// NewServer returns a Server for cfg.
func NewServer(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Fencing == nil {
		cfg.Fencing = &gate.Config{Analyzer: gate.NewAnalyzer(DefaultAnalyzerCacheSize)}
	}
	s := &Server{log: log, cancels: newCancelRegistry(), metrics: newMetrics(cfg.Metrics),
		refusals: newRefusalLimiter(cfg.RefusalLogRate, cfg.RefusalLogBurst, time.Now),
		sessions: map[*session]struct{}{}, listeners: map[net.Listener]struct{}{}}
	pm := newPoolMetrics(cfg.Metrics, s.Pools)
	switch {
	case cfg.Pool != nil:
		cfg.Fencing = pooledFencing(cfg.Fencing)
		cfg.Reuse = nil // transaction pool mode shares its connections anyway
		s.pool = newPool(&cfg, pm.onWait, func() *clientauth.File { return s.live.Load().Pool.Auth })
	case cfg.Reuse != nil:
		s.reuse = newReusePool(&cfg, func() *clientauth.File { return s.live.Load().Reuse.Auth })
	}
	s.live.Store(&cfg)
	return s
}

// Reload puts cfg in force for the sessions accepted from now on: its
// fencing policy, limits, timeouts, TLS settings and refusal log rate.
// Sessions already open keep the limits and timeouts they started with;
// their fencing policy (the table map, default_resource, reads,
// token_scope) changes at the next unit their client begins
// (gate.Session.Reconfigure), so a newly protected table is protected in
// every session from its next statement on. The
// fields fixed for the Server's life (Upstream, Logger, Metrics,
// GoroutineRelay, EpollLoop, and Pool and Reuse but for their AuthMethod and
// Auth, which new clients log in with and the pools log in to the server
// with) keep their first value; cfg's are ignored. A nil Fencing
// means no protected tables and no default resource, with the analyzer in
// force kept.
func (s *Server) Reload(cfg Config) {
	cur := s.live.Load()
	cfg.Upstream, cfg.Logger, cfg.Metrics, cfg.GoroutineRelay, cfg.EpollLoop = cur.Upstream, cur.Logger, cur.Metrics, cur.GoroutineRelay, cur.EpollLoop
	if cfg.Fencing == nil {
		cfg.Fencing = &gate.Config{Analyzer: cur.Fencing.Analyzer}
	}
	cfg.Pool = reloadPool(cur.Pool, cfg.Pool)
	cfg.Reuse = reloadPool(cur.Reuse, cfg.Reuse)
	if cfg.Pool != nil {
		cfg.Fencing = pooledFencing(cfg.Fencing)
	}
	s.refusals.setRate(cfg.RefusalLogRate, cfg.RefusalLogBurst)
	s.live.Store(&cfg)
	for _, sess := range s.sessionList() {
		sess.reloaded.Store(cfg.Fencing)
	}
}

// Serve accepts connections on ln until ctx is done or Shutdown is called.
// When ctx is done it closes ln and every session at once; after Shutdown it
// leaves the sessions to Shutdown. Either way it waits for every session
// to end and returns nil; any other Accept error is returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.inShutdown {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	rctx, stopReport := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() { defer close(reported); s.reportSuppressed(rctx, suppressedReportInterval) }()
	defer func() { stopReport(); <-reported }()
	var err error
	for {
		var conn net.Conn
		conn, err = ln.Accept()
		if err != nil {
			break
		}
		sess := s.newSession(conn)
		sess.overLimit = s.active.Add(1) > int64(sess.cfg.maxClientConns())
		s.metrics.sessionsTotal.Inc()
		s.metrics.sessions.Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.active.Add(-1)
			defer s.metrics.sessions.Dec()
			sess.run(ctx)
			s.forget(sess)
		}()
	}
	s.mu.Lock()
	shutdown := s.inShutdown
	s.mu.Unlock()
	if !shutdown {
		s.closeAll()
	}
	s.wg.Wait()
	if ctx.Err() != nil {
		s.closePool()
	}
	if ctx.Err() != nil || shutdown {
		return nil
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *Server) newSession(conn net.Conn) *session {
	sess := &session{srv: s, cfg: s.live.Load(), client: conn, id: s.nextID.Add(1), settled: make(chan struct{}, 1), closed: make(chan struct{})}
	sess.info.started = time.Now()
	sess.log = s.log.With("conn", sess.id, "client", conn.RemoteAddr().String())
	s.mu.Lock()
	s.sessions[sess] = struct{}{}
	sess.draining = s.inShutdown
	s.mu.Unlock()
	return sess
}

func (s *Server) forget(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sess := range s.sessions {
		sess.close()
	}
}

// Shutdown stops the server gracefully. It closes the listeners, so Serve
// accepts no more clients, and closes each idle session (between
// transactions, nothing in flight) at once with 57P01 (admin_shutdown). A
// session inside a transaction, or waiting for a reply, keeps running: it is
// closed with 57P01 right after the ReadyForQuery that ends its transaction
// reaches the client. Shutdown returns nil once every session has ended.
//
// If ctx is done first, Shutdown closes the remaining sessions with 57P01,
// waits briefly for them to go, and returns ctx.Err(). Serve returns nil
// after Shutdown; call Shutdown once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.inShutdown = true
	for ln := range s.listeners {
		ln.Close()
	}
	sessions := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	s.log.Info("shutting down", "sessions", len(sessions))
	defer s.closePool()
	for _, sess := range sessions {
		sess.drain()
	}
	if s.waitIdle(ctx.Done()) {
		return nil
	}
	s.mu.Lock()
	s.log.Warn("shutdown timeout: closing sessions still in a transaction", "sessions", len(s.sessions))
	for sess := range s.sessions {
		sess.stop()
	}
	s.mu.Unlock()
	// A session whose client does not read may not take its ErrorResponse;
	// give the rest a moment, then close the sockets under it.
	grace, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !s.waitIdle(grace.Done()) {
		s.closeAll()
	}
	return ctx.Err()
}

// waitIdle polls until no session is left (true) or stop fires (false).
func (s *Server) waitIdle(stop <-chan struct{}) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.active.Load() == 0 {
			return true
		}
		select {
		case <-stop:
			return s.active.Load() == 0
		case <-tick.C:
		}
	}
}
