package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus"
)

// TestPprofOnlyWhenConfigured: /debug/pprof/ is served on metrics_listen
// with debug_pprof, and is not there without it.
func TestPprofOnlyWhenConfigured(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr := freeAddr(t)
		srv := pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1"})
		stop, err := serveHTTP(addr, on, prometheus.NewRegistry(), srv, "127.0.0.1:1", "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]int{"/debug/pprof/": 404, "/debug/pprof/cmdline": 404, "/metrics": 200} {
			if on && path != "/metrics" {
				want = 200
			}
			if got := get(t, "http://"+addr+path); got != want {
				t.Errorf("debug_pprof %v: GET %s = %d, want %d", on, path, got, want)
			}
		}
		stop()
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestReadyzDoesNotConnectPerProbe: ten /readyz probes open at most one
// connection to the upstream (each one forks a PostgreSQL backend); the
// next comes once the answer is readyFresh old, or readyRetry after a
// failure.
func TestReadyzDoesNotConnectPerProbe(t *testing.T) {
	now := time.Unix(1000, 0)
	dials := 0
	var fail error
	r := &readiness{srv: pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1"}), upstream: "127.0.0.1:1",
		now:  func() time.Time { return now },
		dial: func(context.Context, string) error { dials++; return fail }}
	for i := range 10 {
		if err := r.ready(t.Context()); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
	}
	if dials != 1 {
		t.Fatalf("10 probes dialled the upstream %d times, want 1", dials)
	}
	now = now.Add(readyFresh)
	fail = errors.New("refused")
	if err := r.ready(t.Context()); err == nil || dials != 2 {
		t.Fatalf("after readyFresh: err %v, dials %d; want the new failure, 2", err, dials)
	}
	r.ready(t.Context())
	now = now.Add(readyRetry)
	fail = nil
	if err := r.ready(t.Context()); err != nil || dials != 3 {
		t.Fatalf("after readyRetry: err %v, dials %d; want nil, 3", err, dials)
	}
}

// TestReadyzServed: /readyz on the metrics listener answers 200 with the
// upstream up and 503 while it is down.
func TestReadyzServed(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer up.Close()
	for upstream, want := range map[string]int{up.Addr().String(): 200, "127.0.0.1:1": 503} {
		addr := freeAddr(t)
		srv := pgwire.NewServer(pgwire.Config{Upstream: upstream})
		stop, err := serveHTTP(addr, false, prometheus.NewRegistry(), srv, upstream, "", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, "http://"+addr+"/readyz"); got != want {
			t.Errorf("upstream %s: /readyz %d, want %d", upstream, got, want)
		}
		stop()
	}
}
