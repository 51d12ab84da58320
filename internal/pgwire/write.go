package pgwire

import (
	"bufio"
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
