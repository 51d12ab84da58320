// Package pgwire is fenceproxy's PostgreSQL wire-protocol front end: it owns
// the sockets, the startup and authentication relay, cancel routing, message
// framing and the per-connection loops.
//
// It must not decide what is fenced: that is package gate's job. pgwire peeks
// at each message header, decodes only what it needs and forwards everything
// else as raw bytes, streaming large bodies (DataRow, CopyData, Bind
// parameters) instead of holding them whole.
//
// # Flow
//
// A Server accepts clients. Each session reads the client's startup packet
// (answering SSLRequest and GSSENCRequest with 'N'), dials its own upstream
// connection (session mode: one upstream per client), forwards the startup
// message and relays the authentication exchange byte for byte, so trust,
// cleartext, MD5 and SCRAM-SHA-256 all work without the proxy knowing a
// password. The upstream's BackendKeyData is replaced by a key of the
// proxy's own; a CancelRequest carrying that key is forwarded to the right
// upstream backend with the real key.
//
// # Concurrency
//
// Server methods are safe for concurrent use. Each session has one goroutine
// per direction; the session's close is idempotent and reached on every
// path, and Serve waits for every session before returning.
//
// # Errors
//
// The proxy's own errors reach the client as ErrorResponse before the
// connection closes: 08001 when the upstream cannot be reached, 08006 when it
// is lost mid-session, 08P01 for a malformed startup packet.
//
// # Logs
//
// Keys: conn (session id), client (remote address), err.
package pgwire
