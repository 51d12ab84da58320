package fencestore

import "strings"

// CheckStatement calls fence.check with the six arguments of CheckArgs as
// parameters, for the extended protocol: Parse it once per session (the
// server infers the parameter types text, text, text, text, boolean,
// boolean) and Bind Params(a) to it. On success it returns only
// CommandComplete "CALL"; on refusal an ErrorResponse (see ClientError).
const CheckStatement = "CALL fence.check($1, $2, $3, $4, $5, $6)"

// CheckArgs are the arguments of one fence.check call. The empty string means
// absent. Strings must not contain NUL bytes (see AppendLiteralCall).
type CheckArgs struct {
	// Token is the fencing token from the statement's comment, as text; the
	// server validates it. Empty: use the setting lock.fencing_token.
	Token string
	// Resource is the resource from the statement's comment. Empty: the
	// setting lock.resource, then TableResource, then DefaultResource.
	Resource string
	// TableResource is the resource the config maps a written table to.
	TableResource string
	// DefaultResource is the config's default_resource.
	DefaultResource string
	// RequireToken refuses, with CodeTokenRequired, a call that ends up
	// with no token (the table filter for a protected table).
	RequireToken bool
	// Advance raises the mark to the token and holds its row lock to
	// commit. False, or a read-only transaction: check only, write nothing.
	Advance bool
}

// AppendLiteralCall appends to dst a CALL of fence.check with a's values as
// SQL literals, for the simple protocol, and returns the extended slice, e.g.
//
//	CALL fence.check('42', 'orders/42', '', '', false, true)
//
// No semicolon is appended. The literals read the same whatever the session's
// standard_conforming_strings is (see appendLiteral). A string holding a NUL
// byte cannot be sent to PostgreSQL; AppendLiteralCall then appends, instead
// of the call, a statement that raises CodeInvalidToken, so the transaction
// fails as it would for a malformed token. Bytes are otherwise copied as they
// are, so values in the client's encoding stay valid for that session.
func AppendLiteralCall(dst []byte, a CheckArgs) []byte {
	return AppendGuardedCall(dst, a, false, false)
}

// Params returns a's values as the six text-format parameter values of
// CheckStatement: the four strings as they are and "true" or "false". No
// value is nil (nil would be NULL in Bind); absent strings are empty. All
// six share one new backing array, which the caller owns. A NUL byte in a
// string makes the server refuse the Bind (SQLSTATE 22021), failing the
// transaction.
func Params(a CheckArgs) [][]byte {
	buf := make([]byte, 0, len(a.Token)+len(a.Resource)+len(a.TableResource)+len(a.DefaultResource)+10)
	out := make([][]byte, 6)
	for i, s := range [4]string{a.Token, a.Resource, a.TableResource, a.DefaultResource} {
		start := len(buf)
		buf = append(buf, s...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	start := len(buf)
	buf = appendBool(buf, a.RequireToken)
	out[4] = buf[start:len(buf):len(buf)]
	start = len(buf)
	buf = appendBool(buf, a.Advance)
	out[5] = buf[start:len(buf):len(buf)]
	return out
}

// AppendRaise appends to dst a statement that makes the server raise an
// error with SQLSTATE sqlstate and message in the current transaction, which
// then fails exactly as for any failed statement:
//
//	DO $fence$BEGIN RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = '…'; END$fence$
//
// sqlstate must be five characters of [0-9A-Z]; otherwise the server raises
// its own error about the code (still an error). NUL bytes in message are
// replaced by U+FFFD. No semicolon is appended.
func AppendRaise(dst []byte, sqlstate, message string) []byte {
	return AppendRaiseStatement(dst, Raise{Code: sqlstate, Message: message})
}

// AppendRaiseIfToken is AppendRaise guarded by the session's fencing
// setting: the statement raises only when lock.fencing_token is set to a
// non-empty value, and otherwise does nothing. The proxy sends it, as a Query
// of its own, before a statement that cannot run inside a transaction block,
// so that a token set in the session refuses it as a comment token would.
func AppendRaiseIfToken(dst []byte, r Raise) []byte {
	body := make([]byte, 0, len(r.Message)+len(r.Detail)+len(r.Hint)+200)
	body = append(body, "BEGIN IF pg_catalog.current_setting('lock.fencing_token', true) OPERATOR(pg_catalog.<>) '' THEN "...)
	body = appendRaiseBody(body, r)
	body = append(body, " END IF; END"...)
	dst = append(dst, "DO "...)
	return appendDollarQuoted(dst, string(body), "fence")
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// ProbeStatement returns one row (of no columns) when the session's
// lock.fencing_token setting holds a value, and none otherwise. The proxy
// runs it, hidden from the client, when a session starts and after a client
// statement that may have changed the setting in a way the text does not
// show, so that whether a session carries a token is the server's answer.
// The operator is schema-qualified: the session's search_path must not be
// able to put another "<>" in its place.
const ProbeStatement = "SELECT WHERE pg_catalog.current_setting('lock.fencing_token', true) OPERATOR(pg_catalog.<>) ''"

// Raise is an error the proxy has the server raise: a SQLSTATE, a short
// message, and the detail and hint PostgreSQL's own errors carry.
type Raise struct{ Code, Message, Detail, Hint string }

// AppendRaiseStatement appends a statement that raises r, as AppendRaise does,
// with r's detail and hint (each left out when empty).
func AppendRaiseStatement(dst []byte, r Raise) []byte {
	body := appendRaiseBody([]byte("BEGIN "), r)
	dst = append(dst, "DO "...)
	return appendDollarQuoted(dst, string(append(body, " END"...)), "fence")
}

// appendRaiseBody appends the PL/pgSQL statement RAISE EXCEPTION USING … of
// r. NUL bytes, which no statement may hold, are replaced by U+FFFD (in the
// SQLSTATE: removed).
func appendRaiseBody(dst []byte, r Raise) []byte {
	clean := func(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }
	dst = append(dst, "RAISE EXCEPTION USING ERRCODE = "...)
	dst = appendLiteral(dst, strings.ReplaceAll(r.Code, "\x00", ""))
	dst = append(dst, ", MESSAGE = "...)
	dst = appendLiteral(dst, clean(r.Message))
	if r.Detail != "" {
		dst = append(dst, ", DETAIL = "...)
		dst = appendLiteral(dst, clean(r.Detail))
	}
	if r.Hint != "" {
		dst = append(dst, ", HINT = "...)
		dst = appendLiteral(dst, clean(r.Hint))
	}
	return append(dst, ';')
}

// UnownedSetting is in the message of the error a guarded check raises
// (SQLSTATE 22P02, see AppendGuardedCall); the proxy replaces that error by
// its own refusal, so the setting's value never reaches the client.
const UnownedSetting = "fenceproxy: a fencing setting this transaction did not set"

// IsUnownedSetting reports whether an error of a guarded check is the
// guard's own.
func IsUnownedSetting(code, message string) bool {
	return code == "22P02" && strings.Contains(message, UnownedSetting)
}

// AppendGuardedCall appends a check that refuses to read a setting the
// transaction did not set: a CALL of fence.check as AppendLiteralCall's
// (which is AppendGuardedCall guarding neither),
// whose token argument (when token) and resource argument (when resource)
// are CASE expressions that fail when lock.fencing_token, respectively
// lock.resource, holds a value, by casting that value with UnownedSetting
// appended to bigint (SQLSTATE 22P02; IsUnownedSetting), and otherwise are
// a's values. The proxy sends it under token_scope: transaction, where a
// value the current transaction did not set may be another client's (a
// transaction pooler lends one server connection to many clients). It is
// one statement with no PL/pgSQL: the cast is of a STABLE function's
// result, which the planner does not fold, so only a set value fails.
func AppendGuardedCall(dst []byte, a CheckArgs, token, resource bool) []byte {
	if hasNUL(a.Token) || hasNUL(a.Resource) || hasNUL(a.TableResource) || hasNUL(a.DefaultResource) {
		return AppendRaise(dst, CodeInvalidToken, "invalid fencing token or resource: contains a NUL byte")
	}
	dst = append(dst, "CALL fence.check("...)
	dst = appendGuarded(dst, "lock.fencing_token", a.Token, token)
	dst = append(dst, ", "...)
	dst = appendGuarded(dst, "lock.resource", a.Resource, resource)
	dst = append(dst, ", "...)
	dst = appendLiteral(dst, a.TableResource)
	dst = append(dst, ", "...)
	dst = appendLiteral(dst, a.DefaultResource)
	dst = append(dst, ", "...)
	dst = appendBool(dst, a.RequireToken)
	dst = append(dst, ", "...)
	dst = appendBool(dst, a.Advance)
	return append(dst, ')')
}

// appendGuarded appends value as a literal, or when guard the CASE of
// AppendGuardedCall that fails while setting holds a value.
func appendGuarded(dst []byte, setting, value string, guard bool) []byte {
	if !guard {
		return appendLiteral(dst, value)
	}
	current := "pg_catalog.current_setting('" + setting + "', true)"
	dst = append(dst, "CASE WHEN "+current+" OPERATOR(pg_catalog.<>) '' THEN ("+current+" OPERATOR(pg_catalog.||) "...)
	dst = appendLiteral(dst, UnownedSetting)
	dst = append(dst, ")::pg_catalog.int8::pg_catalog.text ELSE "...)
	dst = appendLiteral(dst, value)
	return append(dst, " END"...)
}
