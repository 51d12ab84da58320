package pgwire

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

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
	inCopy := false
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if inCopy {
			// The server waits for copy data: it answers nothing else.
			switch msg.(type) {
			case *pgproto3.CopyDone, *pgproto3.CopyFail:
				inCopy = false
				be.Send(&pgproto3.CommandComplete{CommandTag: []byte("COPY 0")})
				be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				be.Flush()
			}
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			if start := copyStarts[m.String]; start != nil {
				inCopy = true
				be.Send(start)
				be.Flush()
				continue
			}
			be.Send(row[0])
			switch m.String {
			case noteQuery: // noted, for tests of what reached the upstream
				noted <- struct{}{}
			case discardQuery: // the rest of the session is discarded unread
				be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				be.Flush()
				io.Copy(io.Discard, conn)
				return
			case bigThenManyQuery: // answered late, then more than the sockets hold
				time.Sleep(300 * time.Millisecond)
				be.Send(&pgproto3.DataRow{Values: [][]byte{bigValue}})
				for range manyRows {
					be.Send(&pgproto3.DataRow{Values: [][]byte{rowValue}})
				}
			case cutErrorQuery: // the header of a 1000-byte ErrorResponse, 100 bytes of it, and a reset
				be.Flush()
				conn.Write(append([]byte{'E', 0, 0, 0x03, 0xec}, make([]byte, 100)...))
				time.Sleep(50 * time.Millisecond) // the proxy is reading the body
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				conn.Close()
				return
			case badReadyQuery: // a ReadyForQuery of two bytes
				be.Flush()
				conn.Write([]byte{'Z', 0, 0, 0, 6, 'I', 'I'})
				io.Copy(io.Discard, conn)
				return
			case bigRowQuery: // one row larger than the proxy's buffers
				be.Send(&pgproto3.DataRow{Values: [][]byte{bigValue}})
			case manyRowsQuery: // more than the sockets hold
				for range manyRows {
					be.Send(&pgproto3.DataRow{Values: [][]byte{rowValue}})
				}
			default:
				be.Send(row[1])
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

// Queries fakeUpstream answers with rows of their own.
const (
	bigRowQuery   = "SELECT big"
	manyRowsQuery = "SELECT many"
	manyRows      = 20_000

	cutErrorQuery = "SELECT cut" // the upstream resets in the middle of its reply
	badReadyQuery = "SELECT bad" // the upstream sends a malformed ReadyForQuery

	discardQuery     = "SELECT discard"
	noteQuery        = "SELECT note"
	bigThenManyQuery = "SELECT big, many"
)

// copyStarts are Query texts fakeUpstream answers with the start of a
// COPY FROM STDIN, or of the CopyBoth mode of a walsender's
// START_REPLICATION; each also changes client_encoding (gate then holds
// back a text that may matter until its reply: see
// TestRelayRefusesHeldMessageDuringCopy).
var copyStarts = map[string]pgproto3.BackendMessage{
	"SET client_encoding = 'UTF8'; COPY t FROM STDIN":                    &pgproto3.CopyInResponse{},
	"SET client_encoding = 'UTF8'; START_REPLICATION SLOT s LOGICAL 0/0": &pgproto3.CopyBothResponse{},
}

// noted receives a value for each noteQuery fakeUpstream is sent.
var noted = make(chan struct{}, 16)

var (
	bigValue = bytes.Repeat([]byte("b"), 3*ioBufferSize+17)
	rowValue = bytes.Repeat([]byte("r"), 1000)
)

// pipeRelay runs a session between a pgproto3 client and fakeUpstream over
// net.Pipe, past its startup probe, and returns the client's end. The
// session ends when the test does.
func pipeRelay(tb testing.TB) (*pgproto3.Frontend, *session) {
	tb.Helper()
	clientEnd, proxyClient := net.Pipe()
	proxyUp, upstreamEnd := net.Pipe()
	return startRelay(tb, Config{Upstream: "fake"}, clientEnd, proxyClient, proxyUp, upstreamEnd)
}

// tcpRelay is pipeRelay over loopback TCP connections, which the event loop
// relays unless cfg.GoroutineRelay.
func tcpRelay(tb testing.TB, cfg Config) (*pgproto3.Frontend, *session) {
	tb.Helper()
	clientEnd, proxyClient := tcpPair(tb)
	proxyUp, upstreamEnd := tcpPair(tb)
	return startRelay(tb, cfg, clientEnd, proxyClient, proxyUp, upstreamEnd)
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	return a, b
}

func startRelay(tb testing.TB, cfg Config, clientEnd, proxyClient, proxyUp, upstreamEnd net.Conn) (*pgproto3.Frontend, *session) {
	tb.Helper()
	return startRelayWith(tb, cfg, fakeUpstream, nil, clientEnd, proxyClient, proxyUp, upstreamEnd)
}

// startRelayWith is startRelay with the upstream served by fake and, when
// setup is not nil, the session passed to setup before its startup probe.
func startRelayWith(tb testing.TB, cfg Config, fake func(net.Conn), setup func(*session), clientEnd, proxyClient, proxyUp, upstreamEnd net.Conn) (*pgproto3.Frontend, *session) {
	tb.Helper()
	go fake(upstreamEnd)
	s := NewServer(cfg).newRelay(proxyClient, proxyUp, map[string]string{"user": "u"})
	if setup != nil {
		setup(s)
	}
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

// relayWith starts a session relayed as relay names ("pipe", "loop", "epoll" or
// "goroutines"), as startRelayWith does, and returns the client's end.
func relayWith(tb testing.TB, relay string, fake func(net.Conn), setup func(*session)) (*pgproto3.Frontend, net.Conn, *session) {
	tb.Helper()
	var clientEnd, proxyClient, proxyUp, upstreamEnd net.Conn
	if relay == "pipe" {
		clientEnd, proxyClient = net.Pipe()
		proxyUp, upstreamEnd = net.Pipe()
	} else {
		clientEnd, proxyClient = tcpPair(tb)
		proxyUp, upstreamEnd = tcpPair(tb)
	}
	cfg := Config{Upstream: "fake", GoroutineRelay: relay == "goroutines", EpollLoop: relay == "epoll"}
	fe, s := startRelayWith(tb, cfg, fake, setup, clientEnd, proxyClient, proxyUp, upstreamEnd)
	return fe, clientEnd, s
}

// relays are the ways a session is relayed: goroutines over net.Pipe, the
// event loop over TCP, goroutines over TCP.
var relays = []struct {
	name  string
	start func(testing.TB) (*pgproto3.Frontend, *session)
}{
	{"pipe", pipeRelay},
	{"loop", func(tb testing.TB) (*pgproto3.Frontend, *session) { return tcpRelay(tb, Config{Upstream: "fake"}) }},
	{"epoll", func(tb testing.TB) (*pgproto3.Frontend, *session) {
		return tcpRelay(tb, Config{Upstream: "fake", EpollLoop: true})
	}},
	{"goroutines", func(tb testing.TB) (*pgproto3.Frontend, *session) {
		return tcpRelay(tb, Config{Upstream: "fake", GoroutineRelay: true})
	}},
}

// TestRelay: the relay, its startup probe hidden, passes a simple query and
// a prepared statement's replies through unchanged, whichever relays it.
func TestRelay(t *testing.T) {
	for _, r := range relays {
		t.Run(r.name, func(t *testing.T) {
			fe, s := r.start(t)
			testRelay(t, fe, s)
		})
	}
}

func testRelay(t *testing.T, fe *pgproto3.Frontend, s *session) {
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
		{"parse bind execute sync", []pgproto3.FrontendMessage{prepare[0], execute[0], execute[1], execute[2]}, "12DCZ"},
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

// TestRelayLargeAndPipelined: a row larger than the buffers (the event loop
// hands the session to the goroutine relay for it), a reply larger than the
// sockets hold to a client slow to read, and a pipeline of 500 queries all
// arrive whole and in order, and the session goes on.
func TestRelayLargeAndPipelined(t *testing.T) {
	for _, r := range relays {
		t.Run(r.name, func(t *testing.T) {
			fe, s := r.start(t)
			for round := range 2 {
				pipelined(t, fe, 500)
				fe.Send(&pgproto3.Query{String: manyRowsQuery})
				fe.Flush()
				time.Sleep(100 * time.Millisecond) // let the sockets fill
				if got := rowBytes(t, fe, ""); got != manyRows*len(rowValue) {
					t.Fatalf("many rows: %d bytes, want %d", got, manyRows*len(rowValue))
				}
				if looping := inLoop(s); looping != ((r.name == "loop" || r.name == "epoll") && round == 0) {
					t.Errorf("round %d: in the event loop: %v", round, looping)
				}
				if got := rowBytes(t, fe, bigRowQuery); got != len(bigValue) {
					t.Fatalf("big row: %d bytes, want %d", got, len(bigValue))
				}
				if inLoop(s) {
					t.Errorf("round %d: still in the event loop after a row larger than its buffer", round)
				}
			}
			want := map[string]float64{"loop": 1, "epoll": 1}[r.name]
			if got := testutil.ToFloat64(s.srv.metrics.loopLeaves.WithLabelValues(leaveLargeMessage)); got != want {
				t.Errorf("fenceproxy_event_loop_leaves_total{reason=large_message} = %v, want %v", got, want)
			}
		})
	}
}

// inLoop reports whether an event loop relays s.
func inLoop(s *session) bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.lp != nil
}

// pipelined sends n queries at once and checks n results come back.
func pipelined(t *testing.T, fe *pgproto3.Frontend, n int) {
	t.Helper()
	for range n {
		fe.Send(selectQuery[0])
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got := rowBytes(t, fe, ""); got != 2 {
			t.Fatalf("query %d of the pipeline: %d bytes of rows, want 2", i, got)
		}
	}
}

// rowBytes sends q (unless empty) and sums the DataRow values up to
// ReadyForQuery.
func rowBytes(t *testing.T, fe *pgproto3.Frontend, q string) int {
	t.Helper()
	if q != "" {
		fe.Send(&pgproto3.Query{String: q})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *pgproto3.DataRow:
			for _, v := range m.Values {
				n += len(v)
			}
		case *pgproto3.ReadyForQuery:
			return n
		}
	}
}

// TestLoopHandsOverLongTexts: a Query text longer than loopMaxText (its
// analysis could hold the loop) takes the session out of the event loop,
// and the session goes on.
func TestLoopHandsOverLongTexts(t *testing.T) {
	fe, s := tcpRelay(t, Config{Upstream: "fake"})
	if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" || !inLoop(s) {
		t.Fatalf("short text: client got %q, in the loop %v", got, inLoop(s))
	}
	long := &pgproto3.Query{String: "SELECT 1 /* " + strings.Repeat("x", loopMaxText) + " */"}
	if got := string(roundTrip(t, fe, long)); got != "TDCZ" || inLoop(s) {
		t.Fatalf("long text: client got %q, in the loop %v", got, inLoop(s))
	}
	if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" {
		t.Fatalf("after: client got %q", got)
	}
	m := s.srv.metrics
	if loop, left := testutil.ToFloat64(m.relays.WithLabelValues(relayLoop)), testutil.ToFloat64(m.loopLeaves.WithLabelValues(leaveLongText)); loop != 1 || left != 1 {
		t.Errorf("fenceproxy_relayed_sessions_total{relay=loop} = %v, fenceproxy_event_loop_leaves_total{reason=long_text} = %v; want 1, 1", loop, left)
	}
}

// TestLoopHandsOverSlowParses: a session whose texts took over
// loopSlowStep to parse leaves the event loop after them, with their
// answers, and goes on in the goroutine relay; one whose texts needed no
// parse stays.
func TestLoopHandsOverSlowParses(t *testing.T) {
	slow := loopSlowStep
	loopSlowStep = 0 // every parse is slow
	t.Cleanup(func() { loopSlowStep = slow })
	fe, s := tcpRelay(t, Config{Upstream: "fake"})
	if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" || !inLoop(s) {
		t.Fatalf("a text that needs no parse: client got %q, in the loop %v", got, inLoop(s))
	}
	parsed := &pgproto3.Query{String: "SELECT set_config('app.slow_parse', '1', false)"} // parsed: it may set a setting
	if got := string(roundTrip(t, fe, parsed)); got != "TDCZ" {
		t.Fatalf("a parsed text: client got %q", got)
	}
	if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" || inLoop(s) {
		t.Fatalf("after: client got %q, in the loop %v", got, inLoop(s))
	}
	m := s.srv.metrics
	if left := testutil.ToFloat64(m.loopLeaves.WithLabelValues(leaveSlowMessage)); left != 1 {
		t.Errorf("fenceproxy_event_loop_leaves_total{reason=slow_message} = %v, want 1", left)
	}
}
