package pgwire

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStartupRefusesReplication: a startup packet that asks for a
// walsender (startup parameter replication, any value PostgreSQL does not
// read as false) is refused with 0A000 before the upstream is dialled: gate
// has no handling for replication commands or the CopyBoth mode of
// START_REPLICATION. A replication parameter PostgreSQL reads as false
// passes (the upstream here refuses the connection: 08001).
func TestStartupRefusesReplication(t *testing.T) {
	for value, want := range map[string]string{
		"database": codeFeatureNotSupported,
		"true":     codeFeatureNotSupported,
		"on":       codeFeatureNotSupported,
		"1":        codeFeatureNotSupported,
		"Yes":      codeFeatureNotSupported,
		"bogus":    codeFeatureNotSupported,
		"":         codeFeatureNotSupported,
		"false":    codeCannotConnect,
		"f":        codeCannotConnect,
		"OFF":      codeCannotConnect,
		"no":       codeCannotConnect,
		"0":        codeCannotConnect,
	} {
		t.Run(value, func(t *testing.T) {
			if got := startupError(t, map[string]string{"user": "u", "replication": value}); got != want {
				t.Errorf("replication=%q: got %s, want %s", value, got, want)
			}
		})
	}
	srv := NewServer(Config{Upstream: "127.0.0.1:1"})
	startupErrorOn(t, srv, map[string]string{"user": "u", "replication": "database"})
	if got := testutil.ToFloat64(srv.metrics.refusedConns.WithLabelValues(failReplication)); got != 1 {
		t.Errorf("replication refusals counted %v, want 1", got)
	}
}

// TestStartupUpstreamBroken: the upstream's end in the middle of a reply
// during authentication or the startup probe, or a reply there that cannot
// be decoded, gives the client an error (08006, 08P01) before the close,
// as it does after startup: these paths closed without a word.
func TestStartupUpstreamBroken(t *testing.T) {
	authOk := []byte{'R', 0, 0, 0, 8, 0, 0, 0, 0}
	ready := []byte{'Z', 0, 0, 0, 5, 'I'}
	cut := []byte{'S', 0, 0, 0, 100, 'a', 0} // a ParameterStatus cut short
	for name, tt := range map[string]struct {
		reply []byte // after the startup packet
		probe []byte // after the probe's messages; nil: none read
		code  string
	}{
		"auth cut":              {append(authOk, cut...), nil, codeConnectionFailure},
		"auth malformed":        {append(authOk, 'K', 0, 0, 0, 6, 0, 0), nil, codeProtocolViolation},
		"probe cut":             {append(authOk, ready...), cut, codeConnectionFailure},
		"probe malformed":       {append(authOk, ready...), []byte{'Z', 0, 0, 0, 6, 'I', 'I'}, codeProtocolViolation},
		"probe unmatched reply": {append(authOk, ready...), []byte{'2', 0, 0, 0, 4}, codeProtocolViolation},
	} {
		t.Run(name, func(t *testing.T) {
			upstream := fakeServer(t, func(conn net.Conn) {
				if _, err := readStartup(conn); err != nil {
					return
				}
				conn.Write(tt.reply)
				if tt.probe != nil {
					conn.Read(make([]byte, 1024)) // the probe
					conn.Write(tt.probe)
				}
				time.Sleep(50 * time.Millisecond) // the proxy is reading
				conn.(*net.TCPConn).SetLinger(0)
			})
			if got := startupErrorAt(t, upstream, map[string]string{"user": "u"}); got != tt.code {
				t.Errorf("got %s, want %s", got, tt.code)
			}
		})
	}
}

// fakeServer serves one connection on a loopback listener with serve,
// closes it, and returns the listener's address.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		serve(conn)
	}()
	return ln.Addr().String()
}

// startupError runs a session's startup with params against an upstream
// that refuses connections and returns the SQLSTATE the client gets.
func startupError(t *testing.T, params map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := ln.Addr().String()
	ln.Close() // nothing listens there
	return startupErrorAt(t, upstream, params)
}

// startupErrorAt runs a session's startup with params against upstream and
// returns the SQLSTATE of the first ErrorResponse the client gets.
func startupErrorAt(t *testing.T, upstream string, params map[string]string) string {
	t.Helper()
	return startupErrorOn(t, NewServer(Config{Upstream: upstream}), params)
}

// startupErrorOn is startupErrorAt with a server of the caller's.
func startupErrorOn(t *testing.T, srv *Server, params map[string]string) string {
	t.Helper()
	clientEnd, proxyEnd := net.Pipe()
	defer clientEnd.Close()
	s := srv.newSession(proxyEnd)
	go s.run(context.Background())
	clientEnd.SetDeadline(time.Now().Add(3 * time.Second))
	fe := pgproto3.NewFrontend(clientEnd, clientEnd)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: params})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("no ErrorResponse: %v", err)
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Logf("%s %s", e.Code, e.Message)
			return e.Code
		}
	}
}

// TestStartupBadLengthClosesSilently: a startup packet whose length is out
// of range gets no reply, as from PostgreSQL (it logs "invalid length of
// startup packet" and closes): the bytes may be a Terminate a driver queued
// ahead of its StartupMessage, and an ErrorResponse would fail its connect.
func TestStartupBadLengthClosesSilently(t *testing.T) {
	for name, pkt := range map[string][]byte{
		"terminate first": {'X', 0, 0, 0}, // read as a length of 1476395008
		"too short":       {0, 0, 0, 4},
		"negative":        {0xff, 0xff, 0xff, 0xf0},
	} {
		t.Run(name, func(t *testing.T) {
			clientEnd, proxyEnd := net.Pipe()
			defer clientEnd.Close()
			s := NewServer(Config{Upstream: "127.0.0.1:1"}).newSession(proxyEnd)
			go s.run(context.Background())
			clientEnd.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := clientEnd.Write(pkt); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			n, err := clientEnd.Read(buf)
			if n != 0 || err == nil {
				t.Fatalf("client got %q (%v), want the connection closed without a reply", buf[:n], err)
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection left open")
			}
		})
	}
}
