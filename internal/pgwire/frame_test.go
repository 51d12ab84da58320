package pgwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
)

func encode(tb testing.TB, msgs ...pgproto3.Message) []byte {
	tb.Helper()
	var buf []byte
	for _, m := range msgs {
		var err error
		if buf, err = m.Encode(buf); err != nil {
			tb.Fatal(err)
		}
	}
	return buf
}

// TestReaderRelaysByteExact frames a stream that arrives one byte at a time
// and checks that copying every body reproduces the stream exactly.
func TestReaderRelaysByteExact(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 100_000) // larger than the read buffer
	in := encode(t,
		&pgproto3.Query{String: "SELECT 1"},
		&pgproto3.CopyData{Data: big},
		&pgproto3.Sync{},
		&pgproto3.Terminate{},
	)
	r := newReader(iotest.OneByteReader(bytes.NewReader(in)))
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	var types []byte
	for {
		typ, n, err := r.header()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		writeHeader(w, typ, n)
		if err := r.copyBody(w, n); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	if string(types) != "QdSX" {
		t.Errorf("types %q, want QdSX", types)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Errorf("relayed stream differs from input (%d vs %d bytes)", out.Len(), len(in))
	}
}

func TestReaderRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"length below 4", []byte{'Q', 0, 0, 0, 3}, errProtocol},
		{"negative length", []byte{'Q', 0xff, 0xff, 0xff, 0xff}, errProtocol},
		{"truncated header", []byte{'Q', 0, 0}, io.ErrUnexpectedEOF},
		{"truncated body", []byte{'Q', 0, 0, 0, 10, 'S', 'E'}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReader(bytes.NewReader(tt.in))
			typ, n, err := r.header()
			if err == nil {
				_ = typ
				err = r.copyBody(io.Discard, n)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReadStartup(t *testing.T) {
	ok := encode(t, &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "u"}})
	if pkt, err := readStartup(bytes.NewReader(ok)); err != nil || len(pkt) != len(ok)-4 {
		t.Fatalf("valid startup: %d bytes, %v", len(pkt), err)
	}
	for name, in := range map[string][]byte{
		"too short": {0, 0, 0, 4},
		"too long":  {0, 0, 0x7f, 0xff},
		"truncated": {0, 0, 0, 20, 0, 3},
	} {
		if _, err := readStartup(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// againAfter returns its bytes, then errAgain, as an event loop's socket
// with nothing more ready.
type againAfter struct{ b []byte }

func (a *againAfter) Read(p []byte) (int, error) {
	if len(a.b) == 0 {
		return 0, errAgain
	}
	n := copy(p, a.b)
	a.b = a.b[n:]
	return n, nil
}

// TestReaderDecidesFromTheMessage: a name that runs past the end of its
// message is refused from the message's own bytes, without reading on
// (the event loop has nothing more to give).
func TestReaderDecidesFromTheMessage(t *testing.T) {
	r := newReader(&againAfter{b: append([]byte{'B', 0, 0, 0, 6}, "ab"...)})
	if ok, err := r.ready(); !ok || err != nil {
		t.Fatalf("ready: %v, %v", ok, err)
	}
	_, n, _ := r.header()
	if _, err := r.cstring(n); !errors.Is(err, errProtocol) {
		t.Fatalf("cstring: %v, want a protocol violation", err)
	}
}
