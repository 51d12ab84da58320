package pgwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// pumpClient forwards client messages upstream until the client leaves,
// showing gate the messages it decides on.
// It returns a *clientError when the client's input must be refused, and a
// *writeError when writing upstream failed.
func (s *session) pumpClient() error {
	relayed := byteCount{counter: s.srv.metrics.bytesUpstream}
	defer relayed.flush()
	if over, err := s.resumeFromLoop(); over {
		return err
	}
	for {
		typ, n, err := s.cr.header()
		if err != nil {
			return s.clientReadFailed(err)
		}
		if err := s.checkClientMessage(typ, n); err != nil {
			return err
		}
		if stop, err := s.clientStep(typ, n, &relayed); stop || err != nil {
			return err
		}
		if s.cr.idle() {
			relayed.flush()
			if err := s.uw.Flush(); err != nil {
				return err
			}
		}
	}
}

// resumeFromLoop starts the client direction of the goroutine relay where
// an event loop that handed the session over left it: what the upstream
// could not take yet goes first, and a message that waited for gate to
// settle waits on. over reports the session is over, with err as
// pumpClient returns it.
func (s *session) resumeFromLoop() (over bool, err error) {
	if err := flushPending(s.uPending); err != nil {
		return true, &writeError{upstream: true, err: err}
	}
	if !s.waitFirst {
		return false, nil
	}
	if err := s.waitSettled(); err != nil {
		var ce *clientError
		if errors.As(err, &ce) {
			return true, err
		}
		return true, nil
	}
	return false, nil
}

// clientReadFailed says how reading the client's next message ended the
// session: a malformed header is refused, anything else means the client
// left.
func (s *session) clientReadFailed(err error) error {
	if errors.Is(err, errProtocol) {
		return protocolViolation(err.Error())
	}
	if !isClosed(err) && err != io.EOF {
		s.log.Info("client read", "err", err)
	}
	return nil
}

// clientStep relays one client message whose header has been read and
// passed checkClientMessage. stop reports the end of the session, with a
// *clientError when the client is refused and a *writeError when writing
// upstream failed; errWaitSettled (event loop only) means the message must
// be read again once gate has settled.
func (s *session) clientStep(typ byte, n int, relayed *byteCount) (stop bool, err error) {
	if typ == 'X' && s.reused != nil {
		// Not forwarded: the server connection may serve the next
		// client (reuse.go).
		s.terminated.Store(true)
		s.cr.discard(n)
		s.uw.Flush()
		return true, nil
	}
	if err := s.clientMessage(typ, n); err != nil {
		var ce *clientError
		switch {
		case err == errWaitSettled:
			return false, err
		case errors.As(err, &ce) || upstreamWriteFailed(err):
			return true, err
		case !isClosed(err):
			s.log.Info("client message", "type", string(typ), "err", err)
		}
		return true, nil
	}
	relayed.add(n + headerLen)
	if typ == 'X' {
		s.terminated.Store(true)
		s.uw.Flush()
		return true, nil
	}
	return false, nil
}

// checkClientMessage refuses a message type PostgreSQL does not accept
// after startup and a length beyond the proxy's limits, before a byte of
// the message is forwarded.
//
// Unknown types are refused here, as PostgreSQL would (postgres.c
// SocketBackend: "invalid frontend message type"), rather than forwarded:
// the proxy cannot frame what it does not know, and gate must see every
// message that can run SQL.
func (s *session) checkClientMessage(typ byte, n int) error {
	switch typ {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'H', 'S', 'F', 'X', 'd', 'c', 'f':
	default:
		return protocolViolation(fmt.Sprintf("invalid frontend message type %d", typ))
	}
	if n > maxAnyMessage-4 {
		return protocolViolation(fmt.Sprintf("invalid message length %d", n+4))
	}
	switch typ {
	case 'Q', 'P', 'E', 'D', 'C':
		if limit := s.cfg.maxMessageBytes(); n+4 > limit {
			return protocolViolation(fmt.Sprintf("message %q of %d bytes exceeds max_message_bytes (%d)", typ, n+4, limit))
		}
	}
	return nil
}

// clientMessage forwards one client message whose header has been read,
// as gate decides: unchanged, with messages before or after it, replaced,
// dropped, or after waiting for the replies to what was sent before.
func (s *session) clientMessage(typ byte, n int) error {
	switch typ {
	case 'Q', 'P', 'E', 'D', 'C':
		body, err := s.cr.body(n)
		if err != nil {
			return err
		}
		m, err := decodeClient(typ, body, s.pooled != nil)
		if err != nil {
			return err
		}
		if s.pooled != nil && typ == 'P' {
			m.Server = s.newStatementName()
		}
		d, err := s.decide(m)
		if err != nil {
			return err
		}
		if s.pooled != nil {
			return s.pooledMessage(typ, body, &m, &d)
		}
		own, err := s.applyBefore(d)
		if err == nil && own {
			if err = s.writeRaw(s.uw, typ, body); err == nil {
				s.sent(typ)
			}
		}
		return s.applyAfter(d, err)
	case 'B':
		return s.bind(n)
	case 'S', 'F':
		d, err := s.decide(gate.Msg{Type: typ})
		if err != nil {
			return err
		}
		own, err := s.applyBefore(d)
		if err == nil {
			err = s.ownOrDiscard(own, n, func() error { return s.forward(typ, n) })
		}
		return s.applyAfter(d, err)
	case 'c', 'f':
		// gate marks where the copy ends (the Syncs before it may be
		// ignored by the server); CopyData is not shown to it.
		d, err := s.decide(gate.Msg{Type: typ})
		if err != nil {
			return err
		}
		locked := s.lockGate()
		s.copyEnds++
		s.unlockGate(locked)
		own, err := s.applyBefore(d)
		if err == nil {
			err = s.ownOrDiscard(own, n, func() error { return s.forward(typ, n) })
		}
		return s.applyAfter(d, err)
	}
	return s.forward(typ, n)
}

// forward streams a client message's body upstream unchanged.
func (s *session) forward(typ byte, n int) error {
	if err := writeHeader(s.uw, typ, n); err != nil {
		return err
	}
	if err := s.cr.copyBody(s.uw, n); err != nil {
		return err
	}
	s.sent(typ)
	return nil
}

// decodeClient decodes what gate needs of a Query, Parse, Execute,
// Describe or Close; a Parse's parameter types only when pooled (gate
// reads them only under Config.Pooled).
func decodeClient(typ byte, body []byte, pooled bool) (gate.Msg, error) {
	m := gate.Msg{Type: typ}
	switch typ {
	case 'Q':
		var q pgproto3.Query
		if err := q.Decode(body); err != nil {
			return m, protocolViolation("invalid Query message: " + err.Error())
		}
		m.Text = q.String
	case 'P':
		if !decodeParse(body, &m, pooled) {
			return m, protocolViolation("invalid Parse message")
		}
	case 'E':
		portal, rest, ok := cstring(body)
		if !ok || len(rest) < 4 {
			return m, protocolViolation("invalid Execute message")
		}
		m.Portal = portal
	case 'D', 'C':
		if len(body) < 2 {
			return m, protocolViolation(fmt.Sprintf("invalid %q message", typ))
		}
		name, rest, ok := cstring(body[1:])
		if !ok || len(rest) > 0 {
			return m, protocolViolation(fmt.Sprintf("invalid %q message", typ))
		}
		m.Object, m.Name = body[0], name
	}
	return m, nil
}

// decodeParse reads a Parse message's name, text, whether a parameter
// type is a user's (Msg.UserTyped) and, when types is set, the parameter
// types into m, as pgproto3.Parse.Decode does without its
// copies: that copies each string twice (bytes.Buffer.ReadBytes, then
// string) and grows the types' slice one by one, on every Parse a driver
// sends.
func decodeParse(body []byte, m *gate.Msg, types bool) bool {
	name, rest, ok := cstring(body)
	if !ok {
		return false
	}
	text, rest, ok := cstring(rest)
	if !ok || len(rest) < 2 {
		return false
	}
	k := int(binary.BigEndian.Uint16(rest))
	if rest = rest[2:]; len(rest) < 4*k {
		return false
	}
	m.Name, m.Text = name, text
	if types && k > 0 {
		m.ParamTypes = make([]uint32, k)
	}
	for i := range k {
		oid := binary.BigEndian.Uint32(rest[4*i:])
		if types {
			m.ParamTypes[i] = oid
		}
		m.UserTyped = m.UserTyped || oid >= gate.FirstUserOID
	}
	return true
}

// cstring splits the NUL-terminated string at the start of b from the
// rest; ok is false when b holds no NUL.
func cstring(b []byte) (s string, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}

// decide asks gate about m, waiting as long as gate says to: until every
// reply to what was sent before has arrived.
func (s *session) decide(m gate.Msg) (gate.Decision, error) {
	for {
		locked := s.lockGate()
		if s.reloaded.Load() != nil { // loaded first: no atomic write on every message
			if cfg := s.reloaded.Swap(nil); cfg != nil {
				if g, ok := s.gate.(interface{ Reconfigure(*gate.Config) }); ok {
					g.Reconfigure(cfg)
				}
			}
		}
		d := s.gate.Client(m)
		settled := d.Wait && s.gate.Settled() // only a Wait needs it
		s.publishLastCheck()
		s.unlockGate(locked)
		if d.Fail != "" {
			return d, protocolViolation(d.Fail)
		}
		if !d.Wait {
			return d, nil
		}
		if settled {
			// Nothing in flight can settle gate: asked again, it would
			// answer the same, and the relay would spin (or the loop
			// requeue the message) for good.
			s.log.Error("gate holds a message back with nothing in flight", "type", string(m.Type))
			return d, errWaitSettledGate()
		}
		if err := s.writeMessages(d.Before); err != nil {
			return d, err
		}
		if err := s.uw.Flush(); err != nil {
			return d, err
		}
		if s.looped() {
			return d, errWaitSettled
		}
		if err := s.waitSettled(); err != nil {
			return d, err
		}
	}
}

// waitSettled blocks until gate has every reply to what was sent. It
// refuses the held message when the server waits for COPY data instead
// (heldInCopy): it would wait for good.
func (s *session) waitSettled() error {
	for !s.gateSettled() {
		if s.heldInCopy() {
			return errHeldInCopy()
		}
		select {
		case <-s.settled:
		case <-s.closed:
			return net.ErrClosed
		}
	}
	return nil
}

// heldInCopy reports, while a client message waits for gate to settle,
// whether the server waits for COPY data: it started a COPY FROM STDIN
// (CopyInResponse) or a walsender's CopyBoth mode (CopyBothResponse, to
// START_REPLICATION), and the client has forwarded no CopyDone or CopyFail
// since gate last settled (one forwarded since may end it). PostgreSQL
// answers any other message in either mode with an error (a FATAL one in
// CopyBoth mode), and the replies the held message waits for would never
// come.
func (s *session) heldInCopy() bool {
	defer s.unlockGate(s.lockGate())
	return s.copyIn && s.copyEnds == s.copyEndsRef
}

// errWaitSettledGate ends a session whose gate answered Wait with every
// reply arrived: a bug in gate, reported as one.
func errWaitSettledGate() *clientError {
	return &clientError{code: codeInternalError, msg: "fenceproxy: internal error: a message was held back with no reply outstanding; the session cannot continue"}
}

func errHeldInCopy() *clientError {
	return protocolViolation("unexpected message during COPY from stdin or CopyBoth mode: the server waits for copy data (CopyData, CopyDone or CopyFail)")
}

// applyBefore carries out what d puts ahead of the client's message: the
// messages before it, or its replacement. own reports whether the client's
// message itself goes upstream next; the caller writes it, then calls
// applyAfter. (Two calls rather than one taking a closure: a closure per
// message costs an allocation.)
func (s *session) applyBefore(d gate.Decision) (own bool, err error) {
	if len(d.Before) > 0 || d.Replace != nil || d.Drop {
		s.srv.metrics.checks.Inc()
		s.checkSending(d)
	}
	if err := s.writeMessages(d.Before); err != nil {
		return false, err
	}
	if d.Replace != nil {
		return false, s.writeUpstream(d.Replace)
	}
	return !d.Drop, nil
}

// ownOrDiscard sends the client's message (forward) when applyBefore said
// it goes upstream, and otherwise reads and drops its unread n bytes.
func (s *session) ownOrDiscard(own bool, n int, forward func() error) error {
	if own {
		return forward()
	}
	return s.cr.discard(n)
}

// applyAfter writes the messages d puts after the client's, unless err (of
// what was written before them) is not nil: then it returns err.
func (s *session) applyAfter(d gate.Decision, err error) error {
	if err != nil {
		return err
	}
	return s.writeMessages(d.After)
}

// writeMessages writes injected messages upstream.
func (s *session) writeMessages(msgs []pgproto3.FrontendMessage) error {
	for _, m := range msgs {
		if err := s.writeUpstream(m); err != nil {
			return err
		}
	}
	return nil
}

// sent counts a message sent upstream that a ReadyForQuery answers.
func (s *session) sent(typ byte) {
	switch typ {
	case 'Q', 'S', 'F':
		s.stateMu.Lock()
		s.inflight++
		s.stateMu.Unlock()
		if typ == 'S' {
			s.extOpen.Store(false)
		}
		if typ == 'Q' && s.pooled != nil && s.pooled.cur != nil {
			borrowed(s.pooled.cur).unnamed = "" // a Query, the client's or gate's, drops the unnamed statement
		}
	case 'P', 'B', 'E', 'D', 'C':
		// An extended sequence is open until its Sync: the server may be
		// running an Execute that a graceful shutdown must let finish.
		// (Loaded first: no store, no lock, on every message of a sequence.)
		if !s.extOpen.Load() {
			s.extOpen.Store(true)
		}
	}
}

// bind forwards a Bind, reading only the portal and statement names and
// streaming the parameters.
func (s *session) bind(n int) error {
	portal, err := s.cr.cstring(n)
	if err != nil {
		return bindError(err)
	}
	stmt, err := s.cr.cstring(n - len(portal) - 1)
	if err != nil {
		return bindError(err)
	}
	rest := n - len(portal) - len(stmt) - 2
	m := gate.Msg{Type: 'B', Portal: portal, Name: stmt}
	if s.pooled != nil {
		// The gate reads parameters only for a set_config of a fencing
		// setting, and only from a Bind held whole (gate.Msg.Args).
		m.Args = s.cr.peek(rest)
	}
	d, err := s.decide(m)
	if err != nil {
		return err
	}
	sent := stmt
	if s.pooled != nil {
		sent = serverStatement(stmt, &d)
	}
	own, err := s.applyBefore(d)
	if err == nil {
		err = s.ownOrDiscard(own, rest, func() error { return s.forwardBind(n, portal, sent, rest) })
	}
	return s.applyAfter(d, err)
}

// forwardBind writes a Bind upstream: its header and names, then the rest
// of its body (rest bytes) streamed from the client.
func (s *session) forwardBind(n int, portal, stmt string, rest int) error {
	if err := writeHeader(s.uw, 'B', len(portal)+len(stmt)+2+rest); err != nil {
		return err
	}
	s.uw.WriteString(portal)
	s.uw.WriteByte(0)
	s.uw.WriteString(stmt)
	s.uw.WriteByte(0)
	if err := s.cr.copyBody(s.uw, rest); err != nil {
		return err
	}
	s.sent('B')
	return nil
}

func bindError(err error) error {
	if errors.Is(err, errProtocol) {
		return protocolViolation("invalid Bind message: " + err.Error())
	}
	return err
}
