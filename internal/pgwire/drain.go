package pgwire

import (
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// drain asks the session to end at its next idle moment: now, if it is
// idle; otherwise after the ReadyForQuery that leaves it idle. A session
// still starting up ends when it gets there.
func (s *session) drain() {
	s.stateMu.Lock()
	s.draining = true
	idle := s.proxying && s.inflight == 0 && s.txStatus == 'I' && !s.extOpen.Load()
	s.stateMu.Unlock()
	if idle {
		s.log.Info("closing idle session for shutdown")
		s.stopUpstream()
	}
}

// stop ends the session now, telling the client 57P01 when it is past
// startup.
func (s *session) stop() {
	s.stateMu.Lock()
	s.draining = true
	proxying := s.proxying
	s.stateMu.Unlock()
	if proxying {
		s.log.Info("closing session for shutdown", "tx_status", string(s.status()))
		s.stopUpstream()
		return
	}
	s.close()
}

func (s *session) status() byte {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.txStatus
}

// stopUpstream closes the upstream connection so that the upstream reader,
// which owns s.cw, tells the client 57P01 and ends the session.
func (s *session) stopUpstream() {
	s.adminStop.Store(true)
	s.stateMu.Lock()
	upstream, lp := s.upstream, s.lp
	if s.pooled != nil && upstream != nil {
		s.pooled.broken = true // closed below: it must not go back to the pool
	}
	s.stateMu.Unlock()
	if lp != nil {
		lp.post(lp.stop)
		return
	}
	if upstream == nil {
		// A pooled session between lendings: its client reader, woken,
		// tells the client.
		s.client.SetReadDeadline(time.Now())
		return
	}
	upstream.Close()
}

// stopError is the 57P01 error a session ended by the proxy gets: for a
// shutdown, or by Server.Terminate.
func (s *session) stopError() *pgproto3.ErrorResponse {
	if s.adminKill.Load() {
		return fatal(codeAdminShutdown, "fenceproxy: terminating connection due to administrator command")
	}
	return shutdownError()
}

func shutdownError() *pgproto3.ErrorResponse {
	return fatal(codeAdminShutdown, "fenceproxy: terminating connection because the proxy is shutting down")
}

// readyForQuery is called after a ReadyForQuery was relayed: it reports
// whether the session should now end for a shutdown.
func (s *session) readyForQuery() bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.draining && s.inflight == 0 && s.txStatus == 'I' && !s.extOpen.Load()
}
