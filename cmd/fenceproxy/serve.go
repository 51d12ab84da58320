package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/fenceproxy/fenceproxy/internal/pgxhwm"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const serveUsage = `Usage: fenceproxy serve [--config FILE] [--listen ADDR] [--upstream ADDR]

Runs the PostgreSQL wire-protocol proxy. Point your application's DSN at the
listen address; database, user and password pass through to the upstream.

Settings come from, weakest first: defaults, the YAML file given by --config,
the environment (FENCEPROXY_LISTEN, FENCEPROXY_UPSTREAM), then flags. Fencing
policy (default_resource, resources, reads, admin_dsn), TLS, limits and
timeouts live in the file; see the README's configuration reference.

SIGTERM or SIGINT: stop accepting, close idle sessions, let transactions
finish within shutdown_timeout, exit 0. SIGHUP: re-read tls_cert and tls_key.

Flags:
`

// newFlagSet returns a flag set whose --help prints usage to stdout and whose
// errors print to stderr.
func newFlagSet(name, usage string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	return fs
}

// parseFlags parses args; --help returns errHelp, which callers treat as success.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return errUsageShown
	}
	return nil
}

var errHelp = errors.New("help shown")

// loadConfig applies defaults < file < env < flags.
func loadConfig(path string, getenv func(string) string, flags map[string]string) (config.Config, error) {
	cfg := config.Default()
	if path != "" {
		if err := cfg.Load(path); err != nil {
			return cfg, err
		}
	}
	cfg.ApplyEnv(getenv)
	if v, ok := flags["listen"]; ok {
		cfg.Listen = v
	}
	if v, ok := flags["upstream"]; ok {
		cfg.Upstream = v
	}
	if v, ok := flags["metrics-listen"]; ok {
		cfg.MetricsListen = v
	}
	return cfg, cfg.Validate()
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", serveUsage, stdout, stderr)
	cfgPath := fs.String("config", "", "YAML configuration `file`")
	fs.String("listen", config.Default().Listen, "`address` clients connect to")
	fs.String("upstream", config.Default().Upstream, "PostgreSQL server `address`")
	fs.String("metrics-listen", "", "`address` of the HTTP server for /metrics, /healthz and /readyz (default: none)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	cfg, err := loadConfig(*cfgPath, getenv, set)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if cfg.AdminDSN != "" {
		verifyStore(ctx, cfg.AdminDSN, log)
		if err := verifyGuard(ctx, cfg, log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	log.Info("fenceproxy listening", "listen", ln.Addr().String(), "upstream", cfg.Upstream,
		"client_tls", cfg.ClientTLS, "tls", cfg.TLSCert != "" && cfg.ClientTLS != "disable", "upstream_tls", cfg.UpstreamTLS)
	pcfg := pgwire.Config{
		Upstream:        cfg.Upstream,
		DialTimeout:     cfg.UpstreamConnectTimeout,
		StartupTimeout:  cfg.StartupTimeout,
		MaxClientConns:  cfg.MaxClientConns,
		MaxMessageBytes: cfg.MaxMessageBytes,
		GoroutineRelay:  cfg.Relay == "goroutines",
		Logger:          log,
		Fencing:         fencingConfig(cfg),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pcfg.Metrics = reg
	certs, err := tlsSettings(cfg, &pcfg)
	if err != nil {
		ln.Close()
		return err
	}
	warnTLS(log, cfg.ClientTLS, pcfg)
	stopHup := watchHangup(certs, log)
	defer stopHup()
	srv := pgwire.NewServer(pcfg)
	if cfg.MetricsListen != "" {
		stopHTTP, err := serveHTTP(cfg.MetricsListen, cfg.DebugPprof, reg, srv, cfg.Upstream, log)
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
	log.Info("fenceproxy shutting down", "shutdown_timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown_timeout reached: sessions still in a transaction were closed", "err", err)
	}
	err = <-served
	log.Info("fenceproxy stopped")
	return err
}

// fencingConfig turns the file's resources into the gate's policy.
func fencingConfig(cfg config.Config) *gate.Config {
	g := &gate.Config{
		Analyzer:        gate.NewAnalyzerBytes(pgwire.DefaultAnalyzerCacheSize, cfg.AnalysisCacheBytes),
		DefaultResource: cfg.DefaultResource,
		ReadsCheckOnly:  cfg.Reads == "check",
		Tables:          map[gate.TableRef]gate.Protection{},
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
	st, err := hwm.Status(ctx, pgxhwm.Querier{Conn: conn})
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
// (README, "TLS"): PostgreSQL's hostssl/hostnossl rules judge the proxy's
// connection, not the client's; and SCRAM over TLS on both legs needs
// channel_binding=disable.
func warnTLS(log *slog.Logger, clientTLS string, pcfg pgwire.Config) {
	if pcfg.UpstreamTLS == pgwire.UpstreamTLSDisable || pcfg.UpstreamTLS == "" {
		return
	}
	if clientTLS != "require" {
		log.Warn("upstream_tls is on but client_tls is not require: PostgreSQL's pg_hba.conf hostssl/hostnossl rules see the proxy's TLS connection, "+
			"so a plaintext client is admitted where they would refuse it; set client_tls: require (see the README)",
			"client_tls", clientTLS, "upstream_tls", string(pcfg.UpstreamTLS))
	}
	if pcfg.TLS != nil {
		log.Info("TLS on both legs: SCRAM clients connecting with TLS need channel_binding=disable (see the README)")
	}
}
