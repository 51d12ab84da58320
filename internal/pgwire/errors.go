package pgwire

import (
	"errors"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"

	"github.com/jackc/pgx/v5/pgproto3"
)

// errProtocol marks input that breaks the PostgreSQL wire protocol.
var errProtocol = errors.New("protocol violation")

// errStartupLength: a startup packet's length is out of range.
var errStartupLength = errors.New("invalid length of startup packet")

// errWaitSettled is decide's answer in the event loop when gate holds a
// client message back until the replies to what was sent have come: the
// loop reads the message again once they have.
var errWaitSettled = errors.New("waiting for the upstream's replies")

// SQLSTATEs the proxy itself reports.
const (
	codeCannotConnect        = sqlstate.CannotConnect
	codeConnectionFailure    = sqlstate.ConnectionFailure
	codeProtocolViolation    = sqlstate.ProtocolViolation
	codeFeatureNotSupported  = sqlstate.FeatureNotSupported
	codeInvalidAuthorization = sqlstate.InvalidAuthorization
	codeInvalidPassword      = "28P01"
	codeTooManyConnections   = sqlstate.TooManyConnections
	codeAdminShutdown        = sqlstate.AdminShutdown
	codeInternalError        = sqlstate.InternalError
)

// fatal builds the ErrorResponse the proxy sends before closing a connection.
func fatal(code, msg string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg}
}

// clientError is a fault in the client's input, or a refusal of the client,
// that ends the session: the client is sent an ErrorResponse with code
// before the connection closes. It wraps errProtocol when the input broke
// the protocol.
type clientError struct {
	code string
	msg  string
	err  error
}

func (e *clientError) Error() string { return e.msg }
func (e *clientError) Unwrap() error { return e.err }

// protocolViolation is a clientError with SQLSTATE 08P01.
func protocolViolation(msg string) *clientError {
	return &clientError{code: codeProtocolViolation, msg: "fenceproxy: " + msg, err: errProtocol}
}
