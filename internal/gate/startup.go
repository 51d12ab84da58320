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
//
// Under Config.Pooled the startup settings are accepted when valid, and
// become the session's tracked ones (see PooledStartup).
func CheckStartup(cfg *Config, params map[string]string) error {
	if cfg != nil && cfg.Pooled {
		_, _, err := PooledStartup(params)
		return err
	}
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

// PooledStartup splits a pooled client's startup parameters into the
// fencing settings it sets for its session (lock.fencing_token and
// lock.resource, as parameters of their own or as -c name=value and
// --name=value in options), which the session tracks, and the rest, which
// pgwire sends to the server in their place: no fencing value reaches a
// shared server connection. The token is validated as ParseToken does. As
// the server does, options are read first, then the parameters of their
// own, which win. A mention of "lock." in options that is not such a
// setting is refused (*StartupError), as is a setting given by two
// parameters (the packet's order is lost) and an invalid token
// (*TokenError).
func PooledStartup(params map[string]string) (tracked Tracked, rest map[string]string, err error) {
	rest = make(map[string]string, len(params))
	set := func(name, value string) error {
		switch fenceBit(strings.ReplaceAll(name, "-", "_")) {
		case fenceToken:
			tracked.Token = 0
			if value != "" {
				n, err := ParseToken(value)
				tracked.Token = n
				return err
			}
		case fenceResource:
			tracked.Resource = value
		}
		return nil
	}
	// The server reads options first, then the other parameters in the
	// packet's order, which a map no longer has: a setting given by two
	// parameters (names that differ in case) is refused.
	for k, v := range params {
		if strings.EqualFold(k, "options") {
			var opts string
			if opts, err = pooledOptions(v, set); err != nil {
				return Tracked{}, nil, err
			}
			if opts != "" {
				rest[k] = opts
			}
		}
	}
	var given uint8
	for k, v := range params {
		switch b := fenceBit(k); {
		case b&given != 0:
			return Tracked{}, nil, refStartupTwice
		case b != 0:
			given |= b
			if err = set(k, v); err != nil {
				return Tracked{}, nil, err
			}
		case !strings.EqualFold(k, "options"):
			rest[k] = v
		}
	}
	return tracked, rest, nil
}

var refStartupTwice = &StartupError{
	Message: "fenceproxy: lock.fencing_token or lock.resource is given twice in the startup parameters",
	Hint:    "Give each once.",
}

// pooledOptions takes the fencing settings out of a startup options
// string, as the server splits it (pg_split_opts: white space separates
// arguments, a backslash makes the next byte literal), calling set for
// each, and returns the other arguments, escaped again.
func pooledOptions(opts string, set func(name, value string) error) (string, error) {
	args := splitOptions(opts)
	var keep []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		var nv string
		switch {
		case a == "-c" && i+1 < len(args):
			i++
			nv = args[i]
		case strings.HasPrefix(a, "-c"):
			nv = a[2:]
		case strings.HasPrefix(a, "--"):
			nv = a[2:]
		}
		name, value, ok := strings.Cut(nv, "=")
		if ok && fenceBit(strings.ReplaceAll(name, "-", "_")) != 0 {
			if err := set(name, value); err != nil {
				return "", err
			}
			continue
		}
		if containsFold(a, "lock.") || containsFold(nv, "lock.") {
			return "", &StartupError{
				Message: "fenceproxy: startup options mention lock.* in a form the proxy cannot keep for the session (transaction pool mode)",
				Hint:    "Use -c lock.fencing_token=N -c lock.resource=R, or SET them after connecting.",
			}
		}
		if nv != "" && a == "-c" {
			keep = append(keep, "-c")
			a = nv
		}
		keep = append(keep, escapeOption(a))
	}
	return strings.Join(keep, " "), nil
}

func splitOptions(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
			continue
		case c == '\\' && i+1 < len(s):
			i++
			c = s[i]
		}
		cur.WriteByte(c)
		in = true
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func escapeOption(a string) string {
	var b strings.Builder
	for i := 0; i < len(a); i++ {
		switch a[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(a[i])
	}
	return b.String()
}
