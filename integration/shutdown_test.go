package integration

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// serveWithConfig runs `fenceproxy serve` with a config file in front of the
// harness cluster and returns an env pointing at it.
func serveWithConfig(t *testing.T, yaml string) (*env, *exec.Cmd, *syncBuffer) {
	t.Helper()
	pg := harness.Postgres(t)
	cfg := filepath.Join(t.TempDir(), "fenceproxy.yaml")
	writeFile(t, cfg, "listen: 127.0.0.1:0\nupstream: "+pg.Addr()+"\n"+yaml)
	addr, cmd, logs := startServe(t, nil, "--config", cfg)
	host, port := splitAddr(t, addr)
	return &env{pg: pg, db: harness.CreateDB(t, pg), proxy: &harness.Proxy{Addr: addr, Host: host, Port: port}}, cmd, logs
}

// waitExit waits for the process and fails unless it exits 0 within limit.
func waitExit(t *testing.T, cmd *exec.Cmd, logs *syncBuffer, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(limit):
		t.Fatalf("serve still running after %v\n%s", limit, logs.String())
	}
	return time.Since(start)
}

// TestShutdownGraceful: on SIGTERM an idle session is closed at once with
// 57P01, new clients are refused, a session inside a transaction finishes
// it, is then closed with 57P01, and the process exits 0.
func TestShutdownGraceful(t *testing.T) {
	e, cmd, logs := serveWithConfig(t, "shutdown_timeout: 20s\n")
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	mustExec(t, admin, "CREATE TABLE drained (v int)")

	idle := readyConn(t, e, "idle")
	busy := readyConn(t, e, "busy")
	if st := busy.query("BEGIN; INSERT INTO drained VALUES (1)"); st != 'T' {
		t.Fatalf("status %q after BEGIN, want T", st)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	expectFatal(t, idle, "57P01")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("idle session closed after %v, want at once", d)
	}
	// The listener is closed: a new client cannot get in.
	if c, err := pgconn.Connect(t.Context(), e.viaProxy()); err == nil {
		c.Close(t.Context())
		t.Error("a new client connected during shutdown")
	}
	// The transaction goes on and commits.
	if st := busy.query("INSERT INTO drained VALUES (2)"); st != 'T' {
		t.Fatalf("status %q inside the transaction, want T", st)
	}
	if st := busy.query("COMMIT"); st != 'I' {
		t.Fatalf("status %q after COMMIT, want I", st)
	}
	busy.expectFatal("57P01")
	if d := waitExit(t, cmd, logs, 5*time.Second); d > 3*time.Second {
		t.Errorf("exit took %v after the last session ended", d)
	}
	var n int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM drained").Scan(&n); err != nil || n != 2 {
		t.Fatalf("committed rows: %d, %v; want 2", n, err)
	}
}

// TestShutdownTimeout: a transaction that does not end within
// shutdown_timeout is closed with 57P01 (and rolled back), and the process
// exits 0.
func TestShutdownTimeout(t *testing.T) {
	e, cmd, logs := serveWithConfig(t, "shutdown_timeout: 500ms\n")
	busy := readyConn(t, e, "stuck")
	if st := busy.query("BEGIN"); st != 'T' {
		t.Fatalf("status %q after BEGIN, want T", st)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	busy.expectFatal("57P01")
	if d := time.Since(start); d < 400*time.Millisecond || d > 4*time.Second {
		t.Errorf("closed after %v, want about 500ms", d)
	}
	waitExit(t, cmd, logs, 5*time.Second)
	waitBackendGone(t, e, "stuck")
}

func splitAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, p
}

// TestShutdownInProcess drives pgwire.Server.Shutdown directly (so the race
// detector sees it): idle sessions go at once, a transaction finishes, and
// Shutdown returns nil once the last session ended.
func TestShutdownInProcess(t *testing.T) {
	shutdownLetsTransactionsFinish(t, newEnv(t))
}

// shutdownLetsTransactionsFinish shuts e's proxy down with an idle session
// and one in a transaction: the idle one ends at once with 57P01, the
// other runs to the end of its transaction, then ends, and Shutdown
// returns nil.
func shutdownLetsTransactionsFinish(t *testing.T, e *env) {
	t.Helper()
	idle := readyConn(t, e, "ip_idle")
	busy := readyConn(t, e, "ip_busy")
	if st := busy.query("BEGIN"); st != 'T' {
		t.Fatalf("status %q after BEGIN", st)
	}
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(t.Context()) }()
	expectFatal(t, idle, "57P01")
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a transaction open", err)
	case <-time.After(200 * time.Millisecond):
	}
	if st := busy.query("SELECT 1"); st != 'T' {
		t.Fatalf("status %q in the transaction", st)
	}
	if st := busy.query("ROLLBACK"); st != 'I' {
		t.Fatalf("status %q after ROLLBACK", st)
	}
	busy.expectFatal("57P01")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return after the last session ended")
	}
}

// TestShutdownInProcessTimeout: Shutdown's ctx ends with a transaction still
// open: the session gets 57P01 and Shutdown returns the ctx's error.
func TestShutdownInProcessTimeout(t *testing.T) {
	e := newEnv(t)
	busy := readyConn(t, e, "ip_stuck")
	if st := busy.query("BEGIN"); st != 'T' {
		t.Fatalf("status %q after BEGIN", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(ctx) }()
	busy.expectFatal("57P01")
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	waitBackendGone(t, e, "ip_stuck")
}

// TestShutdownWaitsForOpenExtendedSequence: a session that has sent Parse,
// Bind and Execute but not yet its Sync is not idle (the server ran the
// Execute in an implicit transaction): a graceful Shutdown lets it reach
// its Sync and ReadyForQuery, then ends it with 57P01.
func TestShutdownWaitsForOpenExtendedSequence(t *testing.T) {
	e := newEnv(t)
	conn := readyConn(t, e, "ip_ext_open")
	conn.fe.Send(&pgproto3.Parse{Query: "SELECT 1"})
	conn.fe.Send(&pgproto3.Bind{})
	conn.fe.Send(&pgproto3.Execute{})
	conn.fe.Send(&pgproto3.Flush{})
	if err := conn.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	receiveUntil[*pgproto3.CommandComplete](t, conn.fe)
	done := make(chan error, 1)
	go func() { done <- e.proxy.Shutdown(t.Context()) }()
	time.Sleep(200 * time.Millisecond) // Shutdown has closed the idle sessions by now
	conn.fe.Send(&pgproto3.Sync{})
	if err := conn.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if z := receiveUntil[*pgproto3.ReadyForQuery](t, conn.fe); z.TxStatus != 'I' {
		t.Fatalf("status %q after Sync", z.TxStatus)
	}
	conn.expectFatal("57P01")
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
