// Package gate decides, per session, what fencing a PostgreSQL statement
// needs: it holds the session's fencing state, resolves the token and the
// resource, classifies statements with the real PostgreSQL parser, says what
// to inject and where, and says which upstream replies belong to the proxy.
//
// # What it owns, and what it must not do
//
// Gate owns the policy half of the proxy (docs/design.md, "Semantics"): where a
// fencing token and a resource come from (statement comments, the settings
// lock.fencing_token and lock.resource, the config's table map,
// default_resource), which statements are reads, writes, settings,
// transaction control or statements that cannot run inside a transaction
// block, which tables a statement writes (for the table filter), and whether
// a statement reaches into the fence schema. It must not touch sockets: it
// imports neither net nor internal/pgwire, starts no goroutines, and has no
// clock of its own.
//
// # Place in the flow
//
// internal/pgwire decodes what gate needs of each client message into a
// [Msg] and calls [Session.Client], which answers with one [Decision]:
// forward, send messages before or after it, replace or drop it, or wait
// until every reply to what was sent has arrived ([Session.Settled]). Each
// server reply goes to [Session.Server] as a [Reply] (ErrorResponse,
// ReadyForQuery and ParameterStatus decoded) and gets one [Verdict]:
// forward, hide (it answers an injected message), replace (an injected
// statement's error, cleaned of internal context) or fail (a reply that fits
// nothing: the session ends). Gate asks internal/fencestore for the SQL of
// check-and-advance and of the token probe; nothing calls back up. The
// fail-closed rules of docs/design.md live in analyze (decide.go), the
// registry (registry.go), the reply matching (replies.go) and the lexing
// guard (lexing.go).
//
// # How a session decides
//
// A token may be in a statement's comment, or in the session's settings
// (SET, set_config, startup options): once a session may carry a setting
// token, every transaction's first read or write gets a check, and the
// server evaluates current_setting('lock.fencing_token') inside it, so gate
// never has to mirror PostgreSQL's setting rules. A token set for one
// transaction only (SET LOCAL, pg_catalog.set_config(…, true), run from
// the statement's own text) in a session known to hold none stops counting
// once that transaction has ended and every unit is answered
// (Session.maybeTxnOnly), unless its Parse typed a parameter with a
// user's type, whose code runs at Bind. A cursor or portal reads the
// snapshot its DECLARE or Bind took: one made before the client set the
// fencing settings, or read under a comment token its DECLARE lacked, is
// refused after its check (registry.staleSnapshots, action.after); a
// statement whose comment carries a token is checked before its Bind.
// Gate refuses nothing by
// itself: a refusal it decides (a malformed comment token, a write to schema
// fence, a token on a statement that cannot run in a transaction block) is
// injected as a statement that makes the server raise the error, so the
// transaction fails exactly as it would for any failed statement.
//
// Replies are matched to what was sent through a queue of slots, one per
// message sent upstream, in order; after an error the server skips to Sync
// and so does the queue. A transaction counts as checked for the next unit
// (a Query, or extended messages up to Sync) only when the server confirmed
// the check and every earlier unit has been answered, so pipelining never
// makes gate skip a check it needs; a ROLLBACK TO SAVEPOINT, a change of the
// token or resource, or the end of the transaction makes the next statement
// check again.
//
// A probe of lock.fencing_token goes behind a unit (at a Query's end, or at
// a Sync) only where the server reads the next message as a message: never
// behind a unit that may have started COPY … FROM STDIN, where the server
// would take it for copy data. It then waits for the next unit's end; the
// session stays checked meanwhile, so waiting never skips a check. Nor is
// it a transaction block's first query while the block has taken no
// snapshot (Session.freshBlock): it is held (probeHeld) and goes right
// before the unit that may take one (releaseHeld), which waits for it.
//
// A text gate cannot read (lexing unsure, parse error) passes unread with a
// probe behind it only in a session without fencing and only when it
// cannot carry a directive (mayCarryDirective); the probe reads settings,
// never comments.
//
// In COPY-in mode the server ignores the client's Sync and Flush (libpq's
// PQexecParams sends a Sync behind the Execute of a COPY FROM STDIN, and
// another after CopyDone). pgwire shows gate the client's CopyDone and
// CopyFail (not CopyData), which mark where the copy ends in the queue;
// the server's CommandComplete or ErrorResponse to the COPY says whether
// the Syncs before that mark get a ReadyForQuery (copy.go lists the
// orders modeled, and those that end the session with 08P01).
//
// Under Config.Pooled (transaction pool mode, pool.go; docs/design.md,
// "Transaction pooling") a check reads only settings its own transaction
// set, the client's session-level token and resource are kept by the
// session ([Tracked]: startup options, a SET alone in its unit, confirmed
// by the server; RESET goes back to the startup value, as the server's
// does) and passed to the check as values, and what needs session
// state a pool cannot keep per client is refused with 0A000. A statement
// pgwire may prepare again on another connection, under the lexing
// settings of that lending, is read as unsure once they have changed since
// its Parse (Session.unsureLex).
//
// Statement analysis is the pure bottom layer: [Analyze] parses a Query
// string with pg_query (PostgreSQL's own parser, compiled in through cgo),
// splits it into statements at the parser's boundaries and returns an
// [Analysis] per string; [ParseDirectives] reads fencing directives from
// comments found by PostgreSQL's own scanner, so comment-like text inside
// string literals, quoted identifiers and dollar-quoted bodies is never taken
// for a directive. [Analyzer] memoizes Analyze in an LRU keyed by the query
// text and bounded in entries and in bytes, so the hot path does not parse
// the same text twice. A text over 16 KiB is parsed without the bulk of its
// long constant lists and literals, which the classification never reads
// (reduce.go, prescan.go), and refused (54001) when more than 100,000 other
// tokens would reach the parser.
//
// # Concurrency
//
// A [Session] is not safe for concurrent use: pgwire serializes the calls of
// its two directions under one mutex. [Config] is read-only once shared.
// [Analyze] and [ParseDirectives] are safe for concurrent use. An [Analyzer]
// is safe for concurrent use and meant to be shared by all sessions of a
// proxy. The *Analysis values it returns are shared between callers and must
// be treated as read-only.
//
// # Ownership of bytes
//
// Analysis results hold strings (statement text, table names, resources)
// that are copies or substrings of the query text passed in; nothing refers
// to a caller's buffer, so results stay valid after the message buffer they
// came from is reused.
//
// # Errors
//
//   - *TokenError: a malformed fencing token (not an integer, not positive,
//     out of range, empty, or two different tokens for one statement);
//     SQLSTATE 22023.
//   - *DirectiveError: a malformed or conflicting resource directive;
//     SQLSTATE 22023.
//   - *ParseError: text that could not be analysed; no SQLSTATE of its own.
//     With Syntax set, PostgreSQL's parser rejected it and the server will
//     reject it too; without, the text may be valid (a tree nested too
//     deeply to decode) and must not be forwarded unchecked.
//
// Both SQLSTATE-carrying errors have a SQLState() string method, so callers
// can ask through a one-method interface instead of switching on types.
//
// Refusals gate injects: 42501 for statements that would write or alter
// schema fence, 0A000 for a token on a statement that cannot run in a
// transaction block, 22023 for malformed directives, 42601 for text that
// could not be analysed while fencing is in play. Errors of an injected check
// pass through fencestore.ClientError (55Z03 when the fence store is missing).
package gate
