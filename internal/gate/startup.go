package gate

import (
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
)

// StartupError is the reason a client's startup message is refused.
type StartupError struct{ Message, Hint string }

func (e *StartupError) Error() string { return e.Message }

// SQLState returns 55Z05.
func (e *StartupError) SQLState() string { return sqlstate.SessionToken }

// CheckStartup returns an error when the startup parameters of a new client
// set lock.fencing_token or lock.resource for the session (as a parameter of
// their own, or in options: PGOPTIONS, -c lock.fencing_token=42) under
// Config.TransactionTokens, where a session-level value would be left on a
// server connection other clients get next. Any mention of "lock." in
// options, once backslashes are dropped (the server reads "\x" as "x":
// "-c l\ock.resource=r"), counts: the server's own rules for options
// (escapes, --name=value) need not be followed further to refuse.
// Otherwise it returns nil.
func CheckStartup(cfg *Config, params map[string]string) error {
	if cfg == nil || !cfg.TransactionTokens {
		return nil
	}
	for k, v := range params {
		if fenceBit(k) != 0 || strings.EqualFold(k, "options") && containsFold(strings.ReplaceAll(v, `\`, ""), "lock.") {
			return &StartupError{
				Message: "fenceproxy: lock.fencing_token and lock.resource cannot be set at startup here (token_scope: transaction)",
				Hint:    "Set them inside each transaction with SET LOCAL, or carry them in a /* fencing_token=N resource=R */ comment; or connect through a proxy with token_scope: session and no transaction pooler.",
			}
		}
	}
	return nil
}
