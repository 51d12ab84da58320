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
// session's loops over net.Pipe, with a fake upstream that answers as
// PostgreSQL would, without rows (fakePG: every Query, Sync and
// FunctionCall gets ReadyForQuery; COPY … FROM STDIN gets CopyInResponse
// and reads what follows as the server does in COPY-in mode). The session must end,
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
	// COPY … FROM STDIN: libpq's PQexecParams (a Sync behind the Execute,
	// another after CopyDone), Syncs inside a Query's COPY, a COPY that
	// fails, two COPYs in one Query, SQL during the copy, a probe due.
	const cp = "COPY t FROM STDIN"
	row := &pgproto3.CopyData{Data: []byte("1\n")}
	for _, msgs := range [][]pgproto3.FrontendMessage{
		{&pgproto3.Parse{Query: cp}, &pgproto3.Bind{}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{},
			row, &pgproto3.CopyDone{}, &pgproto3.Sync{}, &pgproto3.Query{String: "SELECT 1"}},
		{&pgproto3.Query{String: "CALL p(); " + cp}, &pgproto3.Sync{}, row, &pgproto3.CopyDone{}, &pgproto3.Query{String: "SELECT 1"}},
		{&pgproto3.Parse{Query: cp}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}, row,
			&pgproto3.CopyFail{Message: "no"}, &pgproto3.Sync{}, &pgproto3.Query{String: "SELECT 1"}},
		{&pgproto3.Query{String: cp}, &pgproto3.Query{String: "SELECT 1"}},
		{&pgproto3.Parse{Query: "CALL p()"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Parse{Query: cp}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}, &pgproto3.Sync{},
			&pgproto3.CopyDone{}, &pgproto3.Sync{}, &pgproto3.Query{String: "SELECT 1"}},
		{&pgproto3.Query{String: cp + "; " + cp}, &pgproto3.CopyDone{}, &pgproto3.Sync{}, &pgproto3.CopyDone{},
			&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}},
	} {
		var b []byte
		for _, m := range msgs {
			b, _ = m.Encode(b)
		}
		f.Add(b)
	}
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
		pg := newFakePG()
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
			if reply := pg.reply(typ, body); reply != nil {
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

// fakePG is fuzzSession's upstream: it answers frontend messages as a
// PostgreSQL server would, without rows, so that what gate waits for
// arrives. It knows one kind of error: COPY … FROM STDIN (a Query or the
// Execute of a portal whose text holds "copy" and "stdin") answers
// CopyInResponse, and then, as in copyfromparse.c, CopyData, Sync and
// Flush are read as part of the copy, CopyDone completes it, CopyFail and
// any other message fail it (the other message is consumed). After an
// error in an extended-protocol message it skips to Sync, as postgres.c
// does; outside COPY-in mode it ignores CopyData, CopyDone and CopyFail.
type fakePG struct {
	copying byte // 'Q' or 'E': the message that started COPY-in mode
	skip    bool
	stmts   map[string]string
	portals map[string]string
}

func newFakePG() *fakePG {
	return &fakePG{stmts: map[string]string{}, portals: map[string]string{}}
}

func fakeMsg(t byte, b ...byte) []byte {
	n := 4 + len(b)
	return append([]byte{t, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, b...)
}

func fakeError(code string) []byte {
	body := []byte("SERROR\x00C" + code + "\x00Mfake\x00\x00")
	return fakeMsg('E', body...)
}

func fakeCopyIn(text string) bool {
	l := bytes.ToLower([]byte(text))
	return bytes.Contains(l, []byte("copy")) && bytes.Contains(l, []byte("stdin"))
}

// cstrings splits a message body into its leading NUL-terminated strings.
func cstrings(body []byte, n int) []string {
	var out []string
	for len(out) < n {
		i := bytes.IndexByte(body, 0)
		if i < 0 {
			out = append(out, string(body))
			body = nil
			continue
		}
		out = append(out, string(body[:i]))
		body = body[i+1:]
	}
	return out
}

func (pg *fakePG) reply(typ byte, body []byte) []byte {
	ready := fakeMsg('Z', 'I')
	if pg.copying != 0 {
		from := pg.copying
		var out []byte
		switch typ {
		case 'd', 'S', 'H':
			return nil
		case 'c':
			pg.copying = 0
			out = fakeMsg('C', []byte("COPY 0\x00")...)
			if from == 'Q' {
				out = append(out, ready...)
			}
			return out
		case 'f':
			out = fakeError("57014")
		default:
			out = fakeError("08P01")
		}
		pg.copying = 0
		if from == 'Q' {
			return append(out, ready...)
		}
		pg.skip = true
		return out
	}
	if pg.skip {
		if typ == 'S' {
			pg.skip = false
			return ready
		}
		return nil
	}
	switch typ {
	case 'Q':
		if fakeCopyIn(cstrings(body, 1)[0]) {
			pg.copying = 'Q'
			return fakeMsg('G', 0, 0, 0)
		}
		return ready
	case 'S':
		return ready
	case 'F':
		return append(fakeMsg('V', 0xff, 0xff, 0xff, 0xff), ready...)
	case 'P':
		f := cstrings(body, 2)
		pg.stmts[f[0]] = f[1]
		return fakeMsg('1')
	case 'B':
		f := cstrings(body, 2)
		pg.portals[f[0]] = pg.stmts[f[1]]
		return fakeMsg('2')
	case 'C':
		return fakeMsg('3')
	case 'E':
		if fakeCopyIn(pg.portals[cstrings(body, 1)[0]]) {
			pg.copying = 'E'
			return fakeMsg('G', 0, 0, 0)
		}
		return fakeMsg('C', []byte("SELECT 0\x00")...)
	case 'D':
		if len(body) > 0 && body[0] == 'S' {
			return append(fakeMsg('t', 0, 0), fakeMsg('n')...)
		}
		return fakeMsg('n')
	}
	return nil
}
