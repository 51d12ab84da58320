package pgwire

import (
	"bufio"
	"bytes"
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

// reader frames PostgreSQL messages from a stream through a buffer of its
// own, without holding bodies it is not asked to decode.
//
// Over a net.Conn every call blocks until it has what it needs. Over an
// event loop's socket (fd_linux.go) the source returns errAgain when
// nothing is ready; the loop then reads a message only once ready() reports
// it buffered whole, so no later call needs the source, and a message can
// be read again from its start (mark, rewind).
type reader struct {
	src  io.Reader
	buf  []byte // buf[r:w] is buffered input
	r, w int
	big  []byte // scratch for bodies larger than buf
}

func newReader(src io.Reader) *reader {
	return &reader{src: src, buf: make([]byte, ioBufferSize)}
}

// fill reads once from the source into the free end of the buffer, first
// moving the buffered bytes to its start when the end is full.
func (r *reader) fill() error {
	if r.r == r.w {
		r.r, r.w = 0, 0
	} else if r.w == len(r.buf) && r.r > 0 {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	n, err := r.src.Read(r.buf[r.w:])
	r.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		return io.ErrNoProgress
	}
	return err
}

// ensure buffers at least k bytes (k <= len(buf)).
func (r *reader) ensure(k int) error {
	for r.w-r.r < k {
		if err := r.fill(); err != nil {
			return err
		}
	}
	return nil
}

// header reads the next message header and returns the type and body length.
func (r *reader) header() (typ byte, n int, err error) {
	if err := r.ensure(headerLen); err != nil {
		if r.w > r.r {
			err = unexpectedEOF(err)
		}
		return 0, 0, err
	}
	typ, n, err = parseHeader(r.buf[r.r : r.r+headerLen])
	if err == nil {
		r.r += headerLen
	}
	return typ, n, err
}

func parseHeader(h []byte) (typ byte, n int, err error) {
	size := int32(binary.BigEndian.Uint32(h[1:]))
	if size < 4 {
		return 0, 0, fmt.Errorf("%w: invalid message length %d (type %q)", errProtocol, size, h[0])
	}
	return h[0], int(size) - 4, nil
}

// ready reports whether the next message can be read from the buffer
// alone: it is buffered whole, or its header is and it is larger than the
// buffer can ever hold (holds). It reads from the source what it can; err
// is the source's error (errAgain when nothing more is ready) or a
// malformed header.
func (r *reader) ready() (bool, error) {
	if err := r.ensure(headerLen); err != nil {
		return false, err
	}
	_, n, err := parseHeader(r.buf[r.r : r.r+headerLen])
	if err != nil {
		return false, err
	}
	if !r.holds(n) {
		return true, nil
	}
	if err := r.ensure(headerLen + n); err != nil {
		return false, err
	}
	return true, nil
}

// peekHeader returns the next message's header when it is buffered and
// well-formed, without reading it.
func (r *reader) peekHeader() (typ byte, n int, whole bool) {
	if r.w-r.r < headerLen {
		return 0, 0, false
	}
	typ, n, err := parseHeader(r.buf[r.r : r.r+headerLen])
	return typ, n, err == nil
}

// peek returns the next n bytes when they are buffered, without reading
// them, else nil. The slice is valid until the next call.
func (r *reader) peek(n int) []byte {
	if n < 0 || r.w-r.r < n {
		return nil
	}
	return r.buf[r.r : r.r+n]
}

// holds reports whether a message with an n-byte body fits the buffer.
func (r *reader) holds(n int) bool { return n <= len(r.buf)-headerLen }

// mark returns the read position, for rewind; valid while no call fills the
// buffer (while the message read is buffered whole).
func (r *reader) mark() int { return r.r }

func (r *reader) rewind(mark int) { r.r = mark }

// body reads an n-byte body. The slice is valid until the next call.
func (r *reader) body(n int) ([]byte, error) {
	if n <= len(r.buf) {
		if err := r.ensure(n); err != nil {
			return nil, unexpectedEOF(err)
		}
		b := r.buf[r.r : r.r+n]
		r.r += n
		return b, nil
	}
	if cap(r.big) < n {
		r.big = make([]byte, n)
	}
	b := r.big[:n]
	k := copy(b, r.buf[r.r:r.w])
	r.r += k
	if _, err := io.ReadFull(r.src, b[k:]); err != nil {
		return nil, unexpectedEOF(err)
	}
	return b, nil
}

// copyBody streams an n-byte body to w through the buffer, so a body is
// never held whole.
func (r *reader) copyBody(w io.Writer, n int) error {
	for n > 0 {
		if r.r == r.w {
			if err := r.fill(); err != nil {
				return unexpectedEOF(err)
			}
		}
		k := min(n, r.w-r.r)
		if _, err := w.Write(r.buf[r.r : r.r+k]); err != nil {
			return err
		}
		r.r += k
		n -= k
	}
	return nil
}

// discard skips an n-byte body.
func (r *reader) discard(n int) error {
	return r.copyBody(io.Discard, n)
}

// cstring reads a NUL-terminated string of at most limit bytes including
// the NUL, from within a message body.
func (r *reader) cstring(limit int) (string, error) {
	for {
		avail := r.buf[r.r:r.w]
		if i := bytes.IndexByte(avail[:min(len(avail), limit)], 0); i >= 0 {
			s := string(avail[:i])
			r.r += i + 1
			return s, nil
		}
		if len(avail) >= limit {
			// Decided from the message's own bytes: never wait for more.
			return "", fmt.Errorf("%w: string runs past the end of its message", errProtocol)
		}
		if r.r == 0 && r.w == len(r.buf) {
			return "", fmt.Errorf("%w: name longer than %d bytes", errProtocol, len(r.buf))
		}
		if err := r.fill(); err != nil {
			return "", unexpectedEOF(err)
		}
	}
}

// peekByte returns the next byte without consuming it; 0xFF when it
// cannot be read (the caller then reads the error).
func (r *reader) peekByte() byte {
	if r.ensure(1) != nil {
		return 0xFF
	}
	return r.buf[r.r]
}

// idle reports whether no more input is already buffered, i.e. the peer is
// waiting for us: the moment to flush what we have written.
func (r *reader) idle() bool { return r.r == r.w }

// drained reports whether nothing is buffered, here or in the source (an
// event loop's socket keeps what its ring received): a connection read
// through r may then be read by another reader.
func (r *reader) drained() bool {
	if !r.idle() {
		return false
	}
	b, ok := r.src.(interface{ buffered() int })
	return !ok || b.buffered() == 0
}

// buffersTerminate reports whether the whole messages buffered, from skip
// bytes on (past the body of a message whose header was read), include a
// Terminate.
func (r *reader) buffersTerminate(skip int) bool {
	for at := r.r + skip; r.w-at >= headerLen; {
		typ, n, err := parseHeader(r.buf[at : at+headerLen])
		if err != nil {
			return false
		}
		if typ == 'X' {
			return true
		}
		at += headerLen + n
	}
	return false
}

// reset forgets what is buffered.
func (r *reader) reset() { r.r, r.w = 0, 0 }

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
		return nil, fmt.Errorf("%w %d", errStartupLength, size)
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
