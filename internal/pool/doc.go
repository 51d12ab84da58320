// Package pool owns the server connections of transaction pool mode: for
// each (database, user) [Key] it keeps at most Config.Size authenticated
// PostgreSQL connections, lends one to a client for a transaction
// ([Pool.Acquire]) and takes it back afterwards ([Pool.Release]).
//
// # What it owns, and what it must not do
//
// The pool decides which server connection a client gets (the most recently
// returned idle one first, so its caches are warm), when a new one is dialled
// (only below Size), who waits and in which order (first come, first served),
// how long ([Config.WaitTimeout], PgBouncer's query_wait_timeout), and when a
// connection is closed: when it is released as not reusable, when it is older
// than Lifetime on release (server_lifetime), or idle longer than IdleTimeout
// (server_idle_timeout, closed by a reaper goroutine that Close stops).
//
// It does not speak the protocol past start-up: [Dialer] uses pgconn to
// connect and authenticate and then hijacks the raw net.Conn; from then on
// the caller relays bytes on [Conn.NetConn] and owns the session state on it
// (Conn.Prepared is kept with the connection for the caller). Whether a
// connection may be reused is the caller's verdict, given to Release. The
// pool holds no goroutine per connection and imports no metrics library:
// [Pool.Stats] returns numbers and [Config.OnWait] reports each wait.
//
// A Pool is safe for concurrent use.
//
// Errors: [ErrWaitTimeout] (no connection within WaitTimeout; the caller
// answers the client like PgBouncer's query_wait_timeout), [ErrClosed]
// (Acquire after or during Close), the context's error, or the Dial error.
package pool
