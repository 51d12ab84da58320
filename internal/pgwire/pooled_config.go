package pgwire

import (
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
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
