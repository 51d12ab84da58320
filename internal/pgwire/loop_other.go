//go:build !linux

package pgwire

import (
	"errors"
	"net"

	"github.com/fenceproxy/fenceproxy/internal/pool"
)

// The event loop is Linux's (loop_linux.go); elsewhere every session is
// relayed with two goroutines.

var errAgain = errors.New("no input ready")

type looped struct{}

func (lp *looped) post(func()) {}
func (lp *looped) end()        {}
func (lp *looped) stop()       {}
func (lp *looped) cancelDone() {}

func (s *session) relayInLoop() bool {
	s.srv.metrics.relays.WithLabelValues(relayGoroutines).Inc()
	return false
}

func (s *session) relayPooledInLoop() (over bool, handed *lending) {
	s.srv.metrics.relays.WithLabelValues(relayGoroutines).Inc()
	return false, nil
}

func loopDial(_ *Config, dial pool.DialFunc) pool.DialFunc { return dial }

// quiet: no event loop keeps a server connection here (reuse.go).
func quiet(net.Conn) bool { return false }
