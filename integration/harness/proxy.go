package harness

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/pgwire"
)

// Proxy is a fenceproxy server running in-process on a loopback port.
type Proxy struct {
	Addr string // host:port clients connect to
	Host string
	Port int

	srv *pgwire.Server
}

// Shutdown shuts the proxy down gracefully (pgwire.Server.Shutdown).
func (p *Proxy) Shutdown(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// Reload puts cfg in force for the proxy's new sessions (Server.Reload).
func (p *Proxy) Reload(cfg pgwire.Config) { p.srv.Reload(cfg) }

// StartProxy starts a proxy in front of upstream (host:port) and stops it
// when the test ends. cfg.Upstream and cfg.Logger are filled in when empty;
// the log goes to the test's output.
func StartProxy(t testing.TB, cfg pgwire.Config) *Proxy {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testOutput(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("harness: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := pgwire.NewServer(cfg)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("harness: proxy Serve: %v", err)
		}
	})
	addr := ln.Addr().(*net.TCPAddr)
	return &Proxy{Addr: addr.String(), Host: "127.0.0.1", Port: addr.Port, srv: srv}
}

// DSN returns a URL connection string through the proxy.
func (p *Proxy) DSN(user, password, database string) string {
	u := user
	if password != "" {
		u += ":" + password
	}
	return "postgres://" + u + "@" + p.Host + ":" + strconv.Itoa(p.Port) + "/" + database + "?sslmode=disable"
}
