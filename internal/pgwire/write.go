package pgwire

import (
	"bufio"
	"errors"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

func (s *session) writeUpstream(msg pgproto3.FrontendMessage) error {
	buf, err := msg.Encode(s.encBuf[:0])
	if err != nil {
		return err
	}
	s.encBuf = buf
	if _, err = s.uw.Write(buf); err != nil {
		return err
	}
	s.sent(buf[0])
	return nil
}

func (s *session) writeRaw(w *bufio.Writer, typ byte, body []byte) error {
	if err := writeHeader(w, typ, len(body)); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

func (s *session) writeClient(msg pgproto3.BackendMessage) error {
	buf, err := msg.Encode(nil)
	if err != nil {
		return err
	}
	_, err = s.cw.Write(buf)
	return err
}

// sendClient writes msg to the client directly and flushes; used on error
// paths where the buffered writer may not exist yet.
func (s *session) sendClient(msg pgproto3.BackendMessage) {
	buf, err := msg.Encode(nil)
	if err != nil {
		return
	}
	if s.cw != nil {
		s.cw.Write(buf)
		s.cw.Flush()
		return
	}
	s.client.SetWriteDeadline(time.Now().Add(time.Second))
	s.client.Write(buf)
}

// peerWriter is one of a session's connections as the other direction
// writes it. Its errors are writeErrors, so that a failed write to one
// peer is told apart from a failed read of the other.
type peerWriter struct {
	w        io.Writer
	upstream bool // w is the upstream connection
}

func toClient(w io.Writer) io.Writer   { return peerWriter{w: w} }
func toUpstream(w io.Writer) io.Writer { return peerWriter{w: w, upstream: true} }

func (p peerWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil {
		err = &writeError{upstream: p.upstream, err: err}
	}
	return n, err
}

// writeError is a failed write to the client or, when upstream, to the
// server.
type writeError struct {
	upstream bool
	err      error
}

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// upstreamWriteFailed reports whether err is a failed write to the server:
// the upstream connection is broken, and reading its end tells the client
// why (upstreamReadFailed).
func upstreamWriteFailed(err error) bool {
	var we *writeError
	return errors.As(err, &we) && we.upstream
}
