package gate

import (
	"strings"
	"testing"
)

// A cursor or portal reads the snapshot taken when it was declared or
// bound. Read after the fencing settings changed, its check comes after
// that snapshot: under READ COMMITTED the check waits for the previous
// holder of the lock, and the cursor still returns rows from before that
// holder's commit. Such a read is refused; one made after the settings is
// checked as before.

// raised and checked tell a refusal and a check in what the gate sent, in
// either protocol.
func raised(upstream string) bool {
	return strings.Contains(upstream, "~raise") || strings.Contains(upstream, "RAISE EXCEPTION")
}

func checked(upstream string) bool {
	return strings.Contains(upstream, "~check") || strings.Contains(upstream, "CALL fence.check")
}

// inBlock sends each Query in a transaction block with no token yet, each
// answered CZ.
func inBlock(t *testing.T, queries ...string) *wire {
	t.Helper()
	w := newWire(t, nil, false)
	for _, text := range append([]string{"BEGIN"}, queries...) {
		w.send(q(text))
		w.replies("CZ", 'T')
	}
	return w
}

func TestCursorDeclaredBeforeTheTokenIsRefused(t *testing.T) {
	w := inBlock(t, "DECLARE c CURSOR FOR SELECT balance FROM accounts", "SET LOCAL lock.fencing_token = 101")
	if got := w.send(q("FETCH c")); !raised(got) {
		t.Fatalf("FETCH of a cursor declared before the token: %s, want refused", got)
	}
}

// declareAndRead sends declare, which must be checked, then fetch, which
// must not be refused.
func declareAndRead(t *testing.T, w *wire, declare, fetch string) {
	t.Helper()
	if got := w.send(q(declare)); !checked(got) {
		t.Fatalf("%s: %s, want checked", declare, got)
	}
	w.replies("CCZ", 'T')
	if got := w.send(q(fetch)); raised(got) {
		t.Errorf("%s after %s: %s", fetch, declare, got)
	}
}

func TestCursorDeclaredAfterTheTokenIsChecked(t *testing.T) {
	declareAndRead(t, inBlock(t, "SET LOCAL lock.fencing_token = 101"), "DECLARE c CURSOR FOR SELECT balance FROM accounts", "FETCH c")
}

func TestPortalBoundBeforeTheTokenIsRefused(t *testing.T) {
	w := inBlock(t)
	w.send(parse("s", "SELECT balance FROM accounts"))
	w.send(bind("p", "s"))
	w.send(syncMsg())
	w.replies("12Z", 'T')
	w.send(q("SET LOCAL lock.fencing_token = 101"))
	w.replies("CZ", 'T')
	if got := w.send(exec("p")); !raised(got) {
		t.Fatalf("Execute of a portal bound before the token: %s, want refused", got)
	}
}

func TestPortalBoundAfterTheTokenInOnePipelineIsChecked(t *testing.T) {
	// pgxfence's shape: set_config, then the statement, before one Sync.
	w := newWire(t, nil, false)
	got := w.send(parse("", "SELECT pg_catalog.set_config('lock.fencing_token', '101', true)")) +
		w.send(bind("", "")) + w.send(exec("")) +
		w.send(parse("", "UPDATE accounts SET balance = 1")) + w.send(bind("", "")) + w.send(exec("")) + w.send(syncMsg())
	if raised(got) || !checked(got) {
		t.Fatalf("set_config, then UPDATE: %s, want the UPDATE checked", got)
	}
}

func TestCursorReadWithACommentTokenItWasNotDeclaredWithIsRefused(t *testing.T) {
	w := inBlock(t, "DECLARE c CURSOR FOR SELECT balance FROM accounts")
	if got := w.send(q("/* fencing_token=101 resource=acct/1 */ FETCH c")); !raised(got) {
		t.Errorf("FETCH with a comment token of a cursor declared without it: %s, want refused", got)
	}
	w = inBlock(t, "DECLARE c CURSOR FOR SELECT balance FROM accounts")
	got := w.send(parse("", "/* fencing_token=101 resource=acct/1 */ FETCH c")) + w.send(bind("", "")) + w.send(exec("")) + w.send(syncMsg())
	if !raised(got) {
		t.Errorf("extended FETCH with a comment token of a cursor declared without it: %s, want refused", got)
	}
	// Declared under the same comment token: checked at its DECLARE, read as usual.
	declareAndRead(t, inBlock(t), "/* fencing_token=101 resource=acct/1 */ DECLARE c CURSOR FOR SELECT balance FROM accounts",
		"/* fencing_token=101 resource=acct/1 */ FETCH c")
}

func TestStatementWithACommentTokenIsCheckedBeforeItsBind(t *testing.T) {
	// The Bind takes the portal's snapshot: the check goes before it, not
	// before the Execute only.
	w := newWire(t, nil, false)
	w.send(parse("", "/* fencing_token=101 resource=acct/1 */ SELECT balance FROM accounts"))
	if got := w.send(bind("", "")); !checked(got) {
		t.Fatalf("Bind of a statement with a comment token: %s, want a check in front", got)
	}
	if got := w.send(exec("")); checked(got) || raised(got) {
		t.Errorf("Execute after the Bind's check: %s", got)
	}
}
