package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"go.yaml.in/yaml/v3"
)

// Config is the proxy's configuration. The zero value is not valid; start
// from Default.
type Config struct {
	// Listen is the address clients connect to (host:port).
	Listen string `yaml:"listen"`
	// Upstream is the PostgreSQL server's address (host:port).
	Upstream string `yaml:"upstream"`

	// DefaultResource is the resource of a fencing token that names none
	// (no resource= comment, no lock.resource, no mapped table). Empty: such
	// a token is refused with 22023.
	DefaultResource string `yaml:"default_resource"`
	// Resources map tables to the resource whose mark fences them.
	Resources []Resource `yaml:"resources"`
	// Reads is "advance" (default: a token-carrying transaction's first
	// read advances the mark, shutting out the old holder at once) or
	// "check" (reads only check the mark).
	Reads string `yaml:"reads"`
	// TokenScope is "session" (default: lock.fencing_token and
	// lock.resource count wherever PostgreSQL has them, also when set for
	// the session or at startup) or "transaction": only what each
	// transaction sets itself (SET LOCAL, set_config with is_local true) or
	// a statement's comment counts; session-level values are refused. Use
	// "transaction" whenever a transaction-mode pooler (PgBouncer
	// pool_mode = transaction) is in front of the proxy or behind it
	// (docs/topologies.md).
	TokenScope string `yaml:"token_scope"`
	// AdminDSN, when set, lets the proxy verify the fence store at start-up
	// and log what is missing. The proxy never installs it. It may hold a
	// password: it can come from FENCEPROXY_ADMIN_DSN or from the file
	// AdminDSNFile instead of this file.
	AdminDSN string `yaml:"admin_dsn"`
	// AdminDSNFile names a file whose content (surrounding blank space
	// removed) is admin_dsn; not both. Read by LoadSecrets.
	AdminDSNFile string `yaml:"admin_dsn_file"`
	// AdminToken, when set, lets clients other than loopback ones use the
	// admin view on metrics_listen (/admin/...) with the header
	// "Authorization: Bearer TOKEN". Empty: only loopback clients may.
	// From FENCEPROXY_ADMIN_TOKEN or AdminTokenFile too.
	AdminToken string `yaml:"admin_token"`
	// AdminTokenFile names a file whose content is admin_token; not both.
	AdminTokenFile string `yaml:"admin_token_file"`

	// LogLevel is debug, info (default), warn or error.
	LogLevel string `yaml:"log_level"`
	// LogFormat is text (default: log/slog's key=value lines) or json (one
	// JSON object a line).
	LogFormat string `yaml:"log_format"`
	// RefusalLogRate and RefusalLogBurst bound the lines logged for
	// refused statements, all sessions together: a token bucket of
	// RefusalLogBurst lines (default 100) refilled at RefusalLogRate lines
	// a second (default 10). Lines beyond it are counted and reported.
	RefusalLogRate  float64 `yaml:"refusal_log_rate"`
	RefusalLogBurst int     `yaml:"refusal_log_burst"`
	// MetricsListen is the address of the HTTP server for /metrics
	// (Prometheus), /healthz and /readyz. Empty: no HTTP server.
	MetricsListen string `yaml:"metrics_listen"`
	// DebugPprof serves Go's profiler (net/http/pprof) under /debug/pprof/
	// on metrics_listen. Off by default: a profile shows query texts in
	// flight and costs CPU while it runs; turn it on to find where the
	// proxy's time goes, on an address only operators reach.
	DebugPprof bool `yaml:"debug_pprof"`
	// Relay is "loop" (default: on Linux, sessions with plain TCP on both
	// legs are relayed by event loops, a few threads for all of them, over
	// io_uring where the kernel offers it, else over epoll), "epoll" (the
	// loops over epoll even where io_uring is there) or "goroutines" (two
	// goroutines per session, as TLS sessions always are).
	Relay string `yaml:"relay"`

	// TLSCert and TLSKey are PEM files of the certificate (chain) and key
	// the proxy presents to clients that ask for TLS. Both or neither; they
	// are re-read on SIGHUP.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// ClientTLS is "disable" (answer every SSLRequest 'N'), "allow"
	// (default: TLS for clients that ask, when tls_cert is set) or
	// "require" (refuse plaintext clients with 28000; needs tls_cert).
	ClientTLS string `yaml:"client_tls"`
	// UpstreamTLS is "disable", "prefer" (default: TLS if the server
	// offers it, unverified), "require" (TLS, unverified) or "verify-full"
	// (TLS, chain checked against UpstreamCA and the upstream host name).
	UpstreamTLS string `yaml:"upstream_tls"`
	// UpstreamCA is a PEM file of CA certificates for verify-full; empty
	// means the system's roots.
	UpstreamCA string `yaml:"upstream_ca"`

	// MaxClientConns bounds concurrent client connections (default 100).
	MaxClientConns int `yaml:"max_client_conns"`
	// MaxMessageBytes bounds the client messages the proxy decodes whole:
	// Query, Parse, Describe, Close, Execute (default 64 MiB).
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// AnalysisCacheBytes bounds the memory of the cache of statement
	// analyses shared by all sessions: query texts and what the proxy
	// learnt from them (default 64 MiB). 0 disables the cache.
	AnalysisCacheBytes int `yaml:"analysis_cache_bytes"`
	// StartupTimeout bounds a client's startup and authentication
	// (default 10s).
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// UpstreamConnectTimeout bounds connecting to the upstream (default 10s).
	UpstreamConnectTimeout time.Duration `yaml:"upstream_connect_timeout"`
	// ShutdownTimeout is how long SIGTERM waits for sessions in a
	// transaction before closing them with 57P01 (default 30s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// PoolMode is "session" (default: each client has its own server
	// connection for its whole life, its login relayed to the server) or
	// "transaction": the proxy authenticates clients itself (AuthType,
	// AuthFile) and lends them shared server connections per (database,
	// user) for one transaction at a time. PgBouncer's pool_mode. The other
	// pool keys only count in transaction mode.
	PoolMode string `yaml:"pool_mode"`
	// ServerReuse, in session mode, has the proxy authenticate clients
	// itself (AuthType, AuthFile) and give a server connection a client
	// left idle to the next client of the same database, user and startup
	// parameters, reset with DISCARD ALL, as PgBouncer's session mode
	// does (default false: each client's login goes to the server, on a
	// new connection). ServerIdleTimeout and ServerLifetime bound the
	// connections kept.
	ServerReuse bool `yaml:"server_reuse"`
	// PoolSize bounds the server connections per (database, user)
	// (default 20; PgBouncer's default_pool_size).
	PoolSize int `yaml:"pool_size"`
	// QueryWaitTimeout bounds a client's wait for a server connection
	// (default 120s); it is then closed with 53300.
	QueryWaitTimeout time.Duration `yaml:"query_wait_timeout"`
	// ServerIdleTimeout closes a server connection idle this long
	// (default 600s).
	ServerIdleTimeout time.Duration `yaml:"server_idle_timeout"`
	// ServerLifetime closes a server connection this old when it is
	// returned (default 3600s).
	ServerLifetime time.Duration `yaml:"server_lifetime"`
	// AuthType is how clients prove who they are in transaction mode:
	// trust, password, md5 or scram-sha-256 (default), as
	// clientauth.ParseMethod reads it.
	AuthType string `yaml:"auth_type"`
	// AuthFile is a PgBouncer-format userlist ("user" "secret" lines); the
	// proxy logs in to the server with the plain password it has for the
	// client's user. Required in transaction mode unless AuthType is
	// trust. Read by serve, at start and on SIGHUP.
	AuthFile string `yaml:"auth_file"`

	// GuardVerify is what serve does when admin_dsn is set and the
	// database guard (fenceproxy protect) does not match resources:
	// "warn" (default: log it) or "strict" (refuse to start).
	GuardVerify string `yaml:"guard_verify"`

	source string         // the file Parse read, for problems' places
	lines  map[string]int // the line of each top-level key in source
}

// Resource is one entry of Config.Resources.
type Resource struct {
	// Name is the resource whose high-water mark fences the tables.
	Name string `yaml:"name"`
	// Tables are "schema.table", or "table" for a table of that name in
	// any schema, with PostgreSQL's identifier rules: unquoted names fold
	// to lower case, quoted ones (public."Jobs") are kept exactly, and a
	// name longer than 63 bytes is refused (PostgreSQL would truncate it).
	Tables []string `yaml:"tables"`
	// RequireToken refuses writes to the tables without a fencing token
	// (SQLSTATE 55Z02): the table filter.
	RequireToken bool `yaml:"require_token"`

	lines  []int  // the file line of each table, when parsed from YAML
	line   int    // the file line of the entry
	source string // the file it was parsed from
}

// Default returns the configuration used when nothing overrides it.
func Default() Config {
	return Config{
		Listen:     "127.0.0.1:6432",
		Upstream:   "127.0.0.1:5432",
		Reads:      "advance",
		TokenScope: "session",
		Relay:      "loop",

		GuardVerify: "warn",

		PoolMode:          "session",
		PoolSize:          20,
		QueryWaitTimeout:  120 * time.Second,
		ServerIdleTimeout: 600 * time.Second,
		ServerLifetime:    3600 * time.Second,
		AuthType:          "scram-sha-256",

		LogLevel:        "info",
		LogFormat:       "text",
		RefusalLogRate:  10,
		RefusalLogBurst: 100,

		ClientTLS:   "allow",
		UpstreamTLS: "prefer",

		MaxClientConns:         100,
		MaxMessageBytes:        64 << 20,
		AnalysisCacheBytes:     64 << 20,
		StartupTimeout:         10 * time.Second,
		UpstreamConnectTimeout: 10 * time.Second,
		ShutdownTimeout:        30 * time.Second,
	}
}

// Env names the environment variable for each setting that has one.
var Env = map[string]string{
	"listen":         "FENCEPROXY_LISTEN",
	"upstream":       "FENCEPROXY_UPSTREAM",
	"metrics_listen": "FENCEPROXY_METRICS_LISTEN",
	"log_level":      "FENCEPROXY_LOG_LEVEL",
	"log_format":     "FENCEPROXY_LOG_FORMAT",
	"admin_dsn":      "FENCEPROXY_ADMIN_DSN",
	"admin_token":    "FENCEPROXY_ADMIN_TOKEN",
}

// Load reads the YAML file at path over c. Keys absent from the file keep
// their value in c. Unknown keys and type errors are reported with the file
// name and line.
func (c *Config) Load(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return c.Parse(path, data)
}

var yamlLineErr = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse decodes YAML data over c; name is used in error messages. A type
// error does not stop it: the error (an *Error) lists every key it could
// not decode, and the others are decoded, so that Validate can report
// theirs too. A syntax error decodes nothing.
func (c *Config) Parse(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
	c.source, c.lines = name, keyLines(data)
	for k := range c.Resources {
		c.Resources[k].source = name
	}
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, 0, len(te.Errors))
		for _, e := range te.Errors {
			msgs = append(msgs, yamlProblem(name, e))
		}
		return &Error{Problems: msgs}
	}
	return &SyntaxError{Err: &Error{Problems: []string{yamlProblem(name, err.Error())}}}
}

// SyntaxError is a file that is not YAML at all: nothing was decoded, so
// there is nothing to validate.
type SyntaxError struct{ Err *Error }

func (e *SyntaxError) Error() string { return e.Err.Error() }
func (e *SyntaxError) Unwrap() error { return e.Err }

// Overridden records that key no longer has the file's value (a flag or
// the environment set it): its problems are not placed at the file's line.
func (c *Config) Overridden(key string) { delete(c.lines, key) }

// ApplyEnv overrides c with the FENCEPROXY_* variables that getenv returns
// non-empty.
// A secret from the environment replaces the file's, and its _file key.
func (c *Config) ApplyEnv(getenv func(string) string) {
	for key, dst := range map[string]*string{
		"listen": &c.Listen, "upstream": &c.Upstream, "metrics_listen": &c.MetricsListen,
		"log_level": &c.LogLevel, "log_format": &c.LogFormat,
	} {
		if v := getenv(Env[key]); v != "" {
			*dst = v
			c.Overridden(key)
		}
	}
	if v := getenv(Env["admin_dsn"]); v != "" {
		c.AdminDSN, c.AdminDSNFile = v, ""
		c.Overridden("admin_dsn")
	}
	if v := getenv(Env["admin_token"]); v != "" {
		c.AdminToken, c.AdminTokenFile = v, ""
		c.Overridden("admin_token")
	}
}

// LoadSecrets reads admin_dsn_file and admin_token_file, when set, with
// readFile (os.ReadFile), into AdminDSN and AdminToken. Setting a key and
// its _file both is an error. Call it after ApplyEnv.
func (c *Config) LoadSecrets(readFile func(string) ([]byte, error)) error {
	for _, s := range []struct {
		key         string
		value, from *string
	}{
		{"admin_dsn", &c.AdminDSN, &c.AdminDSNFile},
		{"admin_token", &c.AdminToken, &c.AdminTokenFile},
	} {
		if *s.from == "" {
			continue
		}
		if *s.value != "" {
			return fmt.Errorf("config: %s and %s_file: set one, not both", s.key, s.key)
		}
		data, err := readFile(*s.from)
		if err != nil {
			return fmt.Errorf("config: %s_file: %w", s.key, err)
		}
		if *s.value = strings.TrimSpace(string(data)); *s.value == "" {
			return fmt.Errorf("config: %s_file: %s is empty", s.key, *s.from)
		}
	}
	return nil
}

// Validate reports every setting that cannot work, in one *Error, each
// problem at its line when the setting was read from a file.
func (c *Config) Validate() error {
	p := &problems{c: c}
	p.addr("listen", c.Listen, true)
	p.addr("upstream", c.Upstream, true)
	p.addr("metrics_listen", c.MetricsListen, false)
	if c.DebugPprof && c.MetricsListen == "" {
		p.add("debug_pprof", "debug_pprof", "needs metrics_listen, the address it is served on")
	}
	p.oneOf("relay", c.Relay, "loop", "epoll", "goroutines")
	p.oneOf("reads", c.Reads, "advance", "check")
	p.oneOf("token_scope", c.TokenScope, "session", "transaction")
	c.validateTLS(p)
	c.validateLimits(p)
	c.validateLogs(p)
	p.oneOf("guard_verify", c.GuardVerify, "warn", "strict")
	c.validatePool(p)
	c.validateResources(p)
	return p.err()
}

// oneOf records a problem unless v is one of want.
func (p *problems) oneOf(key, v string, want ...string) {
	for _, w := range want {
		if v == w {
			return
		}
	}
	if len(want) == 2 {
		p.add(key, key, "%q is neither %q nor %q", v, want[0], want[1])
		return
	}
	p.add(key, key, "%q is not one of %s", v, strings.Join(want, ", "))
}

// addr records a problem unless v is host:port (or empty, when optional).
func (p *problems) addr(key, v string, required bool) {
	if v == "" && !required {
		return
	}
	if err := checkAddr(key, v); err != nil {
		p.add(key, key, "%s", strings.TrimPrefix(err.Error(), "config: "+key+": "))
	}
}

// validateResources checks every resource and table name; a table listed
// twice is an error, naming both places.
func (c *Config) validateResources(p *problems) {
	seen := map[Table]string{}
	for k, r := range c.Resources {
		where := fmt.Sprintf("resources[%d]", k)
		if r.source != "" && r.line > 0 {
			where = fmt.Sprintf("%s:%d: resources[%d]", r.source, r.line, k)
		}
		if r.Name == "" {
			p.addAt(where, "name is required")
		}
		if len(r.Tables) == 0 {
			p.addAt(where, "(%s) tables is empty", r.Name)
		}
		for i := range r.Tables {
			t, at, err := c.TableAt(k, i)
			if err != nil {
				p.addAt(at, "%v", err)
				continue
			}
			if other, dup := seen[t]; dup {
				p.addAt(at, "table %s is listed under both resource %q and %q", t, other, r.Name)
			}
			seen[t] = r.Name
		}
	}
}

func (c *Config) validateTLS(p *problems) {
	p.oneOf("client_tls", c.ClientTLS, "disable", "allow", "require")
	if (c.TLSCert == "") != (c.TLSKey == "") {
		p.add("tls_cert", "tls_cert and tls_key", "set both or neither")
	}
	if c.ClientTLS == "require" && c.TLSCert == "" {
		p.add("client_tls", "client_tls", "require needs tls_cert and tls_key")
	}
	p.oneOf("upstream_tls", c.UpstreamTLS, "disable", "prefer", "require", "verify-full")
	if c.UpstreamCA != "" && c.UpstreamTLS != "verify-full" {
		p.add("upstream_ca", "upstream_ca", "only used with upstream_tls: verify-full (upstream_tls is %q)", c.UpstreamTLS)
	}
}

func (c *Config) validateLimits(p *problems) {
	if c.MaxClientConns < 1 {
		p.add("max_client_conns", "max_client_conns", "%d, want at least 1", c.MaxClientConns)
	}
	// The bound must leave room for a query, and PostgreSQL refuses
	// anything past 1 GiB itself.
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > 1<<30-1 {
		p.add("max_message_bytes", "max_message_bytes", "%d, want 1024 to 1073741823 (PostgreSQL's own limit)", c.MaxMessageBytes)
	}
	if c.AnalysisCacheBytes < 0 {
		p.add("analysis_cache_bytes", "analysis_cache_bytes", "%d, want 0 (no cache) or more", c.AnalysisCacheBytes)
	}
	p.positive("10s", namedDuration{"startup_timeout", c.StartupTimeout},
		namedDuration{"upstream_connect_timeout", c.UpstreamConnectTimeout},
		namedDuration{"shutdown_timeout", c.ShutdownTimeout})
}

// namedDuration is a duration key's name and value, for problems.positive.
type namedDuration struct {
	key string
	v   time.Duration
}

// positive adds a problem for each duration that is not above zero;
// example is a good value to name.
func (p *problems) positive(example string, ds ...namedDuration) {
	for _, d := range ds {
		if d.v <= 0 {
			p.add(d.key, d.key, "%s, want a positive duration such as %q", d.v, example)
		}
	}
}

// validatePool checks the transaction pool keys. Their values are checked
// in either mode; auth_file is required only in transaction mode.
func (c *Config) validatePool(p *problems) {
	p.oneOf("pool_mode", c.PoolMode, "session", "transaction")
	if c.PoolSize < 1 {
		p.add("pool_size", "pool_size", "%d, want at least 1", c.PoolSize)
	}
	// Zero is refused rather than read as PgBouncer reads it (no limit, or
	// for server_lifetime one use per connection).
	p.positive("120s", namedDuration{"query_wait_timeout", c.QueryWaitTimeout},
		namedDuration{"server_idle_timeout", c.ServerIdleTimeout},
		namedDuration{"server_lifetime", c.ServerLifetime})
	method, err := clientauth.ParseMethod(c.AuthType)
	if err != nil {
		p.add("auth_type", "auth_type", "%q is not one of trust, password, md5, scram-sha-256", c.AuthType)
	}
	if c.PoolMode == "transaction" && c.AuthFile == "" && (err != nil || method != clientauth.Trust) {
		p.add("pool_mode", "auth_file", "required with pool_mode: transaction unless auth_type is trust: the proxy authenticates clients itself")
	}
	if c.ServerReuse && c.PoolMode == "transaction" {
		p.add("server_reuse", "server_reuse", "applies to pool_mode: session (transaction mode always shares server connections)")
	}
	if c.ServerReuse && c.PoolMode == "session" && c.AuthFile == "" && (err != nil || method != clientauth.Trust) {
		p.add("server_reuse", "auth_file", "required with server_reuse unless auth_type is trust: the proxy authenticates clients itself")
	}
}

func (c *Config) validateLogs(p *problems) {
	p.oneOf("log_level", c.LogLevel, "debug", "info", "warn", "error")
	p.oneOf("log_format", c.LogFormat, "text", "json")
	if c.RefusalLogRate <= 0 || c.RefusalLogBurst < 1 {
		key := "refusal_log_rate"
		if c.RefusalLogRate > 0 {
			key = "refusal_log_burst"
		}
		p.add(key, "refusal_log_rate and refusal_log_burst", "%v and %d, want a positive rate and a burst of at least 1", c.RefusalLogRate, c.RefusalLogBurst)
	}
}

func checkAddr(key, addr string) error {
	if addr == "" {
		return fmt.Errorf("config: %s: required (host:port)", key)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("config: %s: %q is not host:port: %w", key, addr, err)
	}
	return nil
}
