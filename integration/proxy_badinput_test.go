package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/pgwire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// stillServes checks that a fresh session through the proxy works.
func stillServes(t *testing.T, e *env) {
	t.Helper()
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	var one int
	if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("a normal session after bad input: %v", err)
	}
}

// waitBackendGone waits until no upstream backend has application_name app.
func waitBackendGone(t *testing.T, e *env, app string) {
	t.Helper()
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream backend %s still there", app)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func header(typ byte, length int32) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(length))
	return b
}

// TestBadStartupPacket: a malformed startup packet is answered as
// PostgreSQL answers it: one whose length is out of range is closed without
// a reply (the server logs it; the bytes may be a driver's Terminate queued
// ahead of its StartupMessage), any other gets FATAL 08P01.
func TestBadStartupPacket(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		data   []byte
		silent bool
	}{
		{"length below minimum", []byte{0, 0, 0, 3}, true},
		{"length above 10000", []byte{0, 1, 0, 0, 0, 3, 0, 0}, true},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xf0}, true},
		{"terminate before startup", []byte{'X', 0, 0, 0, 4}, true},
		{"unknown protocol version", []byte{0, 0, 0, 8, 0, 9, 0, 9}, false},
		{"parameters not terminated", append([]byte{0, 0, 0, 12, 0, 3, 0, 0}, "user"...), false},
		{"parameter without value", append([]byte{0, 0, 0, 13, 0, 3, 0, 0}, "user\x00"...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.silent {
				conn := dialBare(t, e.proxy.Addr)
				conn.Write(tt.data)
				expectFatal(t, conn, "08P01")
				return
			}
			for _, addr := range []string{e.pg.Addr(), e.proxy.Addr} {
				conn := dialBare(t, addr)
				conn.Write(tt.data)
				n, err := io.Copy(io.Discard, conn)
				if ne, ok := err.(net.Error); n != 0 || ok && ne.Timeout() {
					t.Errorf("%s answered %d bytes (%v), want a close without a reply", addr, n, err)
				}
			}
		})
	}
	stillServes(t, e)
}

func TestBadMessageAfterStartup(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		data []byte
		want string // substring of the error message
	}{
		{"unknown type", append(header('Z', 5), 'I'), "invalid frontend message type 90"},
		{"length below 4", header('Q', 2), "invalid message length"},
		{"negative length", header('d', -5), "invalid message length"},
		{"length above 1 GiB", header('d', 1<<30+10), "invalid message length"},
		{"query without terminator", append(header('Q', 8), "SELE"...), "invalid Query message"},
		{"describe without name", append(header('D', 5), 'S'), "invalid 'D' message"},
		{"bind name runs past its message", append(header('B', 6), "ab"...), "invalid Bind message"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := "bad" + string(rune('a'+i))
			conn := readyConn(t, e, app)
			conn.Write(tt.data)
			if tt.name == "bind name runs past its message" {
				conn.Write([]byte("cdefgh\x00\x00\x00\x00\x00\x00"))
			}
			got := expectFatal(t, conn, "08P01")
			if !strings.Contains(got.Message, tt.want) {
				t.Errorf("message %q, want it to contain %q", got.Message, tt.want)
			}
			waitBackendGone(t, e, app)
		})
	}
	stillServes(t, e)
}

// TestRandomBytes throws seeded random bytes at the proxy, before and after
// startup: each connection is closed (with an ErrorResponse or without, as
// the framing allows) and the proxy keeps serving.
func TestRandomBytes(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(6, 6))
	for i := range 20 {
		junk := make([]byte, 1+rng.IntN(300))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		var conn net.Conn
		if i%2 == 0 {
			conn = dialBare(t, e.proxy.Addr)
		} else {
			conn = readyConn(t, e, "random").Conn
		}
		conn.Write(junk)
		// The proxy must not wait for more than the junk promised forever:
		// half-close our side so a message that claims more input ends.
		conn.(*net.TCPConn).CloseWrite()
		expectClosed(t, conn)
	}
	waitBackendGone(t, e, "random")
	stillServes(t, e)
}

// TestHalfSentMessage sends part of a message and closes: nothing of a
// decoded message reaches the upstream, and a streamed one (CopyData) ends
// the upstream connection rather than leaving it mid-message.
func TestHalfSentMessage(t *testing.T) {
	e := newEnv(t)
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	mustExec(t, admin, "CREATE TABLE half (v text)")

	t.Run("query", func(t *testing.T) {
		conn := readyConn(t, e, "half_query")
		conn.Write(append(header('Q', 100), "INSERT INTO half VALUES ('x')"...))
		conn.Close()
		waitBackendGone(t, e, "half_query")
	})
	t.Run("copydata", func(t *testing.T) {
		conn := readyConn(t, e, "half_copy")
		q := append(header('Q', int32(4+len("COPY half FROM STDIN")+1)), "COPY half FROM STDIN\x00"...)
		conn.Write(q)
		if msg, err := conn.fe.Receive(); err != nil {
			t.Fatal(err)
		} else if _, ok := msg.(*pgproto3.CopyInResponse); !ok {
			t.Fatalf("got %T, want CopyInResponse", msg)
		}
		conn.Write(append(header('d', 1000), "y\n"...))
		conn.Close()
		waitBackendGone(t, e, "half_copy")
	})
	var n int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM half").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows in half: %d, %v; want none", n, err)
	}
	stillServes(t, e)
}

func TestMaxMessageBytes(t *testing.T) {
	pg := harness.Postgres(t)
	e := &env{pg: pg, db: harness.CreateDB(t, pg), proxy: harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), MaxMessageBytes: 2048})}
	conn := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	long := "SELECT '" + strings.Repeat("x", 1800) + "'"
	if _, err := conn.Exec(t.Context(), long); err != nil {
		t.Fatalf("query under the limit: %v", err)
	}
	_, err := conn.Exec(t.Context(), "SELECT '"+strings.Repeat("x", 3000)+"'")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "08P01" || !strings.Contains(pgErr.Message, "max_message_bytes") {
		t.Fatalf("query over the limit: %v, want 08P01 naming max_message_bytes", err)
	}
	// Parameters are streamed, not bounded by the limit.
	conn2 := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	var n int
	if err := conn2.QueryRow(t.Context(), "SELECT length($1::text)", strings.Repeat("y", 10000)).Scan(&n); err != nil || n != 10000 {
		t.Fatalf("long parameter: %d, %v", n, err)
	}
	stillServes(t, e)
}

func TestMaxClientConns(t *testing.T) {
	pg := harness.Postgres(t)
	e := &env{pg: pg, db: harness.CreateDB(t, pg), proxy: harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), MaxClientConns: 2})}
	a := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	_, err := pgx.Connect(t.Context(), e.viaProxy())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53300" {
		t.Fatalf("third connection: %v, want SQLSTATE 53300", err)
	}
	a.Close(context.Background())
	// The slot frees once the proxy has seen the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := pgx.Connect(t.Context(), e.viaProxy())
		if err == nil {
			c.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection after one closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartupTimeout(t *testing.T) {
	pg := harness.Postgres(t)
	proxy := harness.StartProxy(t, pgwire.Config{Upstream: pg.Addr(), StartupTimeout: 300 * time.Millisecond})
	conn := dialBare(t, proxy.Addr)
	start := time.Now()
	expectClosed(t, conn) // says nothing: closed at the deadline
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("closed after %v, want about 300ms", d)
	}
}
