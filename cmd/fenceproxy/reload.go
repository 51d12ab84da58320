package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/fenceproxy/fenceproxy/config"
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus"
)

// reloader re-reads serve's whole configuration on SIGHUP: the file, the
// environment and the flags, as at start-up. A configuration with any
// problem changes nothing. Otherwise what can change live is put in force
// for new sessions at once (pgwire.Server.Reload swaps one pointer), the
// log level for every line from now on; the settings that need a restart
// keep their value and are named in a warning.
type reloader struct {
	path     string
	getenv   func(string) string
	flags    map[string]string
	log      *slog.Logger
	level    *slog.LevelVar
	srv      *pgwire.Server
	analyzer *gate.Analyzer // kept across reloads: its cache stays warm
	metrics  reloadMetrics

	mu  sync.Mutex
	cur config.Config // in force
}

// current returns the configuration in force.
func (r *reloader) current() config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// reload loads the configuration and puts it in force, or logs why not.
func (r *reloader) reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := loadConfig(r.path, r.getenv, r.flags)
	var kept []string
	var pcfg pgwire.Config
	var warning error
	if err == nil {
		kept = keepRestartSettings(&next, r.cur)
		pcfg, warning, err = serverConfig(next, r.analyzer) // reads auth_file again
	}
	if err != nil {
		r.metrics.failed()
		r.log.Error("SIGHUP: configuration not reloaded: it has problems; the one in force stays",
			"config", r.path, "problems", len(config.Problems(err)), "err", err)
		return
	}
	if warning != nil {
		r.log.Warn("SIGHUP: " + warning.Error())
	}
	if len(kept) > 0 {
		r.log.Warn("SIGHUP: settings that need a restart were changed; they keep their value until then", "keys", kept)
	}
	r.srv.Reload(pcfg)
	setLevel(r.level, next.LogLevel) // validated
	r.cur = next
	r.metrics.succeeded()
	r.log.Info("SIGHUP: configuration reloaded; new sessions use it, open sessions keep theirs",
		"config", r.path, "resources", len(next.Resources), "tables", len(next.Tables()))
}

// keepRestartSettings sets next's settings that cannot change while serve
// runs back to cur's, and returns the keys of those that differed.
func keepRestartSettings(next *config.Config, cur config.Config) []string {
	var kept []string
	keep(&kept, "listen", &next.Listen, cur.Listen)
	keep(&kept, "upstream", &next.Upstream, cur.Upstream)
	keep(&kept, "metrics_listen", &next.MetricsListen, cur.MetricsListen)
	keep(&kept, "debug_pprof", &next.DebugPprof, cur.DebugPprof)
	keep(&kept, "relay", &next.Relay, cur.Relay)
	keep(&kept, "log_format", &next.LogFormat, cur.LogFormat)
	keep(&kept, "admin_dsn", &next.AdminDSN, cur.AdminDSN)
	keep(&kept, "admin_token", &next.AdminToken, cur.AdminToken)
	keep(&kept, "guard_verify", &next.GuardVerify, cur.GuardVerify)
	// A Server has its pool, or none, for life.
	keep(&kept, "pool_mode", &next.PoolMode, cur.PoolMode)
	keep(&kept, "server_reuse", &next.ServerReuse, cur.ServerReuse)
	keep(&kept, "analysis_cache_bytes", &next.AnalysisCacheBytes, cur.AnalysisCacheBytes) // the analyzer outlives reloads
	return kept
}

// keep sets *next to cur and records key when they differ.
func keep[T comparable](kept *[]string, key string, next *T, cur T) {
	if *next != cur {
		*kept = append(*kept, key)
		*next = cur
	}
}

// reloadMetrics are the reload's metrics, named as Prometheus names its
// own (prometheus_config_last_reload_successful, …).
type reloadMetrics struct {
	successful prometheus.Gauge
	timestamp  prometheus.Gauge
	failures   prometheus.Counter
}

func newReloadMetrics(reg prometheus.Registerer) reloadMetrics {
	m := reloadMetrics{
		successful: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fenceproxy_config_last_reload_successful",
			Help: "1 when the last configuration load (at start-up or on SIGHUP) was put in force, 0 when it had problems and the previous configuration stayed."}),
		timestamp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fenceproxy_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last configuration load put in force (start-up or SIGHUP)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "fenceproxy_config_reload_failures_total",
			Help: "SIGHUP reloads refused because the configuration had problems (the previous one stayed in force)."}),
	}
	reg.MustRegister(m.successful, m.timestamp, m.failures)
	m.succeeded() // the start-up load
	return m
}

func (m reloadMetrics) succeeded() {
	m.successful.Set(1)
	m.timestamp.SetToCurrentTime()
}

func (m reloadMetrics) failed() {
	m.successful.Set(0)
	m.failures.Inc()
}

// watchHangup registers for SIGHUP (so the signal no longer ends the
// process) and calls reload on each one, one at a time. Calling the
// returned stop unregisters and waits for a reload under way; it may be
// called more than once.
func watchHangup(reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
