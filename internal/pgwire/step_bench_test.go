package pgwire

import (
	"bufio"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// BenchmarkSessionSteps measures the proxy's own work on one pgbench-like
// select-only transaction, in each protocol mode: the client's messages
// through clientStep and the server's replies through upstreamStep, read
// from memory and written to io.Discard, as the event loop relays them
// (no lock on the gate). No socket, no goroutine hand-off: the figure is
// the per-message code alone, steadier than any run over the network.
func BenchmarkSessionSteps(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	rowDesc := &pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("abalance"), DataTypeOID: 23, DataTypeSize: 4}}}
	row := &pgproto3.DataRow{Values: [][]byte{[]byte("42")}}
	done := &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}
	ready := &pgproto3.ReadyForQuery{TxStatus: 'I'}
	for _, tc := range []struct {
		name    string
		setup   []pgproto3.Message
		txn     []pgproto3.Message
		replies []pgproto3.Message
	}{
		{"simple", nil,
			[]pgproto3.Message{&pgproto3.Query{String: "SELECT abalance FROM pgbench_accounts WHERE aid = 42"}},
			[]pgproto3.Message{rowDesc, row, done, ready}},
		{"extended", nil,
			[]pgproto3.Message{
				&pgproto3.Parse{Query: sel, ParameterOIDs: []uint32{0}},
				&pgproto3.Bind{Parameters: [][]byte{[]byte("42")}},
				&pgproto3.Describe{ObjectType: 'P'},
				&pgproto3.Execute{},
				&pgproto3.Sync{},
			},
			[]pgproto3.Message{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, rowDesc, row, done, ready}},
		{"prepared",
			[]pgproto3.Message{&pgproto3.Parse{Name: "P_1", Query: sel}, &pgproto3.Sync{}},
			[]pgproto3.Message{
				&pgproto3.Bind{PreparedStatement: "P_1", Parameters: [][]byte{[]byte("42")}},
				&pgproto3.Execute{},
				&pgproto3.Sync{},
			},
			[]pgproto3.Message{&pgproto3.BindComplete{}, row, done, ready}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := stepSession(b)
			var relayed byteCount
			relayed.counter = s.srv.metrics.bytesUpstream
			var relay func([]pgproto3.Message, []pgproto3.Message)
			step := func(msgs []pgproto3.Message, replies []pgproto3.Message) {
				s.cr.src = &repeated{b: encode(b, msgs...)}
				s.ur.src = &repeated{b: encode(b, replies...)}
				relay(msgs, replies)
			}
			relay = func(msgs []pgproto3.Message, replies []pgproto3.Message) {
				for range msgs {
					typ, n, err := s.cr.header()
					if err != nil {
						b.Fatal(err)
					}
					if stop, err := s.clientStep(typ, n, &relayed); stop || err != nil {
						b.Fatalf("client message %q: stop %v, %v", typ, stop, err)
					}
				}
				relayed.flush()
				s.uw.Flush()
				for range replies {
					typ, n, err := s.ur.header()
					if err != nil {
						b.Fatal(err)
					}
					if s.upstreamStep(typ, n, &relayed) {
						b.Fatalf("reply %q ended the session", typ)
					}
				}
				relayed.flush()
				s.cw.Flush()
			}
			if tc.setup != nil {
				step(tc.setup, []pgproto3.Message{&pgproto3.ParseComplete{}, ready})
			}
			step(tc.txn, tc.replies)
			csrc, usrc := s.cr.src.(*repeated), s.ur.src.(*repeated)
			b.ReportAllocs()
			for b.Loop() {
				csrc.off, usrc.off = 0, 0
				relay(tc.txn, tc.replies)
			}
		})
	}
}

// stepSession is a session past its startup probe (answered by
// cannedUpstream), then cut off from its connections for
// BenchmarkSessionSteps: it writes to io.Discard, and relays as the event
// loop does.
func stepSession(b *testing.B) *session {
	b.Helper()
	clientEnd, proxyClient := net.Pipe()
	proxyUp, upstreamEnd := net.Pipe()
	go cannedUpstream(upstreamEnd)
	s := NewServer(Config{Upstream: "fake"}).newRelay(proxyClient, proxyUp, map[string]string{"user": "u"})
	if err := s.startupProbe(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { clientEnd.Close(); upstreamEnd.Close(); proxyClient.Close(); proxyUp.Close() })
	s.cw, s.uw = bufio.NewWriterSize(io.Discard, ioBufferSize), bufio.NewWriterSize(io.Discard, ioBufferSize)
	s.inLoop = true
	return s
}

// repeated reads b once, from off.
type repeated struct {
	b   []byte
	off int
}

func (r *repeated) Read(p []byte) (int, error) {
	if r.off == len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}
