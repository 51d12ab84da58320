package gate

import (
	"strings"
	"testing"
)

// plainWire returns a session without a token, idle, with
// standard_conforming_strings off when scsOff.
func plainWire(t *testing.T, scsOff bool) *wire {
	w := newWire(t, nil, false)
	if scsOff {
		w.send(q("SET standard_conforming_strings = off"))
		w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
		w.replies("CZ", 'I')
	}
	return w
}

// blockProbedEmpty returns a session whose token 42 a SET LOCAL after a
// savepoint cleared, and whose probe after CALL, answered inside the
// block, found none: the session holds no token until the block ends or
// rolls back to the savepoint (maybeAtEnd), which brings 42 back.
func blockProbedEmpty(t *testing.T, scsOff bool) *wire {
	w := plainWire(t, scsOff)
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

// A probe due in a block opened earlier, in which no statement has taken a
// snapshot yet (only BEGIN, SET, RESET or SHOW ran), would be its first
// query just the same: RESET ALL, RESET of a fencing setting or SET … TO
// DEFAULT after BEGIN, answered or not, in one Query or several, in either
// protocol. Once a query has run in the block, a probe may go inside it.
func TestAProbeWaitsUntilTheBlockHasASnapshot(t *testing.T) {
	resets := []string{"RESET ALL", "RESET lock.fencing_token", "SET lock.resource TO DEFAULT"}
	type step func(w *wire) string
	query := func(text, replies string, status byte) step {
		return func(w *wire) string {
			up := w.send(q(text))
			if replies != "" {
				w.replies(replies, status)
			}
			return up
		}
	}
	extended := func(text string) step {
		return func(w *wire) string {
			return w.send(parse("", text)) + " " + w.send(bind("", "")) + " " + w.send(exec("")) + " " + w.send(syncMsg())
		}
	}
	for _, reset := range resets {
		for name, steps := range map[string][]step{
			"BEGIN answered, then":         {query("BEGIN", "CZ", 'T'), query(reset, "", 0)},
			"BEGIN not yet answered, then": {query("BEGIN", "", 0), query(reset, "", 0)},
			"one Query":                    {query("BEGIN; "+reset, "", 0)},
			"after SET and SHOW":           {query("BEGIN", "CZ", 'T'), query("SET work_mem = '8MB'", "CZ", 'T'), query("SHOW work_mem", "TDCZ", 'T'), query(reset, "", 0)},
			"extended":                     {extended("BEGIN"), extended(reset)},
		} {
			t.Run(reset+"/"+name, func(t *testing.T) {
				w := newWire(t, nil, false)
				var up string
				for _, s := range steps {
					up += s(w) + " "
				}
				if strings.Contains(up, "~probe") {
					t.Errorf("a probe before the block's first query: %s", up)
				}
			})
		}
	}
	t.Run("a call that waits for it", func(t *testing.T) {
		// A fast-path call takes a snapshot: the held probe goes just
		// before it, and the call waits for its answer (not refused).
		w := inBlock(t, "RESET lock.fencing_token")
		if got := w.send(Msg{Type: 'F'}); !strings.Contains(got, "~probe") || strings.Contains(got, "RAISE") {
			t.Errorf("a fast-path call after RESET in a new block: %s, want the probe and a wait", got)
		}
	})
	t.Run("after a query", func(t *testing.T) {
		w := inBlock(t, "SELECT 1")
		if got := w.send(q("RESET ALL")); !strings.Contains(got, "~probe") {
			t.Errorf("no probe after RESET ALL in a block that has its snapshot: %s", got)
		}
	})
}

// A probe held in a block without a snapshot goes just before the block's
// first statement that may take one, and that statement waits for its
// answer: in a session with no token it is then decided as in any other
// (not checked, not refused): a FETCH of a WITH HOLD cursor, a write and
// PREPARE TRANSACTION after it, a statement the proxy cannot read (under
// standard_conforming_strings off), in either protocol.
func TestAHeldProbeGoesBeforeTheBlocksFirstQuery(t *testing.T) {
	held := func(t *testing.T, scsOff bool) *wire {
		w := plainWire(t, scsOff)
		w.send(q("DECLARE c CURSOR WITH HOLD FOR SELECT 1"))
		w.replies("CZ", 'I')
		w.send(q("BEGIN"))
		w.replies("CZ", 'T')
		if up := w.send(q("RESET ALL")); strings.Contains(up, "~probe") {
			t.Fatalf("a probe as the block's first query: %s", up)
		}
		w.replies("CZ", 'T')
		return w
	}
	// first sends m, which must wait behind the probe; the probe answers
	// that no token is set, and m is sent again.
	first := func(t *testing.T, w *wire, m Msg) string {
		if up := w.send(m); !strings.Contains(up, "~probe") || !strings.Contains(up, "WAIT") {
			t.Fatalf("the block's first query: %s, want the probe before it and a wait", up)
		}
		w.replies("3123C3Z", 'T')
		return w.send(m)
	}
	unchecked := func(t *testing.T, up string) {
		t.Helper()
		if strings.Contains(up, "~check") || strings.Contains(up, "~raise") || strings.Contains(up, "RAISE") {
			t.Errorf("checked or refused in a session without a token: %s", up)
		}
	}
	t.Run("FETCH of a WITH HOLD cursor", func(t *testing.T) {
		unchecked(t, first(t, held(t, false), q("FETCH 1 FROM c")))
	})
	t.Run("a write, then PREPARE TRANSACTION", func(t *testing.T) {
		w := held(t, false)
		unchecked(t, first(t, w, q("INSERT INTO t VALUES (1)")))
		w.replies("CZ", 'T')
		unchecked(t, w.send(q("PREPARE TRANSACTION 'x'")))
	})
	t.Run("extended, a text the proxy cannot read", func(t *testing.T) {
		w := held(t, true)
		up := first(t, w, parse("", `UPDATE t SET v = 'a\\b'`))
		for _, m := range []Msg{bind("", ""), exec(""), syncMsg()} {
			up += " " + w.send(m)
		}
		unchecked(t, up)
	})
	t.Run("extended, a batch that begins with a Close", func(t *testing.T) {
		w := held(t, false)
		up := first(t, w, Msg{Type: 'C', Object: 'S', Name: "S_gone"})
		for _, m := range []Msg{parse("", "FETCH 1 FROM c"), bind("", ""), exec(""), syncMsg()} {
			up += " " + w.send(m)
		}
		unchecked(t, up)
	})
	t.Run("SET and SHOW keep it held", func(t *testing.T) {
		w := held(t, false)
		for _, text := range []string{"SET work_mem = '8MB'", "/* app */ SHOW work_mem"} {
			if up := w.send(q(text)); strings.Contains(up, "~probe") || strings.Contains(up, "WAIT") {
				t.Errorf("%s: %s", text, up)
			}
			w.replies("CZ", 'T')
		}
	})
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
