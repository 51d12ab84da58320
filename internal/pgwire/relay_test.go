package pgwire

import (
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeUpstream answers frontend messages the way PostgreSQL answers a
// session holding no fencing token, with canned replies: a Query gets a
// one-row result, Parse, Bind and Close their completions, Execute a row
// (none for the proxy's own portal: the startup probe finds no token) and
// CommandComplete, Sync and Query a ReadyForQuery. It serves until conn
// closes.
func fakeUpstream(conn net.Conn) {
	be := pgproto3.NewBackend(conn, conn)
	row := []pgproto3.BackendMessage{
		&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("abalance"), DataTypeOID: 23, DataTypeSize: 4, Format: 0}}},
		&pgproto3.DataRow{Values: [][]byte{[]byte("42")}},
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			for _, m := range row {
				be.Send(m)
			}
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Parse:
			be.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Bind:
			be.Send(&pgproto3.BindComplete{})
		case *pgproto3.Close:
			be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Describe:
			be.Send(row[0])
		case *pgproto3.Execute:
			if !strings.HasPrefix(m.Portal, "fenceproxy\x1f") { // the probe's: no token, no row
				be.Send(row[1])
			}
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
		case *pgproto3.Sync:
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Terminate:
			return
		default:
			continue
		}
		if err := be.Flush(); err != nil {
			return
		}
	}
}

// pipeRelay runs a session between a pgproto3 client and fakeUpstream over
// net.Pipe, past its startup probe, and returns the client's end. The
// session ends when the test does.
func pipeRelay(tb testing.TB) (*pgproto3.Frontend, *session) {
	tb.Helper()
	clientEnd, proxyClient := net.Pipe()
	proxyUp, upstreamEnd := net.Pipe()
	go fakeUpstream(upstreamEnd)
	s := NewServer(Config{Upstream: "fake"}).newRelay(proxyClient, proxyUp, map[string]string{"user": "u"})
	if err := s.startupProbe(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.proxy(); close(done) }()
	tb.Cleanup(func() {
		clientEnd.Close()
		<-done
		upstreamEnd.Close()
	})
	return pgproto3.NewFrontend(clientEnd, clientEnd), s
}

// roundTrip sends msgs and returns the types of the replies up to
// ReadyForQuery.
func roundTrip(tb testing.TB, fe *pgproto3.Frontend, msgs ...pgproto3.FrontendMessage) []byte {
	tb.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		tb.Fatal(err)
	}
	var types []byte
	for {
		m, err := fe.Receive()
		if err != nil {
			tb.Fatal(err)
		}
		buf, _ := m.Encode(nil)
		types = append(types, buf[0])
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			return types
		}
	}
}

var (
	selectQuery = []pgproto3.FrontendMessage{&pgproto3.Query{String: "SELECT abalance FROM pgbench_accounts WHERE aid = 1"}}
	prepare     = []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "s", Query: "SELECT abalance FROM pgbench_accounts WHERE aid = $1"}, &pgproto3.Sync{}}
	execute     = []pgproto3.FrontendMessage{
		&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}},
		&pgproto3.Execute{}, &pgproto3.Sync{},
	}
)

// TestRelayOverPipe: the relay, its startup probe hidden, passes a simple
// query and a prepared statement's replies through unchanged.
func TestRelayOverPipe(t *testing.T) {
	fe, s := pipeRelay(t)
	var sent int
	for _, tt := range []struct {
		name string
		msgs []pgproto3.FrontendMessage
		want string
	}{
		{"simple query", selectQuery, "TDCZ"},
		{"parse", prepare, "1Z"},
		{"bind execute sync", execute, "2DCZ"},
		{"again", execute, "2DCZ"},
	} {
		if got := string(roundTrip(t, fe, tt.msgs...)); got != tt.want {
			t.Errorf("%s: client got %q, want %q", tt.name, got, tt.want)
		}
		for _, m := range tt.msgs {
			buf, _ := m.Encode(nil)
			sent += len(buf)
		}
		// Counted by the time the reply arrives, though not per message.
		if got := testutil.ToFloat64(s.srv.metrics.bytesUpstream); got != float64(sent) {
			t.Errorf("%s: fenceproxy_upstream_sent_bytes_total = %v, want %d", tt.name, got, sent)
		}
	}
}

// BenchmarkRelay measures one transaction through the relay over net.Pipe
// (the proxy's code and the Go runtime's hand-offs, no kernel sockets).
func BenchmarkRelay(b *testing.B) {
	b.Run("simple", func(b *testing.B) {
		fe, _ := pipeRelay(b)
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, fe, selectQuery...)
		}
	})
	b.Run("prepared", func(b *testing.B) {
		fe, _ := pipeRelay(b)
		roundTrip(b, fe, prepare...)
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, fe, execute...)
		}
	})
}
