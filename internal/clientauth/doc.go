// Package clientauth lets the proxy authenticate a client itself, as
// PgBouncer does with its auth_file, for pool modes where the client's
// authentication cannot be relayed to a server connection (server
// connections are shared and already logged in).
//
// It owns the auth file format (PgBouncer's userlist.txt: lines
// `"user" "secret"`, where the secret is a plain-text password, an MD5 hash
// `md5<32 hex>` or a SCRAM-SHA-256 verifier as PostgreSQL stores it in
// pg_authid.rolpassword), the choice of method (auth_type trust, password,
// md5, scram-sha-256, with PgBouncer's meanings), and the server side of the
// authentication exchange on a client connection: from just after the
// StartupMessage to AuthenticationOk, or to the FATAL ErrorResponse
// PostgreSQL would send.
//
// It must not touch anything after AuthenticationOk (ParameterStatus,
// BackendKeyData and ReadyForQuery are the caller's), set deadlines (the
// caller bounds the exchange in time), or log: Load returns a permission
// warning and Authenticate returns errors whose text says why a login was
// refused, for the caller to log. The client never sees why: a wrong
// password, an unknown user and an unusable secret all give the same
// 28P01 message.
//
// SCRAM-SHA-256 follows RFC 5802 and RFC 7677 as PostgreSQL implements it
// (src/backend/libpq/auth-scram.c), without channel binding (the proxy's TLS
// certificate is not the server's, so SCRAM-SHA-256-PLUS is never offered).
// Passwords are not SASLprep-normalized: a non-ASCII plain-text secret that
// SASLprep would change does not match what a normalizing client (libpq,
// pgx) computes.
package clientauth
