package pgwire

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// PoolConfig puts a Server in transaction pool mode (Config.Pool): the
// proxy authenticates each client itself against Auth, and lends a shared
// server connection of its pool to a client for one transaction, or one
// autocommit unit (docs/design.md "Transaction pooling").
type PoolConfig struct {
	// Size bounds the server connections per (database, user); zero means
	// DefaultPoolSize (PgBouncer's default_pool_size).
	Size int
	// WaitTimeout bounds how long a client waits for a server connection
	// (query_wait_timeout); a client that waited longer is answered 53300
	// and closed, as PgBouncer closes it. Zero means DefaultPoolWaitTimeout.
	WaitTimeout time.Duration
	// IdleTimeout closes a server connection idle this long
	// (server_idle_timeout); zero means DefaultPoolIdleTimeout.
	IdleTimeout time.Duration
	// Lifetime closes a server connection this old when it is returned
	// (server_lifetime); zero means DefaultPoolLifetime.
	Lifetime time.Duration
	// AuthMethod is how clients authenticate to the proxy (auth_type).
	AuthMethod clientauth.Method
	// Auth holds the users and their secrets (auth_file). The proxy logs
	// in to the server as the client's user with the plain password the
	// file has for it; with none, without a password.
	Auth *clientauth.File
}

// Defaults of PoolConfig, PgBouncer's.
const (
	DefaultPoolSize        = 20
	DefaultPoolWaitTimeout = 120 * time.Second
	DefaultPoolIdleTimeout = 600 * time.Second
	DefaultPoolLifetime    = 3600 * time.Second
)

// Pools returns the transaction pool's numbers per (database, user); nil
// in session mode.
func (s *Server) Pools() map[pool.Key]pool.KeyStats {
	if s.pool == nil {
		return nil
	}
	return s.pool.Stats()
}

func (p *PoolConfig) size() int {
	if p.Size > 0 {
		return p.Size
	}
	return DefaultPoolSize
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// newPool returns the pool of transaction pool mode for cfg (cfg.Pool
// set), logging in with the passwords auth has.
func newPool(cfg *Config, onWait func(pool.Key, time.Duration, bool), auth func() *clientauth.File) *pool.Pool {
	pc := cfg.Pool
	p, err := pool.New(pool.Config{
		Dial:        loopDial(cfg, poolDial(cfg, auth)),
		Size:        pc.size(),
		WaitTimeout: orDefault(pc.WaitTimeout, DefaultPoolWaitTimeout),
		IdleTimeout: orDefault(pc.IdleTimeout, DefaultPoolIdleTimeout),
		Lifetime:    orDefault(pc.Lifetime, DefaultPoolLifetime),
		DialTimeout: cfg.dialTimeout(),
		OnWait:      onWait,
	})
	if err != nil {
		panic("pgwire: " + err.Error()) // every setting above is valid
	}
	return p
}

// poolDial returns how a pool opens server connections: it logs in to the
// server as each client's user with the plain password the auth file in
// force (auth: the one a reload put in force last) has for it, or none,
// over TLS as cfg.UpstreamTLS says.
func poolDial(cfg *Config, auth func() *clientauth.File) pool.DialFunc {
	d := &pool.Dialer{Addr: cfg.Upstream, Password: func(k pool.Key) (string, error) {
		f := auth()
		if f == nil {
			return "", nil
		}
		p, _ := f.Password(k.User)
		return p, nil
	}}
	plain := *d
	dial := d.Dial
	switch cfg.UpstreamTLS {
	case UpstreamTLSDisable, "":
	case UpstreamTLSVerifyFull:
		host, _, err := net.SplitHostPort(cfg.Upstream)
		if err != nil {
			host = cfg.Upstream // the dial reports the bad address
		}
		d.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, RootCAs: cfg.UpstreamRootCAs}
	default:
		d.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} // prefer and require do not verify, as in libpq
		if cfg.UpstreamTLS == UpstreamTLSPrefer {
			dial = func(ctx context.Context, k pool.Key) (*pool.Conn, error) {
				c, err := d.Dial(ctx, k)
				if err != nil && strings.Contains(err.Error(), "server refused TLS connection") {
					return plain.Dial(ctx, k)
				}
				return c, err
			}
		}
	}
	return dial
}

// pooledFencing returns f with Pooled set, for a Server in transaction
// pool mode.
func pooledFencing(f *gate.Config) *gate.Config {
	c := *f
	c.Pooled = true
	return &c
}

// reloadPool returns the pool settings in force after a reload from cur to
// next: cur's, with next's client authentication; none when cur is none
// (Config.Pool or Config.Reuse, each fixed for the Server's life).
func reloadPool(cur, next *PoolConfig) *PoolConfig {
	if cur == nil {
		return nil
	}
	p := *cur
	if next != nil {
		p.AuthMethod, p.Auth = next.AuthMethod, next.Auth
	}
	return &p
}

// closePool closes the pool's idle server connections, if there is a
// pool, and those session mode kept (Config.Reuse).
func (s *Server) closePool() {
	for _, p := range []*pool.Pool{s.pool, s.reuse} {
		if p != nil {
			p.Close()
		}
	}
}
