package pgwire

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
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
	clientEnd, proxyEnd := net.Pipe()
	defer clientEnd.Close()
	s := NewServer(Config{Upstream: upstream}).newSession(proxyEnd)
	go s.run(context.Background())
	clientEnd.SetDeadline(time.Now().Add(3 * time.Second))
	fe := pgproto3.NewFrontend(clientEnd, clientEnd)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: params})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	e, ok := m.(*pgproto3.ErrorResponse)
	if !ok {
		t.Fatalf("got %T, want an ErrorResponse", m)
	}
	t.Logf("%s %s", e.Code, e.Message)
	return e.Code
}
