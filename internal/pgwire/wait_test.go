package pgwire

import (
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// stuckGate is a gate that holds stuckQuery back (Wait) for good, even
// with nothing in flight that could settle it: a gate bug the relay must
// not spin on.
type stuckGate struct{ *gate.Session }

const stuckQuery = "SELECT stuck"

func (g stuckGate) Client(m gate.Msg) gate.Decision {
	if m.Type == 'Q' && m.Text == stuckQuery {
		return gate.Decision{Wait: true}
	}
	return g.Session.Client(m)
}

// TestRelayRefusesWaitWhenSettled: a gate that answers Wait while every
// reply has arrived (nothing in flight could settle it) made the goroutine
// relay spin in decide and the event loop requeue the message for good.
// Both end the session with an internal error (XX000) instead.
func TestRelayRefusesWaitWhenSettled(t *testing.T) {
	for _, r := range relays {
		t.Run(r.name, func(t *testing.T) {
			fe, _, s := relayWith(t, r.name, fakeUpstream, func(s *session) { s.gate = stuckGate{s.gate.(*gate.Session)} })
			if got := string(roundTrip(t, fe, selectQuery...)); got != "TDCZ" {
				t.Fatalf("client got %q", got)
			}
			fe.Send(&pgproto3.Query{String: stuckQuery})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			wantError(t, fe, s, codeInternalError)
		})
	}
}
