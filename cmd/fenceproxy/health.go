package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveHTTP starts the operations endpoints on addr:
//
//	/metrics  Prometheus metrics of reg
//	/healthz  200 while the process serves HTTP at all
//	/readyz   200 when the proxy accepts clients and the upstream was
//	          reached lately (a session's connect, or a TCP connect of the
//	          probe's own at most every 10s); 503 with the reason otherwise
//	          (shutting down, upstream unreachable)
//	/admin/...  the admin view (admin.go), loopback clients only unless
//	          adminToken is set
//	/debug/pprof/  Go's profiler, only when pprof is true
//
// The returned function stops the server.
func serveHTTP(addr string, pprof bool, reg *prometheus.Registry, srv *pgwire.Server, upstream, adminToken string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	rd := &readiness{srv: srv, upstream: upstream, now: time.Now, dial: dialUpstream}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := rd.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	handleAdmin(mux, srv, adminToken, log)
	if pprof {
		handlePprof(mux)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "err", err)
		}
	}()
	log.Info("metrics listening", "metrics_listen", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}, nil
}

// Readiness is cached: a probe does not open an upstream connection (one
// PostgreSQL backend forked, one "connection received" line in its log)
// when a session connected successfully within readyFresh, and otherwise
// reuses the last probe connection's answer for readyFresh (success) or
// readyRetry (failure).
const (
	readyFresh = 10 * time.Second
	readyRetry = time.Second
)

// readiness answers /readyz.
type readiness struct {
	srv      *pgwire.Server
	upstream string
	now      func() time.Time
	dial     func(ctx context.Context, upstream string) error // dialUpstream

	mu      sync.Mutex // held across a probe connection: concurrent probes wait for its answer
	checked time.Time  // when the last probe connection was tried
	err     error      // its answer
}

// ready reports why the proxy cannot take clients now, or nil.
func (r *readiness) ready(ctx context.Context) error {
	if r.srv.Draining() {
		return errors.New("shutting down")
	}
	now := r.now()
	if now.Sub(r.srv.LastUpstreamContact()) < readyFresh {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked.IsZero() {
		age := r.now().Sub(r.checked)
		if r.err == nil && age < readyFresh || r.err != nil && age < readyRetry {
			return r.err
		}
	}
	r.err = r.dial(ctx, r.upstream)
	r.checked = r.now()
	return r.err
}

// dialUpstream opens and closes a TCP connection to upstream within a
// second.
func dialUpstream(ctx context.Context, upstream string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", upstream)
	if err != nil {
		return fmt.Errorf("upstream %s: %w", upstream, err)
	}
	conn.Close()
	return nil
}

// handlePprof serves net/http/pprof's handlers on mux under /debug/pprof/
// (registered here, not on http.DefaultServeMux, so that they exist only
// when configured).
func handlePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
