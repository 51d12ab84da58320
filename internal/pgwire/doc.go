// Package pgwire is fenceproxy's PostgreSQL wire-protocol front end: it owns
// the sockets, TLS on both legs, the startup and authentication relay,
// cancel routing, message framing, limits, shutdown and the per-connection
// loops.
//
// It must not decide what is fenced: that is package gate's job. pgwire peeks
// at each message header, decodes only what it needs and forwards everything
// else as raw bytes, streaming large bodies (DataRow, CopyData, Bind
// parameters) instead of holding them whole.
//
// # Flow
//
// A Server accepts clients. Each session reads the client's startup packets
// straight from the socket, unbuffered: an SSLRequest is answered 'S' and
// the connection switched to TLS when Config.TLS is set, else 'N'; a
// GSSENCRequest is answered 'N'. Because nothing is read ahead, no plaintext
// byte sent after an SSLRequest can pass for TLS data. The session then
// dials its own upstream connection (session mode: one upstream per client),
// negotiates TLS with it as Config.UpstreamTLS says, forwards the startup
// message and relays the authentication exchange byte for byte, so trust,
// cleartext, MD5 and SCRAM-SHA-256 all work without the proxy knowing a
// password. SCRAM channel binding cannot work through a proxy (the client's
// TLS channel is not the server's), so -PLUS mechanisms are removed from the
// server's AuthenticationSASL. The client gets its backend's real process
// ID with a secret of the proxy's own (the real secret never leaves the
// proxy); a CancelRequest carrying that key is forwarded to the right
// upstream backend with the real key.
//
// # Transaction pool mode
//
// With Config.Pool the Server is a pooler (pooled.go, pooled_setup.go,
// pooled_names.go, pooled_config.go): the session authenticates its client
// itself (package clientauth), and holds a server connection of its pool
// (package pool, per database and user) only from the first message that
// needs the server to the ReadyForQuery 'I' that leaves it idle. A setup
// exchange, hidden from the client and from gate, first makes a lent
// connection's reported settings and statements the client's; statement
// names are the proxy's (gate.ServerStatementName). The client's cancel key
// maps to the session and reaches the backend lent to it at that moment.
// gate's Config.Pooled decides what such a session may run. A pooled
// session is relayed by the io_uring event loop where a session-mode one
// would be (loop_pooled_linux.go: it waits for a connection in the pool's
// queue without a goroutine, and uses the lent connection's socket as it
// is, out of Go's poller: pooled_fdconn_linux.go), until it is lent a
// connection over TLS; otherwise by the goroutine relay, one upstream
// reader for the session's life. docs/design.md
// "Transaction pooling" has the rules.
//
// # Limits
//
// Config.MaxClientConns bounds sessions (the excess is refused after its
// startup packet); Config.StartupTimeout bounds startup, TLS handshakes and
// authentication; Config.DialTimeout bounds the upstream TCP connect;
// Config.MaxMessageBytes bounds the client messages decoded whole (Query,
// Parse, Describe, Close, Execute); any client message is bounded by
// PostgreSQL's 1 GiB. A client message of a type PostgreSQL does not accept
// after startup is refused, not forwarded. A message is checked before any
// byte of it goes upstream; when the client's input is refused or the client
// vanishes mid-message, the upstream connection is closed rather than left
// holding part of a message.
//
// # Relays
//
// Past authentication a session is relayed one of two ways, by the same
// per-message code (clientStep, upstreamStep):
//
//   - The event loop (loop_linux.go, its sockets in fd_linux.go; Linux,
//     plain TCP on both legs, the default): a few goroutines, each serving
//     many sessions and relaying messages buffered whole. Over io_uring
//     where the kernel has it (loop_uring_linux.go, the ring in
//     uring_linux.go): one loop per two GOMAXPROCS, each on a locked
//     thread, one io_uring_enter per turn. Otherwise, or with
//     Config.EpollLoop, over epoll: one per GOMAXPROCS, reading only what
//     epoll reported ready. The io_uring loop costs about 0.5 times the
//     CPU per transaction of the goroutine relay, the epoll loop 0.7–0.85
//     (docs/performance.md).
//   - The goroutine relay (client_pump.go, upstream_pump.go): one goroutine
//     per direction, each blocking in its own reads. TLS sessions, and
//     every session with Config.GoroutineRelay, use it; a session leaves
//     the event loop for it, for good, when a message is larger than the
//     read buffer, a Query or Parse text is over 4 KiB, or a message took
//     over 20 ms to relay (a loop serves many sessions; none may hold it).
//
// # Concurrency and shutdown
//
// Server methods are safe for concurrent use. Each session's run goroutine
// (started by Serve, which waits for it) does startup and authentication.
// In the goroutine relay it then reads the client, and starts an upstream
// reader that it waits for before returning; in the event loop it waits
// until the loop lets go of the session. The session's close is idempotent
// and reached on every path. Only the upstream reader writes to the client
// once it runs; an error for the client from the client-reading side is
// sent after that reader has stopped; the two directions' calls into gate
// are ordered by a mutex. An event loop alone touches its sessions, gate
// included, without that mutex: other goroutines post it work (close,
// shutdown) or run it while the loop holds the session back (a pooled
// session's dial and setup), and the admin view reads what the session
// publishes.
//
// Serve's ctx ends everything at once. Shutdown is the graceful path: it
// closes the listeners, closes idle sessions (ReadyForQuery status 'I', no
// Query, Sync or FunctionCall awaiting its ReadyForQuery, and no extended
// sequence open without its Sync) with 57P01,
// lets the others run until the ReadyForQuery that leaves them idle, and
// when its ctx ends closes the rest with 57P01.
//
// # Errors
//
// The proxy's own errors reach the client as a FATAL ErrorResponse before
// the connection closes:
//
//   - 08001 the upstream cannot be reached, or its TLS negotiation or
//     certificate verification failed (the reason is in the message)
//   - 08006 the upstream was lost mid-session or during authentication
//     (its end read, or a write to it failed), unless the server said why
//     itself (a FATAL error); not when part of a streamed message (a
//     large DataRow, CopyData) has reached the client: no error can follow
//     half a message, and the connection just closes
//   - 08P01 a malformed startup packet, an invalid message length, an
//     unknown message type, a malformed decoded message, or a message over
//     Config.MaxMessageBytes; a server reply that cannot be decoded or
//     matched to what was sent; a client message held back while the
//     server waits for copy data; a message gate refuses because the
//     server's state cannot be known (gate.Decision.Fail: SQL sent during
//     COPY FROM STDIN, or in an extended sequence after a failed COPY
//     with a Sync in it, before the next Sync)
//   - 0A000 a replication connection (startup parameter replication); in
//     transaction pool mode, a startup parameter the pool cannot keep
//     per client
//   - 28P01 in transaction pool mode, a failed client login (clientauth)
//   - 28000 a plaintext client when Config.RequireClientTLS is set
//   - 53300 a client beyond Config.MaxClientConns; in transaction pool
//     mode, a client that waited query_wait_timeout for a server connection
//   - 57P01 the proxy is shutting down
//   - XX000 the fencing state held a message back with no reply
//     outstanding (a bug in gate)
//
// # Logs
//
// Keys: conn (session id), client (remote address), err, type (a client
// message type), user and database (session ready), max_client_conns,
// sessions (at shutdown). A refusal ("fencing refused a statement", WARN,
// refusal.go) adds sqlstate, resource, token, mark, user, database,
// application_name and message, within Config.RefusalLogRate; "suppressed
// refusal log lines" carries suppressed.
//
// # Metrics
//
// Registered with Config.Metrics (metrics.go): fenceproxy_client_connections,
// fenceproxy_client_connections_accepted_total,
// fenceproxy_connection_failures_total{reason}, fenceproxy_fence_checks_total,
// fenceproxy_fence_refusals_total{sqlstate},
// fenceproxy_refusal_log_suppressed_total,
// fenceproxy_fence_check_duration_seconds,
// fenceproxy_upstream_connect_duration_seconds,
// fenceproxy_client_sent_bytes_total, fenceproxy_upstream_sent_bytes_total,
// fenceproxy_relayed_sessions_total{relay} and
// fenceproxy_event_loop_leaves_total{reason}; every known label value is
// exported at 0 from the start. docs/operations.md has them all.
// Label values come from fixed lists, except database and user on
// transaction pool mode's per-pool families (pool_metrics.go:
// fenceproxy_pool_server_connections{state}, fenceproxy_pool_clients_waiting,
// fenceproxy_pool_waits_total, fenceproxy_pool_server_dials_total and
// fenceproxy_pool_server_closes_total, read from the pool at scrape, no
// series in session mode), beside fenceproxy_pool_wait_duration_seconds and
// fenceproxy_pool_wait_timeouts_total.
package pgwire
