package pgwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// relayAuth relays the upstream's authentication exchange until its first
// ReadyForQuery. The proxy never sees a password in the clear unless the
// server asked the client for a cleartext one; it only forwards bytes.
func (s *session) relayAuth() error {
	for {
		typ, n, err := s.ur.header()
		if err != nil {
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: upstream closed the connection during authentication"))
			return err
		}
		body, err := s.ur.body(n)
		if err != nil {
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: upstream closed the connection during authentication"))
			return err
		}
		switch typ {
		case 'K':
			var k pgproto3.BackendKeyData
			if err := k.Decode(body); err != nil {
				return s.authReplyMalformed(typ, err)
			}
			s.info.setBackendPID(k.ProcessID)
			s.key = s.srv.cancels.register(upstreamKey{addr: s.cfg.Upstream, pid: k.ProcessID, secret: k.SecretKey})
			if err := s.writeClient(s.key); err != nil {
				return err
			}
			continue
		}
		if typ == 'R' && len(body) >= 4 && binary.BigEndian.Uint32(body) == 10 {
			body = stripChannelBinding(body) // AuthenticationSASL
		}
		if typ == 'S' {
			r, err := decodeReply(typ, body)
			if err != nil {
				return s.authReplyMalformed(typ, err)
			}
			s.gate.Server(r)
		}
		if typ == 'Z' {
			if err := s.startupProbe(); err != nil {
				return err
			}
		}
		if err := s.writeRaw(s.cw, typ, body); err != nil {
			return err
		}
		if err := s.cw.Flush(); err != nil {
			return err
		}
		switch typ {
		case 'E':
			return errors.New("upstream refused the connection")
		case 'Z':
			return nil
		case 'R':
			if len(body) >= 4 && authNeedsReply(binary.BigEndian.Uint32(body)) {
				if err := s.relayAuthReply(); err != nil {
					return err
				}
			}
		}
	}
}

// authReplyMalformed tells the client that the upstream's reply of type
// typ during authentication cannot be decoded, and returns the error.
func (s *session) authReplyMalformed(typ byte, err error) error {
	err = fmt.Errorf("malformed server reply %q during authentication: %w", typ, err)
	s.sendClient(fatal(codeProtocolViolation, "fenceproxy: "+err.Error()))
	return err
}

// startupProbe asks the server, hidden from the client, whether the new
// session holds a fencing token (from startup parameters in any form, or
// role and database defaults), before the client may send its first query.
func (s *session) startupProbe() error {
	if err := s.writeMessages(s.gate.Probe()); err != nil {
		return err
	}
	if err := s.uw.Flush(); err != nil {
		return err
	}
	for !s.gateSettled() {
		typ, n, err := s.ur.header()
		if err != nil {
			s.sendClient(fatal(codeConnectionFailure, "fenceproxy: lost the connection to the upstream server"))
			return err
		}
		if _, err := s.upstreamMessage(typ, n); err != nil {
			s.upstreamMessageFailed(err)
			return err
		}
	}
	return nil
}

// gateSettled reports whether gate has every reply to what was sent.
func (s *session) gateSettled() bool {
	defer s.unlockGate(s.lockGate())
	return s.gate.Settled()
}

// authNeedsReply reports whether an Authentication request expects a message
// from the client (PostgreSQL protocol "Message Formats": AuthenticationXxx).
func authNeedsReply(kind uint32) bool {
	switch kind {
	case 3, 5, 7, 8, 9, 10, 11: // cleartext, MD5, GSS, GSS continue, SSPI, SASL, SASL continue
		return true
	}
	return false
}

func (s *session) relayAuthReply() error {
	typ, n, err := s.cr.header()
	if err != nil {
		return err
	}
	if typ != 'p' {
		s.sendClient(fatal(codeProtocolViolation, fmt.Sprintf("fenceproxy: expected a password message, got %q", typ)))
		return fmt.Errorf("%w: expected password message, got %q", errProtocol, typ)
	}
	if n > maxStartupLen {
		s.sendClient(fatal(codeProtocolViolation, "fenceproxy: authentication message too long"))
		return fmt.Errorf("%w: password message of %d bytes", errProtocol, n)
	}
	body, err := s.cr.body(n)
	if err != nil {
		return err
	}
	if err := s.writeRaw(s.uw, typ, body); err != nil {
		return err
	}
	return s.uw.Flush()
}
