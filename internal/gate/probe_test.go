package gate

import (
	"strings"
	"testing"
)

// blockProbedEmpty returns a session whose token 42 a SET LOCAL after a
// savepoint cleared, and whose probe after CALL, answered inside the
// block, found none: the session holds no token until the block ends or
// rolls back to the savepoint (maybeAtEnd), which brings 42 back.
func blockProbedEmpty(t *testing.T, scsOff bool) *wire {
	w := newWire(t, nil, false)
	if scsOff {
		w.send(q("SET standard_conforming_strings = off"))
		w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
		w.replies("CZ", 'I')
	}
	w.send(q("SET lock.fencing_token = '42'"))
	w.replies("CZ", 'I')
	for _, s := range []string{"BEGIN", "SAVEPOINT a", "SET LOCAL lock.fencing_token = ''"} {
		w.send(q(s))
		w.replies("CZ", 'T')
	}
	w.send(q("CALL p()"))
	w.replies("CCZ", 'T')
	w.replies("3123C3Z", 'T')
	return w
}

// A text the proxy cannot read passes unread only in a session that holds
// no token. One held back from the session only for the rest of a block
// may end the block (or roll back to a savepoint) and bring the token back
// inside the same text, before a write: it waits or is refused.
func TestUnreadTextCannotEndABlockThatHidesAToken(t *testing.T) {
	for name, c := range map[string]struct {
		scsOff    bool
		pipelined bool
		text      string
	}{
		"standard_conforming_strings off, ROLLBACK TO": {true, false, `ROLLBACK TO a; UPDATE t SET v = 'a\b'`},
		"standard_conforming_strings off, COMMIT":      {true, false, `COMMIT; UPDATE t SET v = 'a\b'`},
		"pipelined behind an unanswered Query":         {false, true, "ROLLBACK TO a; UPDATE t SET v = 'é'"},
	} {
		t.Run(name, func(t *testing.T) {
			w := blockProbedEmpty(t, c.scsOff)
			if c.pipelined {
				w.send(q("SELECT 1"))
			}
			if got := w.send(q(c.text)); !strings.Contains(got, "fence.check") && !strings.Contains(got, "RAISE") && got != "WAIT" {
				t.Errorf("passed unread: %s", got)
			}
		})
	}
}

// A probe due at the end of a unit that leaves a block just opened (COMMIT;
// BEGIN, COMMIT AND CHAIN, BEGIN alone) would be the block's first query:
// it would take the block's snapshot, and SET TRANSACTION ISOLATION LEVEL
// would then fail (25001). It waits for the block's end; the session is
// checked until then.
func TestAProbeIsNeverTheFirstQueryOfABlock(t *testing.T) {
	for name, send := range map[string]func(w *wire) string{
		"COMMIT; BEGIN":    func(w *wire) string { return w.send(q("COMMIT; BEGIN")) },
		"COMMIT AND CHAIN": func(w *wire) string { return w.send(q("COMMIT AND CHAIN")) },
		"extended COMMIT, BEGIN": func(w *wire) string {
			var up string
			for _, text := range []string{"COMMIT", "BEGIN"} {
				up += w.send(parse("", text)) + " " + w.send(bind("", "")) + " " + w.send(exec("")) + " "
			}
			return up + w.send(syncMsg())
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWire(t, nil, false)
			w.send(q("BEGIN"))
			w.replies("CZ", 'T')
			w.send(Msg{Type: 'F'}) // lo_creat: passes, and is probed inside the block
			w.replies("VZ", 'T')
			w.replies("3123C3Z", 'T')
			if got := send(w); strings.Contains(got, "~probe") {
				t.Errorf("a probe as the new block's first query: %s", got)
			}
		})
	}
}

// A statement or portal made by code the proxy could not see (a DO block's
// PREPARE, a function's cursor) is a query or DML statement, which may call
// set_config in its own text: run in a session without a token, a probe
// follows it, and the session is checked until the probe answers.
func TestStatementMadeByUnseenCodeIsProbed(t *testing.T) {
	for name, run := range map[string]func(w *wire) string{
		"EXECUTE":             func(w *wire) string { return w.send(q("EXECUTE x")) },
		"FETCH":               func(w *wire) string { return w.send(q("FETCH ALL FROM c")) },
		"Bind and Execute":    func(w *wire) string { return w.send(bind("", "x")) + " " + w.send(exec("")) + " " + w.send(syncMsg()) },
		"Execute of a portal": func(w *wire) string { return w.send(exec("c")) + " " + w.send(syncMsg()) },
	} {
		t.Run(name, func(t *testing.T) {
			w := newWire(t, nil, false)
			w.send(q("DO $$BEGIN EXECUTE 'PREPARE x AS SELECT pg_catalog.set_config(''lock.fencing_' || 'token'', ''41'', false)'; END$$"))
			w.replies("CZ3123C3Z", 'I') // the DO, then its probe: no token yet
			if got := run(w); !strings.Contains(got, "~probe") {
				t.Fatalf("no probe after it: %s", got)
			}
			if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "fence.check") {
				t.Errorf("the write after it, before the probe's answer, is not checked: %s", got)
			}
		})
	}
}

// Large objects in a session without a token: lo_creat, then lo_open as
// soon as lo_creat's ReadyForQuery arrives, before the probe after it
// answers. The second call waits for that answer rather than be refused.
func TestFunctionCallWaitsForTheProbeOfTheOneBefore(t *testing.T) {
	w := newWire(t, nil, false)
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	w.send(Msg{Type: 'F'})
	w.replies("VZ", 'T')
	if got := w.send(Msg{Type: 'F'}); got != "WAIT" {
		t.Fatalf("second call: %s, want WAIT", got)
	}
	w.replies("3123C3Z", 'T')
	if got := w.send(Msg{Type: 'F'}); strings.Contains(got, "RAISE") {
		t.Errorf("second call refused: %s", got)
	}
}

// A session without a token that chains its transactions (COMMIT AND
// CHAIN, or COMMIT; BEGIN in one Query) after a fast-path call in a block
// is probed inside the new block before something there takes a snapshot,
// and goes back to running unchecked: it is not checked, nor its calls
// refused, for good.
func TestChainedTransactionsGoBackToRunningUnchecked(t *testing.T) {
	for end, endReplies := range map[string]string{"COMMIT AND CHAIN": "CZ", "COMMIT; BEGIN": "CCZ"} {
		w := newWire(t, nil, false)
		w.send(q("BEGIN"))
		w.replies("CZ", 'T')
		w.send(Msg{Type: 'F'})
		w.replies("VZ3123C3Z", 'T')
		checks := 0
		for range 20 {
			if got := w.send(q(end)); strings.Contains(got, "~probe") {
				t.Fatalf("%s: a probe as the block's first query: %s", end, got)
			}
			w.replies(endReplies, 'T')
			got := w.send(Msg{Type: 'F'})
			if strings.HasPrefix(got, "WAIT") {
				w.replies(successFor(got, false), 'T') // the probe sent before it
				got = w.send(Msg{Type: 'F'})
			}
			if strings.Contains(got, "RAISE") {
				t.Fatalf("%s: a call refused: %s", end, got)
			}
			w.replies(successFor(got, false), 'T')
			if strings.Contains(w.send(q("UPDATE t SET v = 1")), "fence.check") {
				checks++
				w.replies("CCZ", 'T')
			} else {
				w.replies("CZ", 'T')
			}
		}
		if checks > 1 {
			t.Errorf("%s: %d of 20 transactions checked", end, checks)
		}
	}
}

// Statements that take no snapshot keep a block fresh: a probe after
// BEGIN then RESET (its own Query), or after a BEGIN prepared by a name
// and run as opaque code after CALL, would still be its first query.
func TestAProbeWaitsForABlocksFirstSnapshot(t *testing.T) {
	for name, c := range map[string]func(w *wire) string{
		"BEGIN, then RESET": func(w *wire) string {
			w.send(q("BEGIN"))
			w.replies("CZ", 'T')
			return w.send(q("RESET lock.fencing_token"))
		},
		"BEGIN by a name, after CALL": func(w *wire) string {
			w.send(parse("S_begin", "BEGIN"))
			w.send(syncMsg())
			w.replies("1Z", 'I')
			w.send(q("CALL p()"))
			w.replies("CZ3123C3Z", 'I')
			return w.send(bind("", "S_begin")) + " " + w.send(exec("")) + " " + w.send(syncMsg())
		},
	} {
		w := newWire(t, nil, false)
		if got := c(w); strings.Contains(got, "~probe") {
			t.Errorf("%s: %s", name, got)
		}
	}
}
