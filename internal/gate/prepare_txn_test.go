package gate

import (
	"strings"
	"testing"
)

// A transaction that passed a check holds its resource's mark locked;
// prepared, it would hold it until COMMIT or ROLLBACK PREPARED, and every
// later holder would block. PREPARE TRANSACTION is refused once a check
// may have run in the transaction, also in a session without a token (a
// directive's check), answered or pipelined.
func TestPrepareTransactionAfterACheckIsRefused(t *testing.T) {
	const write = "/* fencing_token=42 resource=r */ UPDATE t SET v = 1"
	t.Run("answered", func(t *testing.T) {
		w := newWire(t, nil, false)
		w.send(q("BEGIN"))
		w.replies("CZ", 'T')
		if got := w.send(q(write)); !strings.Contains(got, "fence.check('42'") {
			t.Fatalf("the write is not checked: %s", got)
		}
		w.replies("CCZ", 'T')
		if got := w.send(q("PREPARE TRANSACTION 'x'")); !strings.Contains(got, "0A000") {
			t.Errorf("prepared after a check: %s", got)
		}
	})
	t.Run("pipelined", func(t *testing.T) {
		w := newWire(t, nil, false)
		w.send(q("BEGIN"))
		w.send(q(write))
		if got := w.send(q("PREPARE TRANSACTION 'x'")); !strings.Contains(got, "0A000") {
			t.Errorf("prepared after a check: %s", got)
		}
	})
	t.Run("no check", func(t *testing.T) {
		w := newWire(t, nil, false)
		w.send(q("BEGIN"))
		w.replies("CZ", 'T')
		w.send(q("UPDATE t SET v = 1"))
		w.replies("CZ", 'T')
		if got := w.send(q("PREPARE TRANSACTION 'x'")); got != "Q(PREPARE TRANSACTION 'x')" {
			t.Errorf("a transaction no check ran in: %s", got)
		}
	})
}

// A statement prepared by Parse as PREPARE TRANSACTION stays one after code
// the proxy cannot see made its names unknown (opaque): code can replace
// a statement only with a query or DML statement, so what its text said
// still counts, and it is refused in a session that may carry a token.
func TestPrepareTransactionByANameAfterOpaqueCodeIsRefused(t *testing.T) {
	w := newWire(t, nil, true)
	w.replies(successFor(w.send(parse("pt", "PREPARE TRANSACTION 'x'"))+" "+w.send(syncMsg()), true), 'I')
	w.send(q("DO $$BEGIN NULL; END$$"))
	w.replies("CCZ", 'I')
	w.replies("3123DC3Z", 'I') // its probe: the token is still set
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	w.send(q("UPDATE t SET v = 1"))
	w.replies("CCZ", 'T')
	if got := w.send(bind("", "pt")) + " " + w.send(exec("")); !strings.Contains(got, "~raise") {
		t.Errorf("prepared by a name after opaque code: %s", got)
	}
}

// The same where the PREPARE TRANSACTION cannot be read (pipelined behind
// the checked write, with a non-ASCII byte): it may not pass unread.
func TestPrepareTransactionUnreadAfterACheckIsRefused(t *testing.T) {
	w := newWire(t, nil, false)
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	if got := w.send(q("/* fencing_token=42 resource=r */ UPDATE t SET v = 1")); !strings.Contains(got, "fence.check('42'") {
		t.Fatalf("not checked: %s", got)
	}
	if got := w.send(q("PREPARE TRANSACTION 'tx-é'")); !strings.Contains(got, "0A000") && got != "WAIT" {
		t.Errorf("a checked transaction prepared: %s", got)
	}
}
