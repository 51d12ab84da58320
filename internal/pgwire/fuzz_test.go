package pgwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Seed corpora live in testdata/fuzz/<target>; `go test` runs them as
// ordinary tests and `make fuzz` explores from them.

func FuzzReadStartup(f *testing.F) {
	startup, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": "u", "database": "d"}}).Encode(nil)
	f.Add(startup)
	f.Add(sslRequest)
	f.Add([]byte{0, 0, 0, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		pkt, err := readStartup(bytes.NewReader(data))
		if err != nil {
			return
		}
		size := int(binary.BigEndian.Uint32(data))
		if len(pkt) != size-4 || size > maxStartupLen || size < 8 {
			t.Fatalf("packet of %d bytes from length field %d", len(pkt), size)
		}
		// What the session does next with it must not panic either.
		var msg pgproto3.StartupMessage
		msg.Decode(pkt)
		var cancel pgproto3.CancelRequest
		cancel.Decode(pkt)
	})
}

// FuzzReader frames arbitrary bytes the ways the session does: decoding
// small bodies, streaming large ones, reading Bind's leading names.
func FuzzReader(f *testing.F) {
	var seed []byte
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Query{String: "SELECT 1"},
		&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s", Parameters: [][]byte{[]byte("42")}},
		&pgproto3.CopyData{Data: []byte("row\n")},
		&pgproto3.Sync{},
	} {
		seed, _ = m.Encode(seed)
	}
	f.Add(seed)
	f.Add([]byte{'Q', 0, 0, 0, 2})
	f.Add([]byte{'B', 0, 0, 0, 6, 'a', 'b'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newReader(bytes.NewReader(data))
		consumed := 0
		for i := 0; ; i++ {
			typ, n, err := r.header()
			if err != nil {
				if !errors.Is(err, errProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("header: unexpected error %v", err)
				}
				return
			}
			if n < 0 {
				t.Fatalf("negative body length %d", n)
			}
			consumed += headerLen
			var out bytes.Buffer
			switch {
			case typ == 'B':
				p, err := r.cstring(n)
				if err != nil {
					return
				}
				s, err := r.cstring(n - len(p) - 1)
				if err != nil {
					return
				}
				if len(p)+len(s)+2 > n {
					t.Fatalf("names of %d bytes in a body of %d", len(p)+len(s)+2, n)
				}
				err = r.copyBody(&out, n-len(p)-len(s)-2)
				if err != nil {
					return
				}
			case i%2 == 0 && n <= 1<<16: // the session decodes only bounded bodies
				b, err := r.body(n)
				if err != nil {
					return
				}
				if len(b) != n {
					t.Fatalf("body of %d bytes, want %d", len(b), n)
				}
			default:
				if err := r.copyBody(&out, n); err != nil {
					return
				}
				if out.Len() != n {
					t.Fatalf("copied %d bytes, want %d", out.Len(), n)
				}
			}
			consumed += n
			if consumed > len(data) {
				t.Fatalf("consumed %d of %d bytes", consumed, len(data))
			}
		}
	})
}

// FuzzSession sends arbitrary bytes as a client's messages through a
// session's loops over net.Pipe, with a fake upstream that answers every
// Query, Sync and FunctionCall with ReadyForQuery. The session must end,
// and what reached the upstream must be whole messages of known types:
// nothing half-forwarded except by a connection the proxy then closed.
func FuzzSession(f *testing.F) {
	var seed []byte
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Query{String: "BEGIN"},
		&pgproto3.Parse{Name: "s", Query: "SELECT $1"},
		&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}},
		&pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{},
		&pgproto3.Sync{},
		&pgproto3.Query{String: "COMMIT"},
	} {
		seed, _ = m.Encode(seed)
	}
	f.Add(seed)
	f.Add(append(seed, 'Z', 0, 0, 0, 5, 'I'))
	f.Add([]byte{'d', 0, 0, 0, 100, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		t.Run("pipe", func(t *testing.T) {
			clientEnd, proxyClient := net.Pipe()
			proxyUp, upstreamEnd := net.Pipe()
			fuzzSession(t, data, clientEnd, proxyClient, proxyUp, upstreamEnd)
		})
		t.Run("loop", func(t *testing.T) {
			clientEnd, proxyClient := tcpPair(t)
			proxyUp, upstreamEnd := tcpPair(t)
			fuzzSession(t, data, clientEnd, proxyClient, proxyUp, upstreamEnd)
		})
	})
}

// fuzzSession is FuzzSession's session over the given connections (the
// event loop relays TCP ones).
func fuzzSession(t *testing.T, data []byte, clientEnd, proxyClient, proxyUp, upstreamEnd net.Conn) {
	srv := NewServer(Config{Upstream: "fake", MaxMessageBytes: 4096})
	s := srv.newRelay(proxyClient, proxyUp, map[string]string{"user": "u"})

	// The fake upstream: frame what arrives, answer it as PostgreSQL would
	// (without rows, errors or skipping to Sync), in order, and record
	// whether the stream ended mid-message.
	upDone := make(chan error, 1)
	replies, stop := make(chan []byte, 1<<10), make(chan struct{})
	go func() {
		ur := newReader(upstreamEnd)
		for {
			typ, n, err := ur.header()
			if err == io.EOF || err == io.ErrUnexpectedEOF || errors.Is(err, syscall.ECONNRESET) {
				// Ended, or cut short by the proxy's close (a reset when
				// it closed a TCP socket with replies unread).
				upDone <- nil
				return
			}
			if err != nil {
				upDone <- err
				return
			}
			if err := s.checkClientMessage(typ, n); err != nil {
				upDone <- err
				return
			}
			body, err := ur.body(n)
			if err != nil {
				upDone <- nil // cut short: the proxy closed the connection
				return
			}
			if reply := fuzzReply(typ, body); reply != nil {
				select {
				case replies <- reply:
				case <-stop:
				}
			}
		}
	}()
	go func() {
		for {
			select {
			case r := <-replies:
				upstreamEnd.Write(r)
			case <-stop:
				return
			}
		}
	}()
	defer close(stop)
	go io.Copy(io.Discard, clientEnd)
	go func() {
		clientEnd.Write(data)
		clientEnd.Close()
	}()
	done := make(chan struct{})
	go func() { s.proxy(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	// The session closed its end of the upstream pipe: the fake
	// upstream sees EOF once it has read everything.
	if err := <-upDone; err != nil {
		t.Fatalf("upstream received a message the proxy should have refused: %v", err)
	}
	upstreamEnd.Close()
}

// fuzzReply is fuzzSession's upstream's answer to a frontend message: a
// PostgreSQL server's, without rows or errors, so that what gate waits for
// arrives.
func fuzzReply(typ byte, body []byte) []byte {
	msg := func(t byte, b ...byte) []byte {
		return append([]byte{t, 0, 0, 0, byte(4 + len(b))}, b...)
	}
	done := msg('C', []byte("SELECT 0\x00")...)
	ready := msg('Z', 'I')
	switch typ {
	case 'Q', 'S':
		return ready
	case 'F':
		return append(msg('V', 0xff, 0xff, 0xff, 0xff), ready...)
	case 'P':
		return msg('1')
	case 'B':
		return msg('2')
	case 'C':
		return msg('3')
	case 'E':
		return done
	case 'D':
		if len(body) > 0 && body[0] == 'S' {
			return append(msg('t', 0, 0), msg('n')...)
		}
		return msg('n')
	}
	return nil
}
