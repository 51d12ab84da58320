package pgwire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// BenchmarkLoopRelay measures one pgbench-like select-only transaction
// through the event loop over loopback TCP, in each protocol mode. Both
// ends are cheap (canned bytes, replies sent at the Sync as PostgreSQL
// does), so most of the CPU is the proxy's and the kernel's; a CPU profile
// of it (-cpuprofile) shows the proxy's own work per transaction as the
// event loop's samples outside system calls.
func BenchmarkLoopRelay(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	for _, tc := range []struct {
		name  string
		setup []pgproto3.Message
		txn   []pgproto3.Message
	}{
		{"simple", nil, []pgproto3.Message{&pgproto3.Query{String: "SELECT abalance FROM pgbench_accounts WHERE aid = 42"}}},
		{"extended", nil, []pgproto3.Message{
			&pgproto3.Parse{Query: sel},
			&pgproto3.Bind{Parameters: [][]byte{[]byte("42")}},
			&pgproto3.Describe{ObjectType: 'P'},
			&pgproto3.Execute{},
			&pgproto3.Sync{},
		}},
		{"prepared", []pgproto3.Message{&pgproto3.Parse{Name: "P_1", Query: sel}, &pgproto3.Sync{}}, []pgproto3.Message{
			&pgproto3.Bind{PreparedStatement: "P_1", Parameters: [][]byte{[]byte("42")}},
			&pgproto3.Execute{},
			&pgproto3.Sync{},
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			clientEnd, proxyClient := tcpPair(b)
			proxyUp, upstreamEnd := tcpPair(b)
			startRelayWith(b, Config{Upstream: "fake"}, cannedUpstream, nil, clientEnd, proxyClient, proxyUp, upstreamEnd)
			r := bufio.NewReaderSize(clientEnd, 8192)
			if len(tc.setup) > 0 {
				clientEnd.Write(encode(b, tc.setup...))
				untilReady(b, r)
			}
			txn := encode(b, tc.txn...)
			for b.Loop() {
				if _, err := clientEnd.Write(txn); err != nil {
					b.Fatal(err)
				}
				untilReady(b, r)
			}
		})
	}
}

// untilReady reads messages up to a ReadyForQuery.
func untilReady(tb testing.TB, r *bufio.Reader) {
	tb.Helper()
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			tb.Fatal(err)
		}
		if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[1:])) - 4); err != nil {
			tb.Fatal(err)
		}
		if hdr[0] == 'Z' {
			return
		}
	}
}

// cannedUpstream answers as fakeUpstream does, from canned bytes, and
// sends its replies at each Sync or Query, as PostgreSQL does.
func cannedUpstream(conn net.Conn) {
	enc := func(msgs ...pgproto3.BackendMessage) []byte {
		var buf []byte
		for _, m := range msgs {
			buf, _ = m.Encode(buf)
		}
		return buf
	}
	rowDesc := enc(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("abalance"), DataTypeOID: 23, DataTypeSize: 4}}})
	row := enc(&pgproto3.DataRow{Values: [][]byte{[]byte("42")}})
	done := enc(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
	ready := enc(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	replies := map[byte][]byte{
		'P': enc(&pgproto3.ParseComplete{}),
		'B': enc(&pgproto3.BindComplete{}),
		'C': enc(&pgproto3.CloseComplete{}),
		'D': rowDesc,
		'Q': slices.Concat(rowDesc, row, done, ready),
		'S': ready,
	}
	r := bufio.NewReaderSize(conn, 8192)
	var out []byte
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch hdr[0] {
		case 'E':
			if !bytes.HasPrefix(body, []byte("fenceproxy\x1f")) { // the probe's: no token, no row
				out = append(out, row...)
			}
			out = append(out, done...)
		case 'X':
			return
		default:
			out = append(out, replies[hdr[0]]...)
		}
		if hdr[0] == 'S' || hdr[0] == 'Q' || hdr[0] == 'H' {
			if _, err := conn.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}
