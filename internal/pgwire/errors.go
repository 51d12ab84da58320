package pgwire

import (
	"errors"

	"github.com/jackc/pgx/v5/pgproto3"
)

// errProtocol marks input that breaks the PostgreSQL wire protocol.
var errProtocol = errors.New("protocol violation")

// SQLSTATEs the proxy itself reports.
const (
	codeCannotConnect       = "08001" // sqlclient_unable_to_establish_sqlconnection
	codeConnectionFailure   = "08006" // connection_failure
	codeProtocolViolation   = "08P01" // protocol_violation
	codeFeatureNotSupported = "0A000"
)

// fatal builds the ErrorResponse the proxy sends before closing a connection.
func fatal(code, msg string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg}
}
