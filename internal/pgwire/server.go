package pgwire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
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
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Fencing is the fencing policy; nil means no protected tables and no
	// default resource (tokens are still checked).
	Fencing *gate.Config
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

// DefaultAnalyzerCacheSize is the number of distinct query texts whose
// analysis a Server caches when Config.Fencing is nil.
const DefaultAnalyzerCacheSize = 4096

// Server accepts PostgreSQL clients and relays each to its own upstream
// connection. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	cancels cancelRegistry
	fencing *gate.Config
	nextID  atomic.Uint64

	mu       sync.Mutex
	sessions map[*session]struct{}
	wg       sync.WaitGroup
}

// NewServer returns a Server for cfg.
func NewServer(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fencing := cfg.Fencing
	if fencing == nil {
		fencing = &gate.Config{Analyzer: gate.NewAnalyzer(DefaultAnalyzerCacheSize)}
	}
	return &Server{cfg: cfg, log: log, cancels: newCancelRegistry(), fencing: fencing, sessions: map[*session]struct{}{}}
}

// Serve accepts connections on ln until ctx is done, then closes ln and every
// session and waits for them to finish. It returns nil after a cancelled ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		var conn net.Conn
		conn, err = ln.Accept()
		if err != nil {
			break
		}
		sess := s.newSession(conn)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sess.run(ctx)
			s.forget(sess)
		}()
	}
	s.closeAll()
	s.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *Server) newSession(conn net.Conn) *session {
	sess := &session{srv: s, client: conn, id: s.nextID.Add(1)}
	sess.log = s.log.With("conn", sess.id, "client", conn.RemoteAddr().String())
	s.mu.Lock()
	s.sessions[sess] = struct{}{}
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
