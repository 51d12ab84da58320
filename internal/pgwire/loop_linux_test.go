//go:build linux

package pgwire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rawRelays are the relays of relays, with the client's end of the
// connection for writing raw bytes.
var rawRelays = []struct {
	name  string
	start func(testing.TB) (*pgproto3.Frontend, net.Conn, *session)
}{
	{"pipe", func(tb testing.TB) (*pgproto3.Frontend, net.Conn, *session) {
		clientEnd, proxyClient := net.Pipe()
		proxyUp, upstreamEnd := net.Pipe()
		fe, s := startRelay(tb, Config{Upstream: "fake"}, clientEnd, proxyClient, proxyUp, upstreamEnd)
		return fe, clientEnd, s
	}},
	{"loop", func(tb testing.TB) (*pgproto3.Frontend, net.Conn, *session) {
		return tcpRelayConn(tb, Config{Upstream: "fake"})
	}},
	{"epoll", func(tb testing.TB) (*pgproto3.Frontend, net.Conn, *session) {
		return tcpRelayConn(tb, Config{Upstream: "fake", EpollLoop: true})
	}},
	{"goroutines", func(tb testing.TB) (*pgproto3.Frontend, net.Conn, *session) {
		return tcpRelayConn(tb, Config{Upstream: "fake", GoroutineRelay: true})
	}},
}

// smallBuffers makes tcpRelayConn's sockets small.
var smallBuffers bool

func tcpRelayConn(tb testing.TB, cfg Config) (*pgproto3.Frontend, net.Conn, *session) {
	tb.Helper()
	clientEnd, proxyClient := tcpPair(tb)
	proxyUp, upstreamEnd := tcpPair(tb)
	if smallBuffers {
		// Small socket buffers (fixed: no autotuning), so that a few MiB
		// fill them, and the proxy's writes upstream block with little
		// room left over.
		for _, c := range []net.Conn{clientEnd, proxyClient, proxyUp, upstreamEnd} {
			c.(*net.TCPConn).SetReadBuffer(128 << 10)
			c.(*net.TCPConn).SetWriteBuffer(128 << 10)
		}
		proxyUp.(*net.TCPConn).SetWriteBuffer(4 << 10)
	}
	fe, s := startRelay(tb, cfg, clientEnd, proxyClient, proxyUp, upstreamEnd)
	return fe, clientEnd, s
}

// copyData returns count CopyData messages of size bytes each, one buffer.
func copyData(count, size int) []byte {
	msg, _ := (&pgproto3.CopyData{Data: bytes.Repeat([]byte("c"), size)}).Encode(nil)
	return bytes.Repeat(msg, count)
}

// TestRelayHandOverUpstreamBacklogged: the upstream sends a row larger
// than the loop's buffer (the loop hands the session over) while it is not
// reading, because it is writing more than the sockets hold, and the proxy
// has client input it could not yet write upstream. The goroutine relay
// must read the upstream while it writes what the loop kept: nothing
// hangs, nothing is lost.
func TestRelayHandOverUpstreamBacklogged(t *testing.T) {
	filler := copyData(140, 30<<10) // 4 MiB: more than the sockets hold
	smallBuffers = true
	defer func() { smallBuffers = false }()
	for _, r := range rawRelays {
		t.Run(r.name, func(t *testing.T) {
			fe, conn, s := r.start(t)
			q, _ := (&pgproto3.Query{String: bigThenManyQuery}).Encode(nil)
			werr := make(chan error, 1)
			go func() {
				_, err := conn.Write(append(q, filler...))
				werr <- err
			}()
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			t.Cleanup(func() {
				if t.Failed() {
					s.close() // unblock the session, so that the test ends
				}
			})
			if got, want := rowBytes(t, fe, ""), len(bigValue)+manyRows*len(rowValue); got != want {
				t.Fatalf("rows: %d bytes, want %d", got, want)
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" {
				t.Fatalf("after: client got %q", got)
			}
		})
	}
}

// TestRelayRefusesBadHeaderAtOnce: a message header the proxy refuses
// (an unknown type) is answered 08P01 at once, without waiting for the
// body its length announces, whichever relays it.
func TestRelayRefusesBadHeaderAtOnce(t *testing.T) {
	for _, r := range rawRelays {
		for _, header := range [][]byte{
			{'Z', 0, 0, 3, 0xe8}, // a body of 996 bytes
			{'Z', 0, 1, 0, 0},    // 64 KiB: over the loop's buffer, refused before any hand-over
		} {
			t.Run(fmt.Sprintf("%s/%d", r.name, binary.BigEndian.Uint32(header[1:])), func(t *testing.T) {
				testRefusesBadHeaderAtOnce(t, r.start, header)
			})
		}
	}
}

func testRefusesBadHeaderAtOnce(t *testing.T, start func(testing.TB) (*pgproto3.Frontend, net.Conn, *session), header []byte) {
	fe, conn, s := start(t)
	if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" {
		t.Fatalf("client got %q", got)
	}
	if _, err := conn.Write(header); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	m, err := fe.Receive()
	if err != nil {
		t.Fatalf("no answer to a refused header: %v", err)
	}
	if e, ok := m.(*pgproto3.ErrorResponse); !ok || e.Code != codeProtocolViolation {
		t.Fatalf("got %#v, want an ErrorResponse 08P01", m)
	}
	if left := testutil.ToFloat64(s.srv.metrics.loopLeaves.WithLabelValues(leaveLargeMessage)); left != 0 {
		t.Errorf("fenceproxy_event_loop_leaves_total{reason=large_message} = %v: handed over before the refusal", left)
	}
}

// TestLoopFairToOtherSessions: a client streaming messages as fast as it
// can, to an upstream that takes them as fast, does not hold its event
// loop: another session of the same loop gets its answers meanwhile.
func TestLoopFairToOtherSessions(t *testing.T) {
	// No message is slow enough to take its session out of the loop.
	slow := loopSlowStep
	loopSlowStep = time.Hour
	t.Cleanup(func() { loopSlowStep = slow })
	var (
		flooder, other *session
		feF, feO       *pgproto3.Frontend
		connF          net.Conn
	)
	loopOf := func(s *session) *eventLoop {
		for range 200 {
			s.stateMu.Lock()
			lp := s.lp
			s.stateMu.Unlock()
			if lp != nil {
				return lp.loop
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("session not in an event loop")
		return nil
	}
	feF, connF, flooder = tcpRelayConn(t, Config{Upstream: "fake"})
	for range 16 {
		feO, _, other = tcpRelayConn(t, Config{Upstream: "fake"})
		if loopOf(other) == loopOf(flooder) {
			break
		}
	}
	if loopOf(other) != loopOf(flooder) {
		// Loops take sessions in turn: 17 sessions always put two on one.
		t.Fatalf("no two of 17 sessions on one event loop (%d loops)", len(ringLoops.all))
	}
	if got := string(roundTrip(t, feF, &pgproto3.Query{String: discardQuery})); got != "TZ" {
		t.Fatalf("discard: client got %q", got)
	}
	chunk := copyData(10_000, 20)
	var wg sync.WaitGroup
	wg.Add(1)
	flood := 3 * time.Second
	go func() {
		defer wg.Done()
		connF.SetWriteDeadline(time.Now().Add(flood))
		for {
			if _, err := connF.Write(chunk); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	time.Sleep(200 * time.Millisecond)
	var worst time.Duration
	for end := time.Now().Add(flood - time.Second); time.Now().Before(end); {
		start := time.Now()
		if got := string(roundTrip(t, feO, selectQuery...)); got != "TDCZ" {
			t.Fatalf("client got %q", got)
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("worst round trip %v", worst)
	if worst > 500*time.Millisecond {
		t.Errorf("a round trip beside a flooding session of the same loop took %v", worst)
	}
}

// TestLoopDrainWhileHandingOver: a drain (Server.Shutdown) that reaches an
// idle session as it is handed to the event loop, when its net.Conns are
// closed and the loop does not know it yet, still ends it with 57P01.
func TestLoopDrainWhileHandingOver(t *testing.T) {
	loopHandingOver = func(s *session) { s.drain() }
	t.Cleanup(func() { loopHandingOver = nil }) // after the session's end

	fe, conn, _ := tcpRelayConn(t, Config{Upstream: "fake"})
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	m, err := fe.Receive()
	if err != nil {
		t.Fatalf("drained session: %v", err)
	}
	if e, ok := m.(*pgproto3.ErrorResponse); !ok || e.Code != codeAdminShutdown {
		t.Fatalf("got %#v, want an ErrorResponse 57P01", m)
	}
}

// TestRelayDeliversBeforeClientEOF: what a client sent before it closed
// its end (a COMMIT, say) reaches the upstream, even when the end arrives
// with it, whichever relays it.
func TestRelayDeliversBeforeClientEOF(t *testing.T) {
	for _, r := range rawRelays {
		if r.name == "pipe" {
			continue // no half-close
		}
		t.Run(r.name, func(t *testing.T) {
			for i := range 20 {
				fe, conn, _ := r.start(t)
				if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" {
					t.Fatalf("client got %q", got)
				}
				q, _ := (&pgproto3.Query{String: noteQuery}).Encode(nil)
				conn.Write(q)
				conn.(*net.TCPConn).CloseWrite()
				select {
				case <-noted:
				case <-time.After(2 * time.Second):
					t.Fatalf("session %d: a query sent just before the client's end never reached the upstream", i)
				}
			}
		})
	}
}

// TestFdSinkReleasesPending: an fdSink that could write all it held keeps
// no buffer: a session idle after one burst to a slow reader does not hold
// the burst's memory.
func TestFdSinkReleasesPending(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	sink := &fdSink{fd: fds[0]}
	burst := bytes.Repeat([]byte("x"), 4<<20)
	if _, err := sink.Write(burst); err != nil {
		t.Fatal(err)
	}
	if len(sink.pending) == 0 {
		t.Fatal("the socket took 4 MiB at once")
	}
	buf := make([]byte, 64<<10)
	for read := 0; read < len(burst); {
		if n, err := syscall.Read(fds[1], buf); err == nil {
			read += n
		}
		sink.writable = true
		if err := sink.flushPending(); err != nil {
			t.Fatal(err)
		}
	}
	if len(sink.pending) != 0 || cap(sink.pending) != 0 {
		t.Errorf("after the burst: %d bytes pending, %d bytes held", len(sink.pending), cap(sink.pending))
	}
}

// TestLoopUsesIOUringWhereAvailable: where this kernel lets the process
// set up a ring, the default loop relays over io_uring, and relay: epoll
// over epoll.
func TestLoopUsesIOUringWhereAvailable(t *testing.T) {
	r, err := newRing(8)
	if err == nil {
		r.close()
	}
	for _, tt := range []struct {
		name     string
		cfg      Config
		wantRing bool
	}{
		{"loop", Config{Upstream: "fake"}, err == nil},
		{"epoll", Config{Upstream: "fake", EpollLoop: true}, false},
	} {
		_, _, s := tcpRelayConn(t, tt.cfg)
		var lp *looped
		for range 200 {
			s.stateMu.Lock()
			lp = s.lp
			s.stateMu.Unlock()
			if lp != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if lp == nil {
			t.Fatalf("%s: session not in an event loop", tt.name)
		}
		if got := lp.loop.ring != nil; got != tt.wantRing {
			t.Errorf("%s: loop over io_uring = %v, want %v (newRing: %v)", tt.name, got, tt.wantRing, err)
		}
	}
}
