package pgwire

import (
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// afterProbe is an upstream that answers the startup probe as fakeUpstream
// does, reads the client's first message after it, then ends as end says.
func afterProbe(end func(net.Conn, *pgproto3.Backend)) func(net.Conn) {
	return func(conn net.Conn) {
		be := pgproto3.NewBackend(conn, conn)
		for {
			msg, err := be.Receive()
			if err != nil {
				return
			}
			switch msg.(type) {
			case *pgproto3.Parse:
				be.Send(&pgproto3.ParseComplete{})
			case *pgproto3.Bind:
				be.Send(&pgproto3.BindComplete{})
			case *pgproto3.Close:
				be.Send(&pgproto3.CloseComplete{})
			case *pgproto3.Execute:
				be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
			case *pgproto3.Sync:
				be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				be.Flush()
				be.Receive() // the client's first message
				end(conn, be)
				return
			}
		}
	}
}

// resetAfterProbe resets the connection after the client's first message
// (SetLinger(0) and Close: an RST, not a FIN).
var resetAfterProbe = afterProbe(func(conn net.Conn, _ *pgproto3.Backend) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
})

// TestRelayUpstreamResetWhileClientWrites: when the upstream connection
// resets while the client is still sending, the client gets an
// ErrorResponse 08006 (connection failure) before the close, as for any
// other loss of the upstream, not a bare close: the write upstream that
// failed first ended the session without a word, whichever relays it.
func TestRelayUpstreamResetWhileClientWrites(t *testing.T) {
	for _, relay := range []string{"pipe", "loop", "epoll", "goroutines"} {
		t.Run(relay, func(t *testing.T) {
			for range 20 {
				testUpstreamResetWhileClientWrites(t, relay)
			}
		})
	}
}

func testUpstreamResetWhileClientWrites(t *testing.T, relay string) {
	fe, conn, s := relayWith(t, relay, resetAfterProbe, nil)
	go func() {
		data := copyData(16, 4096)
		for {
			if _, err := conn.Write(data); err != nil {
				return
			}
		}
	}()
	wantError(t, fe, s, codeConnectionFailure)
}

// TestRelayUpstreamBrokenReply: a server reply the proxy reads whole
// before relaying (an ErrorResponse) cut short by the upstream's end gives
// the client 08006, and a reply that cannot be decoded (a ReadyForQuery of
// two bytes) 08P01, whichever relays the session: the goroutine relay
// closed the client's connection without a word.
func TestRelayUpstreamBrokenReply(t *testing.T) {
	for _, relay := range []string{"pipe", "loop", "epoll", "goroutines"} {
		for q, code := range map[string]string{cutErrorQuery: codeConnectionFailure, badReadyQuery: codeProtocolViolation} {
			t.Run(relay+"/"+q, func(t *testing.T) {
				fe, _, s := relayWith(t, relay, fakeUpstream, nil)
				fe.Send(&pgproto3.Query{String: q})
				if err := fe.Flush(); err != nil {
					t.Fatal(err)
				}
				wantError(t, fe, s, code)
			})
		}
	}
}

// fatalAfterProbe sends a FATAL ErrorResponse (57P05, as for
// idle_session_timeout) after the client's first message and closes, both
// in one write.
var fatalAfterProbe = afterProbe(func(conn net.Conn, be *pgproto3.Backend) {
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P05", Message: "terminating connection due to idle-session timeout"})
	be.Flush()
	conn.Close()
})

// TestRelayDeliversServerFatalBeforeClose: the server's last words, a
// FATAL error read together with the end of its connection, reach the
// client before the close, whichever relays the session: the event loop
// closed the client's connection with the error still in its buffer.
func TestRelayDeliversServerFatalBeforeClose(t *testing.T) {
	for _, relay := range []string{"pipe", "loop", "epoll", "goroutines"} {
		t.Run(relay, func(t *testing.T) {
			for range 20 {
				fe, _, s := relayWith(t, relay, fatalAfterProbe, nil)
				fe.Send(&pgproto3.Sync{})
				if err := fe.Flush(); err != nil {
					t.Fatal(err)
				}
				wantError(t, fe, s, "57P05")
			}
		})
	}
}
