package pgwire

import (
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Startup-phase request codes (PostgreSQL src/include/libpq/pqcomm.h).
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
)

// startup reads the client's startup packets, answering SSL and GSSAPI
// encryption requests with 'N' and serving cancel requests. It returns the
// StartupMessage, or nil when the connection was a cancel request.
func (s *session) startup() (*pgproto3.StartupMessage, error) {
	for {
		pkt, err := readStartup(s.client)
		if errors.Is(err, errStartupLength) {
			// PostgreSQL logs this (COMMERROR) and closes without a word:
			// the bytes may not be a startup packet at all (a driver
			// that queued Terminate ahead of its StartupMessage).
			return nil, err
		}
		if errors.Is(err, errProtocol) {
			return nil, protocolViolation(err.Error())
		}
		if err != nil {
			return nil, err
		}
		switch code := binary.BigEndian.Uint32(pkt); code {
		case codeSSLRequest:
			if s.clientTLSOn {
				return nil, protocolViolation("SSLRequest over TLS")
			}
			if s.cfg.TLS != nil {
				if err := s.clientTLS(); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case codeGSSENCRequest:
			if _, err := s.client.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case codeCancelRequest:
			var req pgproto3.CancelRequest
			if err := req.Decode(pkt); err != nil {
				return nil, protocolViolation("invalid cancel request: " + err.Error())
			}
			s.cancel(&req)
			return nil, nil
		default:
			var msg pgproto3.StartupMessage
			if err := msg.Decode(pkt); err != nil {
				return nil, protocolViolation("invalid startup packet: " + err.Error())
			}
			return &msg, nil
		}
	}
}

func (s *session) cancel(req *pgproto3.CancelRequest) {
	up, ok := s.srv.cancels.lookup(req)
	if !ok {
		s.log.Info("cancel request with unknown key")
		return
	}
	if up.pooled != nil {
		var done func()
		if up, done, ok = up.pooled.pooledCancelKey(); !ok {
			return // no statement of the session's runs: nothing to cancel
		}
		defer done()
	}
	if up.reused != nil {
		if !up.reused.cancelling() {
			return // the session is over: the backend may be another client's
		}
		defer up.reused.cancels.Done()
	}
	if err := forwardCancel(up, s.cfg.dialTimeout()); err != nil {
		s.log.Warn("forward cancel request", "err", err)
		if up.reused != nil {
			up.reused.unclear.Store(true)
		}
	}
}

func (s *session) connectUpstream(startup *pgproto3.StartupMessage) error {
	raw, err := net.DialTimeout("tcp", s.cfg.Upstream, s.cfg.dialTimeout())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.startupTimeout())
	conn, err := s.cfg.upstreamTLS(raw, deadline)
	if err != nil {
		raw.Close()
		return err
	}
	conn.SetDeadline(deadline)
	s.attach(conn)
	buf, err := startup.Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	return nil
}

// timedConnect is connectUpstream, timed for
// fenceproxy_upstream_connect_duration_seconds and noted for readiness
// (Server.LastUpstreamContact) when it succeeds.
func (s *session) timedConnect(startup *pgproto3.StartupMessage) error {
	start := time.Now()
	if err := s.connectUpstream(startup); err != nil {
		return err
	}
	now := time.Now()
	s.srv.metrics.connectSeconds.Observe(now.Sub(start).Seconds())
	s.srv.upstreamOK.Store(now.UnixNano())
	return nil
}

// walsender reports whether the startup parameter replication, of value v,
// asks PostgreSQL for a walsender: any value it does not read as false
// (parse_bool; an invalid value the server refuses). The proxy refuses
// such connections (docs/design.md "Fail closed"): gate cannot read replication
// commands, its probes are refused there, and START_REPLICATION's CopyBoth
// mode is a stream the relay does not fence.
func walsender(v string) bool {
	v = strings.ToLower(v)
	switch {
	case v == "0", v == "of", v == "off":
		return false
	case v != "" && (strings.HasPrefix("false", v) || strings.HasPrefix("no", v)):
		return false
	}
	return true
}
