package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/fenceproxy/fenceproxy/internal/fencestorepgx"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

const serveUsage = `Usage: fenceproxy serve [FILE | --config FILE] [--listen ADDR] [--upstream ADDR]

Runs the PostgreSQL wire-protocol proxy. Point your application's DSN at the
listen address; database, user and password pass through to the upstream
(with pool_mode: transaction the proxy checks them itself against auth_file).

Settings come from, weakest first: defaults, the YAML file given by --config,
the environment (FENCEPROXY_LISTEN, FENCEPROXY_UPSTREAM,
FENCEPROXY_METRICS_LISTEN, FENCEPROXY_LOG_LEVEL, FENCEPROXY_LOG_FORMAT, and
the secrets FENCEPROXY_ADMIN_DSN, FENCEPROXY_ADMIN_TOKEN), then flags. Fencing
policy (default_resource, resources, reads, admin_dsn or admin_dsn_file), TLS,
limits, timeouts, logs (log_level, log_format) and pooling (pool_mode,
auth_type, auth_file, …) live in the file; see docs/configuration.md and
docs/operations.md.

SIGTERM or SIGINT: stop accepting, close idle sessions, let transactions
finish within shutdown_timeout, exit 0. A second SIGTERM or SIGINT during
that exits at once, with status 128 + the signal (143, 130). SIGHUP: read the
whole configuration (and auth_file) again; new sessions get it, a file with
problems changes nothing, and keys that need a restart (listen, upstream,
metrics_listen, pool_mode, …) keep their value (docs/operations.md,
"Reload"). --check: check it and exit.

Flags:
`

// configArg takes the one positional argument serve accepts, the
// configuration file (serve FILE, as pgbouncer FILE), into *cfgPath. A
// second argument, or a file given both ways, is a usage error: nothing on
// the command line is ignored.
func configArg(fs *flagSet, cfgPath *string) error {
	switch {
	case fs.NArg() == 0:
		return nil
	case fs.NArg() > 1:
		return fs.usageError("unexpected argument %q (serve takes one configuration file)", fs.Arg(1))
	case *cfgPath != "":
		return fs.usageError("configuration file given twice: --config %s and %s", *cfgPath, fs.Arg(0))
	}
	*cfgPath = fs.Arg(0)
	return nil
}

// loadConfig applies defaults < file < env < flags and validates the
// result. Its error lists every problem it found: keys the file could not
// decode and settings Validate refuses (a file that cannot be read or is
// not YAML stops it at once).
func loadConfig(path string, getenv func(string) string, flags map[string]string) (config.Config, error) {
	cfg := config.Default()
	var decodeErr error
	if path != "" {
		if decodeErr = cfg.Load(path); stopsLoading(decodeErr) {
			return cfg, decodeErr
		}
	}
	cfg.ApplyEnv(getenv)
	if err := cfg.LoadSecrets(os.ReadFile); err != nil {
		return cfg, config.Join(decodeErr, err)
	}
	for flag, key := range map[string]string{"log-level": "log_level", "listen": "listen", "upstream": "upstream", "metrics-listen": "metrics_listen"} {
		if _, ok := flags[flag]; ok {
			cfg.Overridden(key)
		}
	}
	if v, ok := flags["log-level"]; ok {
		cfg.LogLevel = v
	}
	if v, ok := flags["listen"]; ok {
		cfg.Listen = v
	}
	if v, ok := flags["upstream"]; ok {
		cfg.Upstream = v
	}
	if v, ok := flags["metrics-listen"]; ok {
		cfg.MetricsListen = v
	}
	return cfg, config.Join(decodeErr, cfg.Validate())
}

// stopsLoading reports whether err, from config.Load, leaves nothing to
// validate: the file could not be read or is not YAML. Keys it could not
// decode do not stop it; Validate's problems are listed with theirs.
func stopsLoading(err error) bool {
	return err != nil && (!errors.As(err, new(*config.Error)) || errors.As(err, new(*config.SyntaxError)))
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveUsage, stdout, stderr)
	cfgPath := fs.String("config", "", "YAML configuration `file`")
	fs.String("listen", config.Default().Listen, "`address` clients connect to")
	fs.String("upstream", config.Default().Upstream, "PostgreSQL server `address`")
	fs.String("metrics-listen", "", "`address` of the HTTP server for /metrics, /healthz and /readyz (default: none)")
	fs.String("log-level", "info", "log level: debug, info, warn, error (default: log_level, FENCEPROXY_LOG_LEVEL)")
	check := fs.Bool("check", false, "check the configuration (file, environment, flags) and exit: 0 when serve would start with it, 1 listing every problem; opens no port and no connection")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := configArg(fs, cfgPath); err != nil {
		return err
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	if *check {
		return checkConfig(*cfgPath, getenv, set, stdout, stderr)
	}
	cfg, err := loadConfig(*cfgPath, getenv, set)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	log, err := newLogger(level, cfg.LogLevel, cfg.LogFormat, stderr)
	if err != nil {
		return err
	}
	logStart(log, *cfgPath)

	if cfg.AdminDSN != "" {
		verifyStore(ctx, cfg.AdminDSN, log)
		if err := verifyGuard(ctx, cfg, log); err != nil {
			return err
		}
	}
	pcfg, warning, err := serverConfig(cfg, nil)
	if err != nil {
		return err
	}
	if warning != nil {
		log.Warn(warning.Error())
	}
	pcfg.Logger = log
	reg := newRegistry()
	pcfg.Metrics = reg
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv := pgwire.NewServer(pcfg)
	reloads := &reloader{path: *cfgPath, getenv: getenv, flags: set, log: log, level: level, srv: srv,
		analyzer: pcfg.Fencing.Analyzer, cur: cfg, metrics: newReloadMetrics(reg)}
	// Before the listening line: from then on a SIGHUP reloads, never
	// ends the process.
	stopHup := watchHangup(reloads.reload)
	defer stopHup()
	log.Info("fenceproxy listening", "listen", ln.Addr().String(), "upstream", cfg.Upstream,
		"pool_mode", cfg.PoolMode, "client_tls", cfg.ClientTLS, "tls", cfg.TLSCert != "" && cfg.ClientTLS != "disable", "upstream_tls", cfg.UpstreamTLS)
	warnTLS(log, cfg.ClientTLS, pcfg)
	if cfg.MetricsListen != "" {
		stopHTTP, err := serveHTTP(cfg.MetricsListen, cfg.DebugPprof, reg, srv, cfg.Upstream, cfg.AdminToken, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopHTTP()
	}
	// Serve's own context is never cancelled: a signal (ctx) starts a
	// graceful Shutdown instead, bounded by shutdown_timeout.
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.WithoutCancel(ctx), ln) }()
	select {
	case err = <-served:
		log.Info("fenceproxy stopped")
		return err
	case <-ctx.Done():
	}
	stopSig := exitOnSecondSignal(log, os.Exit)
	defer stopSig()
	shutdownTimeout := reloads.current().ShutdownTimeout
	log.Info("fenceproxy shutting down", "shutdown_timeout", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown_timeout reached: sessions still in a transaction were closed", "err", err)
	}
	err = <-served
	log.Info("fenceproxy stopped")
	return err
}

// serverConfig turns cfg into the proxy server's settings, reading the TLS
// files it names and, in transaction pool mode, the auth file; analyzer is
// the one in use (nil: a new one). The caller sets Logger and Metrics, and
// logs warning when it is not nil (poolConfig's).
func serverConfig(cfg config.Config, analyzer *gate.Analyzer) (pcfg pgwire.Config, warning, err error) {
	pcfg = pgwire.Config{
		Upstream:        cfg.Upstream,
		DialTimeout:     cfg.UpstreamConnectTimeout,
		StartupTimeout:  cfg.StartupTimeout,
		MaxClientConns:  cfg.MaxClientConns,
		MaxMessageBytes: cfg.MaxMessageBytes,
		GoroutineRelay:  cfg.Relay == "goroutines",
		EpollLoop:       cfg.Relay == "epoll",
		RefusalLogRate:  cfg.RefusalLogRate,
		RefusalLogBurst: cfg.RefusalLogBurst,
		Fencing:         fencingConfig(cfg, analyzer),
	}
	if _, err := tlsSettings(cfg, &pcfg); err != nil {
		return pcfg, nil, err
	}
	pc, warning, err := poolConfig(cfg)
	if cfg.PoolMode == "transaction" {
		pcfg.Pool = pc
	} else {
		pcfg.Reuse = pc
	}
	return pcfg, warning, err
}

// poolConfig returns the settings of a proxy that authenticates its
// clients, transaction pool mode or session mode with server_reuse, with
// auth_file loaded (read again on every call, so a reload sees new users);
// nil in session mode without server_reuse. warning is clientauth.Load's:
// the file is readable by group or others. With auth_type trust and no
// auth_file, Auth is nil.
func poolConfig(cfg config.Config) (pc *pgwire.PoolConfig, warning, err error) {
	if cfg.PoolMode != "transaction" && !cfg.ServerReuse {
		return nil, nil, nil
	}
	method, err := clientauth.ParseMethod(cfg.AuthType)
	if err != nil {
		return nil, nil, fmt.Errorf("auth_type: %w", err) // Validate refuses it first
	}
	pc = &pgwire.PoolConfig{
		Size:        cfg.PoolSize,
		WaitTimeout: cfg.QueryWaitTimeout,
		IdleTimeout: cfg.ServerIdleTimeout,
		Lifetime:    cfg.ServerLifetime,
		AuthMethod:  method,
	}
	if cfg.AuthFile != "" {
		if pc.Auth, warning, err = clientauth.Load(cfg.AuthFile); err != nil {
			return nil, nil, fmt.Errorf("auth_file: %w", err)
		}
	}
	return pc, warning, nil
}

// fencingConfig turns the file's resources into the gate's policy, with
// analyzer (nil: a new one).
func fencingConfig(cfg config.Config, analyzer *gate.Analyzer) *gate.Config {
	if analyzer == nil {
		analyzer = gate.NewAnalyzerBytes(pgwire.DefaultAnalyzerCacheSize, cfg.AnalysisCacheBytes)
	}
	g := &gate.Config{
		Analyzer:          analyzer,
		DefaultResource:   cfg.DefaultResource,
		ReadsCheckOnly:    cfg.Reads == "check",
		TransactionTokens: cfg.TokenScope == "transaction",
		Tables:            map[gate.TableRef]gate.Protection{},
	}
	for _, t := range cfg.Tables() {
		ref := gate.TableRef{Schema: t.Table.Schema, Name: t.Table.Name}
		g.Tables[ref] = gate.Protection{Resource: t.Resource, RequireToken: t.RequireToken}
	}
	return g
}

// verifyStore logs whether the fence store is installed and sound. It never
// installs anything: the proxy must not own the marks.
func verifyStore(ctx context.Context, dsn string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := connectAdmin(ctx, dsn)
	if err != nil {
		log.Warn("admin_dsn: cannot connect to verify the fence store", "err", err)
		return
	}
	defer conn.Close(context.Background())
	st, err := fencestore.Status(ctx, fencestorepgx.Querier{Conn: conn})
	switch {
	case err != nil:
		log.Warn("fence store not usable: fenced statements will fail until you run fenceproxy migrate", "err", err)
	case !st.OK():
		log.Warn("fence store has problems: fenced statements may fail; run fenceproxy migrate", "status", st.String())
	default:
		log.Info("fence store verified", "status", st.String())
	}
}

// warnTLS logs, at start-up, what TLS to the upstream means for clients
// (docs/security.md, "TLS and authentication"): PostgreSQL's hostssl/hostnossl rules judge the proxy's
// connection, not the client's; and SCRAM over TLS on both legs needs
// channel_binding=disable. The default, upstream_tls: prefer, is
// opportunistic and says nothing: the default config starts without a
// warning, and docs/operations.md gives the advice.
func warnTLS(log *slog.Logger, clientTLS string, pcfg pgwire.Config) {
	if pcfg.UpstreamTLS == pgwire.UpstreamTLSDisable || pcfg.UpstreamTLS == "" {
		return
	}
	explicit := pcfg.UpstreamTLS == pgwire.UpstreamTLSRequire || pcfg.UpstreamTLS == pgwire.UpstreamTLSVerifyFull
	if explicit && clientTLS != "require" {
		log.Warn("upstream_tls is on but client_tls is not require: PostgreSQL's pg_hba.conf hostssl/hostnossl rules see the proxy's TLS connection, "+
			"so a plaintext client is admitted where they would refuse it; set client_tls: require (see docs/security.md)",
			"client_tls", clientTLS, "upstream_tls", string(pcfg.UpstreamTLS))
	}
	if pcfg.TLS != nil {
		log.Info("TLS on both legs: SCRAM clients connecting with TLS need channel_binding=disable (see docs/security.md)")
	}
}
