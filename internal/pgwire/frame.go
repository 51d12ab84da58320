package pgwire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// headerLen is the size of a regular message header: type byte + int32 length
// (the length counts itself but not the type byte).
const headerLen = 5

// maxStartupLen bounds the startup packet, like PostgreSQL's
// MAX_STARTUP_PACKET_LENGTH (src/include/libpq/pqcomm.h).
const maxStartupLen = 10000

// reader frames PostgreSQL messages from a buffered stream without holding
// bodies it is not asked to decode.
type reader struct {
	br  *bufio.Reader
	hdr [headerLen]byte
	buf []byte
}

func newReader(r io.Reader) *reader {
	return &reader{br: bufio.NewReaderSize(r, ioBufferSize)}
}

// header reads the next message header and returns the type and body length.
func (r *reader) header() (typ byte, n int, err error) {
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return 0, 0, err
	}
	size := int32(binary.BigEndian.Uint32(r.hdr[1:]))
	if size < 4 {
		return 0, 0, fmt.Errorf("%w: invalid message length %d (type %q)", errProtocol, size, r.hdr[0])
	}
	return r.hdr[0], int(size) - 4, nil
}

// body reads an n-byte body. The slice is valid until the next call to body.
func (r *reader) body(n int) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		return nil, unexpectedEOF(err)
	}
	return r.buf, nil
}

// copyBody streams an n-byte body to w through the read buffer, one buffer
// at a time, so a body is never held whole and small ones cost no copy
// beyond the write.
func (r *reader) copyBody(w io.Writer, n int) error {
	for n > 0 {
		chunk, err := r.br.Peek(min(n, r.br.Size()))
		if len(chunk) == 0 && err != nil {
			return unexpectedEOF(err)
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		r.br.Discard(len(chunk))
		n -= len(chunk)
	}
	return nil
}

// discard skips an n-byte body.
func (r *reader) discard(n int) error {
	_, err := r.br.Discard(n)
	return unexpectedEOF(err)
}

// cstring reads a NUL-terminated string of at most limit bytes including
// the NUL, from within a message body.
func (r *reader) cstring(limit int) (string, error) {
	b, err := r.br.ReadSlice(0)
	if err != nil {
		if err == bufio.ErrBufferFull {
			return "", fmt.Errorf("%w: name longer than %d bytes", errProtocol, r.br.Size())
		}
		return "", unexpectedEOF(err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("%w: string runs past the end of its message", errProtocol)
	}
	return string(b[:len(b)-1]), nil
}

// idle reports whether no more input is already buffered, i.e. the peer is
// waiting for us: the moment to flush what we have written.
func (r *reader) idle() bool { return r.br.Buffered() == 0 }

// writeHeader writes a message header for a body of n bytes.
// It appends to the writer's own buffer: a header array passed to Write
// would escape to the heap, one allocation per message.
func writeHeader(w *bufio.Writer, typ byte, n int) error {
	hdr := binary.BigEndian.AppendUint32(append(w.AvailableBuffer(), typ), uint32(n+4))
	_, err := w.Write(hdr)
	return err
}

// readStartup reads one startup-phase packet (length-prefixed, no type byte).
// The returned slice is the packet without its length and is owned by the caller.
func readStartup(r io.Reader) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(lenBuf[:]))
	if size < 8 || size > maxStartupLen {
		return nil, fmt.Errorf("%w: invalid startup packet length %d", errProtocol, size)
	}
	pkt := make([]byte, size-4)
	if _, err := io.ReadFull(r, pkt); err != nil {
		return nil, unexpectedEOF(err)
	}
	return pkt, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
