package gate

import (
	"errors"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"strconv"

	"github.com/pganalyze/pg_query_go/v6/parser"
)

// SQLSTATE codes of the errors this package returns (docs/design.md, "What the
// client sees").
const (
	// SQLStateInvalidParameterValue (22023, invalid_parameter_value) is sent
	// for a malformed fencing token or resource.
	SQLStateInvalidParameterValue = sqlstate.InvalidParameterValue
)

// TokenError reports a malformed fencing token: not an integer, not
// positive, out of the int64 range, empty, or in conflict with another token
// given for the same statement. The proxy refuses the statement with
// SQLSTATE 22023 and does not execute it.
type TokenError struct {
	Value  string // the token as written (after URL-decoding, where it was encoded)
	Reason string // why it is refused, lower case, e.g. "not positive"
}

func (e *TokenError) Error() string {
	return "invalid fencing token " + strconv.Quote(e.Value) + ": " + e.Reason
}

// SQLState returns "22023" (invalid_parameter_value).
func (e *TokenError) SQLState() string { return SQLStateInvalidParameterValue }

// DirectiveError reports a directive other than the token that cannot be
// used: an empty resource, one that is not valid UTF-8 or contains NUL, a bad
// URL encoding, or two different resources for one statement. Like
// TokenError it becomes SQLSTATE 22023: the proxy fails closed rather than
// guess which resource was meant.
type DirectiveError struct {
	Key    string // the directive key, e.g. "resource"
	Value  string // the value as written ("" when empty)
	Reason string // why it is refused, lower case
}

func (e *DirectiveError) Error() string {
	return "invalid " + e.Key + " directive " + strconv.Quote(e.Value) + ": " + e.Reason
}

// SQLState returns "22023" (invalid_parameter_value).
func (e *DirectiveError) SQLState() string { return SQLStateInvalidParameterValue }

// ParseError reports query text that could not be analysed. When Syntax is
// set, PostgreSQL's own parser (or scanner) rejected it and the server will
// reject the same text, so the proxy may forward it and let the server's
// syntax error reach the client, or refuse it; that is the caller's
// decision. When Syntax is false the text may well be valid SQL that the
// analysis could not take apart (a parse tree nested deeper than protobuf's
// decoding limit of 10000 levels, e.g. "1+1+…+1" with ten thousand terms;
// a NUL byte), and forwarding it unchecked would skip fencing. It carries no
// SQLSTATE.
type ParseError struct {
	Message  string // the parser's message, e.g. `syntax error at or near "FORM"`
	Position int    // 1-based character position of the error; 0 when unknown
	Syntax   bool   // PostgreSQL's parser rejected the text
	// Code is the SQLSTATE of a text refused before parsing: 54001 for one
	// nested too deeply to parse safely, 54000 for one too long. "" otherwise.
	Code string
	err  error
}

func newParseError(err error) *ParseError {
	pe := &ParseError{Message: err.Error(), err: err}
	var perr *parser.Error
	if errors.As(err, &perr) {
		pe.Position = perr.Cursorpos
		pe.Syntax = true
	}
	return pe
}

func (e *ParseError) Error() string {
	if e.Position > 0 {
		return "parse query: " + e.Message + " at position " + strconv.Itoa(e.Position)
	}
	return "parse query: " + e.Message
}

// Unwrap returns the pg_query error, if any.
func (e *ParseError) Unwrap() error { return e.err }
