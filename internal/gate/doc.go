// Package gate decides, per session, what fencing a PostgreSQL statement
// needs: it holds the session's fencing state, resolves the token and the
// resource, classifies statements with the real PostgreSQL parser, says what
// to inject and where, and says which upstream replies belong to the proxy.
//
// # What it owns, and what it must not do
//
// Gate owns the policy half of the proxy (DESIGN.md, "Semantics"): where a
// fencing token and a resource come from (statement comments, the settings
// lock.fencing_token and lock.resource, the config's table map,
// default_resource), which statements are reads, writes, settings,
// transaction control or statements that cannot run inside a transaction
// block, which tables a statement writes (for the legacy guard), and whether
// a statement reaches into the fence schema. It must not touch sockets: it
// imports neither net nor internal/pgwire, starts no goroutines, and has no
// clock of its own.
//
// # Place in the flow
//
// internal/pgwire decodes frontend messages and hands them to gate; gate
// returns a decision value (pass, pass with an injected prefix, reject with a
// SQLSTATE, hide the next N replies) and pgwire does the writing. Gate asks
// internal/hwm for the SQL of check-and-advance; nothing calls back up.
//
// Statement analysis is the pure bottom layer: [Analyze] parses a Query
// string with pg_query (PostgreSQL's own parser, compiled in through cgo),
// splits it into statements at the parser's boundaries and returns an
// [Analysis] per string; [ParseDirectives] reads fencing directives from
// comments found by PostgreSQL's own scanner, so comment-like text inside
// string literals, quoted identifiers and dollar-quoted bodies is never taken
// for a directive. [Analyzer] memoizes Analyze in a bounded LRU keyed by the
// query text, so the hot path does not parse the same text twice.
//
// # Concurrency
//
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
package gate
