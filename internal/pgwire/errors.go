package pgwire

import (
	"errors"

	"github.com/jackc/pgx/v5/pgproto3"
)

// errProtocol marks input that breaks the PostgreSQL wire protocol.
var errProtocol = errors.New("protocol violation")

// SQLSTATEs the proxy itself reports.
const (
	codeCannotConnect        = "08001" // sqlclient_unable_to_establish_sqlconnection
	codeConnectionFailure    = "08006" // connection_failure
	codeProtocolViolation    = "08P01" // protocol_violation
	codeFeatureNotSupported  = "0A000"
	codeInvalidAuthorization = "28000" // invalid_authorization_specification
	codeTooManyConnections   = "53300" // too_many_connections
	codeAdminShutdown        = "57P01" // admin_shutdown
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
