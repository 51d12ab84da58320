package fencestore

import (
	"errors"
	"strconv"

	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
)

// The SQLSTATEs of fencing errors. fence.check raises CodeStaleToken,
// CodeTokenRequired and CodeInvalidToken; the triggers on fence.hwm raise
// CodeMarkLowered; CodeNotInstalled is what ClientError turns a missing or
// inaccessible store into.
const (
	CodeStaleToken    = sqlstate.StaleToken            // token below the resource's high-water mark
	CodeTokenRequired = sqlstate.TokenRequired         // protected resource written without a token
	CodeNotInstalled  = sqlstate.NotInstalled          // fence store not installed or not accessible
	CodeInvalidToken  = sqlstate.InvalidParameterValue // malformed token, or a token with no resource
	CodeMarkLowered   = sqlstate.MarkLowered           // a write that would lower a mark, outside fence.set_mark
)

// Sentinel errors, for errors.Is.
var (
	// ErrNotInstalled means the fence schema, or part of it, is missing or
	// not accessible to the role: run "fenceproxy migrate". Its SQLSTATE
	// towards clients is CodeNotInstalled.
	ErrNotInstalled = errors.New("hwm: fence store not installed or not accessible (run fenceproxy migrate)")
	// ErrNoMark means the resource has no high-water mark yet.
	ErrNoMark = errors.New("no high-water mark")
)

// StaleTokenError reports a fencing token below a resource's high-water mark.
// Its message is exactly the one fence.check raises with SQLSTATE
// CodeStaleToken.
type StaleTokenError struct {
	Resource string // the resource whose mark refused the token
	Token    int64  // the refused token
	Mark     int64  // the high-water mark at the time of the check
}

func (e *StaleTokenError) Error() string {
	b := make([]byte, 0, 80+len(e.Resource))
	b = append(b, "stale fencing token "...)
	b = strconv.AppendInt(b, e.Token, 10)
	b = append(b, " for resource \""...)
	b = append(b, e.Resource...)
	b = append(b, "\": high-water mark is "...)
	b = strconv.AppendInt(b, e.Mark, 10)
	return string(b)
}

// SQLState returns CodeStaleToken.
func (e *StaleTokenError) SQLState() string { return CodeStaleToken }

// ClientError maps an error that the server returned for the injected
// fence.check call (CheckStatement or AppendLiteralCall) to what the client
// should see. Errors meaning the store is missing or not accessible to the
// session's role — 3F000 (no schema fence), 42P01 (no table), 42883 (no
// procedure), 42501 (no privilege) — become CodeNotInstalled with a message
// that tells the operator to run "fenceproxy migrate"; rewrite is then true.
// Every other error, fencing errors (55Z01, 55Z02, 22023) included, passes
// unchanged with rewrite false.
//
// Call it only for errors of the injected call: 42501 from a client's own
// statement means something else.
func ClientError(code, message string) (newCode, newMessage string, rewrite bool) {
	if !notInstalled(code) {
		return code, message, false
	}
	return CodeNotInstalled, "fence store not installed or not accessible (" + message +
		"): run \"fenceproxy migrate\" on this database, and check that the role may execute fence.check", true
}

// notInstalled reports whether code means the fence store is missing or not
// accessible.
func notInstalled(code string) bool {
	switch code {
	case sqlstate.InvalidSchemaName, sqlstate.UndefinedTable, sqlstate.UndefinedFunction, sqlstate.InsufficientPrivilege:
		return true
	}
	return false
}

// sqlStater is implemented by server errors that carry a SQLSTATE (pgx's
// *pgconn.PgError among them).
type sqlStater interface{ SQLState() string }

// wrapErr adds context to err from q, and ErrNotInstalled to the chain when
// the server said the store is missing or not accessible.
func wrapErr(op string, err error) error {
	var s sqlStater
	if errors.As(err, &s) && notInstalled(s.SQLState()) {
		return &opError{op: op, err: err, notInstalled: true}
	}
	return &opError{op: op, err: err}
}

// opError is an error of an admin operation: op is its short context.
type opError struct {
	op           string
	err          error
	notInstalled bool
}

func (e *opError) Error() string { return "hwm: " + e.op + ": " + e.err.Error() }

// Unwrap returns the server's error and, when it means the store is missing,
// ErrNotInstalled.
func (e *opError) Unwrap() []error {
	if e.notInstalled {
		return []error{e.err, ErrNotInstalled}
	}
	return []error{e.err}
}
