package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/prometheus/client_golang/prometheus"
)

// TestPprofOnlyWhenConfigured: /debug/pprof/ is served on metrics_listen
// with debug_pprof, and is not there without it.
func TestPprofOnlyWhenConfigured(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr := freeAddr(t)
		srv := pgwire.NewServer(pgwire.Config{Upstream: "127.0.0.1:1"})
		stop, err := serveHTTP(addr, on, prometheus.NewRegistry(), srv, "127.0.0.1:1", slog.New(slog.DiscardHandler))
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
