package pgwire

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestAdminViewSeesEveryCheckDecided: the last check the admin view and
// refusal logs name is the gate's, whichever relay runs the session and
// whether or not the check went to the server: a statement that cannot
// run in a transaction block, alone in its Query, has its check decided
// and then dropped (it ends its own transaction), and still names it.
func TestAdminViewSeesEveryCheckDecided(t *testing.T) {
	for _, r := range relays {
		t.Run(r.name, func(t *testing.T) {
			fe, s := r.start(t)
			if _, ok := s.lastCheck(); ok {
				t.Fatal("a last check before any statement")
			}
			roundTrip(t, fe, &pgproto3.Query{String: "/* fencing_token=42 resource=acct/1 */ LOCK TABLE t"})
			c, ok := s.lastCheck()
			if !ok || c.Token != "42" || c.Resource != "acct/1" {
				t.Errorf("last check %+v (%v), want token 42, resource acct/1", c, ok)
			}
			roundTrip(t, fe, &pgproto3.Query{String: "/* fencing_token=43 resource=acct/2 */ UPDATE t SET x = 1"})
			if c, _ := s.lastCheck(); c.Token != "43" || c.Resource != "acct/2" {
				t.Errorf("after a checked UPDATE: last check %+v, want token 43, resource acct/2", c)
			}
		})
	}
}
