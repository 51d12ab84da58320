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
	// legs are relayed by event loops over epoll, a few goroutines for all
	// of them) or "goroutines" (two goroutines per session, as TLS sessions
	// always are).
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

	// GuardVerify is what serve does when admin_dsn is set and the
	// database guard (fenceproxy protect) does not match resources:
	// "warn" (default: log it) or "strict" (refuse to start).
	GuardVerify string `yaml:"guard_verify"`
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

// Parse decodes YAML data over c; name is used in error messages.
func (c *Config) Parse(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
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
			if m := yamlLineErr.FindStringSubmatch(e); m != nil {
				msgs = append(msgs, fmt.Sprintf("%s:%s: unknown key %q", name, m[1], m[2]))
			} else if m := yamlLine.FindStringSubmatch(strings.TrimSpace(e)); m != nil {
				msgs = append(msgs, fmt.Sprintf("%s:%s: %s", name, m[1], m[2]))
			} else {
				msgs = append(msgs, fmt.Sprintf("%s: %s", name, e))
			}
		}
		return fmt.Errorf("config: %s", strings.Join(msgs, "; "))
	}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("config: %s:%s: %s", name, m[1], m[2])
	}
	return fmt.Errorf("config: %s: %w", name, err)
}

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
		}
	}
	if v := getenv(Env["admin_dsn"]); v != "" {
		c.AdminDSN, c.AdminDSNFile = v, ""
	}
	if v := getenv(Env["admin_token"]); v != "" {
		c.AdminToken, c.AdminTokenFile = v, ""
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

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if err := checkAddr("listen", c.Listen); err != nil {
		return err
	}
	if err := checkAddr("upstream", c.Upstream); err != nil {
		return err
	}
	if c.MetricsListen != "" {
		if err := checkAddr("metrics_listen", c.MetricsListen); err != nil {
			return err
		}
	}
	if c.DebugPprof && c.MetricsListen == "" {
		return errors.New("config: debug_pprof: needs metrics_listen, the address it is served on")
	}
	if c.Relay != "loop" && c.Relay != "goroutines" {
		return fmt.Errorf("config: relay: %q is neither \"loop\" nor \"goroutines\"", c.Relay)
	}
	if c.Reads != "advance" && c.Reads != "check" {
		return fmt.Errorf("config: reads: %q is neither \"advance\" nor \"check\"", c.Reads)
	}
	if c.TokenScope != "session" && c.TokenScope != "transaction" {
		return fmt.Errorf("config: token_scope: %q is neither \"session\" nor \"transaction\"", c.TokenScope)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if err := c.validateLogs(); err != nil {
		return err
	}
	if c.GuardVerify != "warn" && c.GuardVerify != "strict" {
		return fmt.Errorf("config: guard_verify: %q is neither \"warn\" nor \"strict\"", c.GuardVerify)
	}
	return c.validateResources()
}

// validateResources checks every resource and table name; a table listed
// twice is an error, naming both places.
func (c *Config) validateResources() error {
	seen := map[Table]string{}
	for k, r := range c.Resources {
		if r.Name == "" {
			return fmt.Errorf("config: resources[%d]: name is required", k)
		}
		if len(r.Tables) == 0 {
			return fmt.Errorf("config: resources[%d] (%s): tables is empty", k, r.Name)
		}
		for i := range r.Tables {
			t, where, err := c.TableAt(k, i)
			if err != nil {
				return fmt.Errorf("config: %s: %w", where, err)
			}
			if other, dup := seen[t]; dup {
				return fmt.Errorf("config: %s: table %s is listed under both resource %q and %q", where, t, other, r.Name)
			}
			seen[t] = r.Name
		}
	}
	return nil
}

func (c *Config) validateTLS() error {
	switch c.ClientTLS {
	case "disable", "allow", "require":
	default:
		return fmt.Errorf("config: client_tls: %q is not one of disable, allow, require", c.ClientTLS)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("config: tls_cert and tls_key: set both or neither")
	}
	if c.ClientTLS == "require" && c.TLSCert == "" {
		return errors.New("config: client_tls: require needs tls_cert and tls_key")
	}
	switch c.UpstreamTLS {
	case "disable", "prefer", "require", "verify-full":
	default:
		return fmt.Errorf("config: upstream_tls: %q is not one of disable, prefer, require, verify-full", c.UpstreamTLS)
	}
	if c.UpstreamCA != "" && c.UpstreamTLS != "verify-full" {
		return fmt.Errorf("config: upstream_ca: only used with upstream_tls: verify-full (upstream_tls is %q)", c.UpstreamTLS)
	}
	return nil
}

func (c *Config) validateLimits() error {
	if c.MaxClientConns < 1 {
		return fmt.Errorf("config: max_client_conns: %d, want at least 1", c.MaxClientConns)
	}
	// The bound must leave room for a query, and PostgreSQL refuses
	// anything past 1 GiB itself.
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > 1<<30-1 {
		return fmt.Errorf("config: max_message_bytes: %d, want 1024 to 1073741823 (PostgreSQL's own limit)", c.MaxMessageBytes)
	}
	if c.AnalysisCacheBytes < 0 {
		return fmt.Errorf("config: analysis_cache_bytes: %d, want 0 (no cache) or more", c.AnalysisCacheBytes)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"startup_timeout", c.StartupTimeout},
		{"upstream_connect_timeout", c.UpstreamConnectTimeout},
		{"shutdown_timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("config: %s: %s, want a positive duration such as \"10s\"", d.key, d.v)
		}
	}
	return nil
}

func (c *Config) validateLogs() error {
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log_level: %q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("config: log_format: %q is neither \"text\" nor \"json\"", c.LogFormat)
	}
	if c.RefusalLogRate <= 0 || c.RefusalLogBurst < 1 {
		return fmt.Errorf("config: refusal_log_rate and refusal_log_burst: %v and %d, want a positive rate and a burst of at least 1", c.RefusalLogRate, c.RefusalLogBurst)
	}
	return nil
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
