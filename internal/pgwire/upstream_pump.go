package pgwire

import (
	"errors"
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// pumpUpstream forwards upstream messages to the client until the upstream
// leaves; then it tells the client why, if the upstream did not. Replies to
// messages the gate injected are dropped.
func (s *session) pumpUpstream() {
	relayed := byteCount{counter: s.srv.metrics.bytesToClient}
	defer relayed.flush()
	if flushPending(s.cPending) != nil {
		return
	}
	for {
		typ, n, err := s.ur.header()
		if err != nil {
			s.upstreamReadFailed(err)
			return
		}
		if s.upstreamStep(typ, n, &relayed) {
			return
		}
		if s.ur.idle() {
			relayed.flush()
			if err := s.cw.Flush(); err != nil {
				return
			}
		}
	}
}

// upstreamReadFailed tells the client why the upstream connection ended,
// unless the server said so itself (a FATAL error) or the end was expected.
func (s *session) upstreamReadFailed(err error) {
	if s.adminStop.Load() {
		s.sendClient(s.stopError())
		return
	}
	if !s.lastFatal && !s.quiet.Load() && !isClosed(err) && !s.terminated.Load() {
		s.srv.metrics.refusedConns.WithLabelValues(failUpstreamLost).Inc()
		s.log.Warn("upstream lost", "err", err)
		s.sendClient(fatal(codeConnectionFailure, "fenceproxy: lost the connection to the upstream server"))
	}
}

// upstreamStep relays one upstream message whose header has been read; stop
// reports the end of the session (the client has been told why).
func (s *session) upstreamStep(typ byte, n int, relayed *byteCount) (stop bool) {
	closing, err := s.upstreamMessage(typ, n)
	if err != nil {
		s.upstreamMessageFailed(err)
		return true
	}
	relayed.add(n + headerLen)
	s.lastFatal = closing
	if typ == 'Z' && s.readyForQuery() {
		s.log.Info("closing session for shutdown at the end of its transaction")
		s.adminStop.Store(true)
		s.cw.Flush()
		s.sendClient(s.stopError())
		return true
	}
	return false
}

// upstreamMessageFailed tells the client, when it can, why relaying an
// upstream message (upstreamMessage's err) ends the session: a reply that
// fits nothing or cannot be decoded, the upstream's end in the middle of a
// message nothing of which reached the client, or a shutdown. Otherwise
// the client itself is gone, or has part of a streamed message that no
// error can follow.
func (s *session) upstreamMessageFailed(err error) {
	var re *replyError
	var lost *upstreamLost
	switch {
	case errors.As(err, &re):
		s.log.Error("ending session", "err", err)
		s.cw.Flush()
		s.sendClient(fatal(codeProtocolViolation, "fenceproxy: "+err.Error()+"; the session cannot continue"))
	case errors.As(err, &lost):
		s.upstreamReadFailed(lost.err)
	case s.adminStop.Load():
		if !s.looped() {
			s.cw.Reset(toClient(s.client)) // drop the unsent part of the message
		}
		s.sendClient(s.stopError())
	}
}

// upstreamMessage relays one upstream message whose header has been read,
// as gate says: forwarded, hidden (it answers an injected message) or
// replaced. closing reports an ErrorResponse of severity FATAL or PANIC:
// the server is about to close.
func (s *session) upstreamMessage(typ byte, n int) (closing bool, err error) {
	r := gate.Reply{Type: typ}
	var body []byte
	switch typ {
	case 'E', 'Z', 'S':
		if body, err = s.ur.body(n); err != nil {
			return false, &upstreamLost{err}
		}
		if r, err = decodeReply(typ, body); err != nil {
			return false, &replyError{fmt.Sprintf("malformed server reply %q: %v", typ, err)}
		}
		closing = r.Error != nil && (r.Error.Severity == "FATAL" || r.Error.Severity == "PANIC")
	}
	locked := s.lockGate()
	v := s.gate.Server(r)
	settled := s.gate.Settled()
	switch typ {
	case 'G', 'W':
		s.copyIn = true
	case 'C', 'E', 'Z':
		s.copyIn = false
	}
	if settled {
		s.copyEndsRef = s.copyEnds
	}
	if typ == 'Z' {
		// Still under gateMu: settled must not go stale. A client
		// message gate takes after it unlocks (and pgwire then counts in
		// sent) would otherwise be counted, then wiped by this reset,
		// and a graceful shutdown could end the session with it in
		// flight.
		s.stateMu.Lock()
		s.txStatus = r.Status
		s.inflight = max(s.inflight-1, 0)
		if settled {
			// Every message sent has its replies, or gets none: a Sync
			// sent during COPY FROM STDIN, which the server ignores.
			s.inflight = 0
		}
		s.stateMu.Unlock()
	}
	s.unlockGate(locked)
	if typ == 'Z' && settled {
		s.checkIdle()
	}
	if settled || typ == 'G' || typ == 'W' {
		// A CopyInResponse or CopyBothResponse wakes a held message too:
		// see heldInCopy.
		select {
		case s.settled <- struct{}{}:
		default:
		}
	}
	if typ == 'S' {
		if r.Param == "application_name" {
			s.info.setAppName(r.Value)
		}
		if s.pooled != nil {
			s.paramReported(r.Param, r.Value)
		}
		if s.reused != nil {
			s.reused.c.Params[r.Param] = r.Value // what the next client is told (reuse.go)
		}
	}
	if v.Check && v.Act != gate.Replace {
		s.checkReplied(v)
	}
	if v.Act == gate.Forward && r.Error != nil && guardRefusal(r.Error.Code) {
		s.refused(r.Error) // the database guard's, on the client's own statement
	}
	switch v.Act {
	case gate.Fail:
		return false, &replyError{"unmatched server reply: " + v.Reason}
	case gate.Replace:
		s.checkReplied(v)
		s.refused(v.Error)
		return closing, s.writeClient(v.Error)
	case gate.Hide:
		if body == nil {
			if err := s.ur.discard(n); err != nil {
				return false, &upstreamLost{err}
			}
			return false, nil
		}
		return closing, nil
	}
	if body != nil {
		return closing, s.writeRaw(s.cw, typ, body)
	}
	if err := writeHeader(s.cw, typ, n); err != nil {
		return false, err
	}
	return false, s.ur.copyBody(s.cw, n)
}

// decodeReply decodes what gate needs of an ErrorResponse, ReadyForQuery
// or ParameterStatus.
func decodeReply(typ byte, body []byte) (gate.Reply, error) {
	r := gate.Reply{Type: typ}
	switch typ {
	case 'E':
		var e pgproto3.ErrorResponse
		if err := e.Decode(body); err != nil {
			return r, err
		}
		r.Error = &e
	case 'Z':
		if len(body) != 1 {
			return r, fmt.Errorf("%w: ReadyForQuery of %d bytes", errProtocol, len(body))
		}
		r.Status = body[0]
	case 'S':
		var ps pgproto3.ParameterStatus
		if err := ps.Decode(body); err != nil {
			return r, err
		}
		r.Param, r.Value = ps.Name, ps.Value
	}
	return r, nil
}

// replyError is a server reply gate could not match to what was sent, or
// one that cannot be decoded: the session ends rather than shift every
// later answer by one.
type replyError struct{ msg string }

func (e *replyError) Error() string { return e.msg }

// upstreamLost is a failed read of the upstream in the middle of a message
// the proxy reads whole before relaying (or hides): nothing of it has
// reached the client, which can be told why the session ends.
type upstreamLost struct{ err error }

func (e *upstreamLost) Error() string { return e.err.Error() }
func (e *upstreamLost) Unwrap() error { return e.err }
