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

func TestCursorDeclaredAfterTheTokenIsChecked(t *testing.T) {
	w := inBlock(t, "SET LOCAL lock.fencing_token = 101")
	if got := w.send(q("DECLARE c CURSOR FOR SELECT balance FROM accounts")); !checked(got) {
		t.Fatalf("DECLARE after the token: %s, want checked", got)
	}
	w.replies("CCZ", 'T')
	if got := w.send(q("FETCH c")); raised(got) {
		t.Fatalf("FETCH of a cursor declared after the token: %s", got)
	}
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
