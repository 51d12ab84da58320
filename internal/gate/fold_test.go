package gate

import (
	"strings"
	"testing"
)

// A server whose encoding is single-byte folds a non-ASCII letter of an
// unquoted name with its locale's tolower, which may give an ASCII letter
// (the Turkish İ, 0xDD in LATIN5, to i) that the proxy's parser never
// sees: such a text is refused where fencing is possible, and in
// transaction pool mode; names in quotes, and non-ASCII bytes in strings,
// are not folded and pass.

// latin5 makes the session's server report a single-byte encoding.
func latin5(w *wire) *wire {
	w.s.Server(Reply{Type: 'S', Param: "server_encoding", Value: "LATIN5"})
	w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "LATIN5"})
	return w
}

const cannotFoldRefusal = "may fold a non-ASCII letter"

func TestFoldableNameIsRefusedWhereFencingIsPossible(t *testing.T) {
	for _, sql := range []string{
		"SELECT set_conf\xDDg('lock.fencing_token', '41', false)",
		"UPDATE t SET v = 1; SELECT pg_adv\xDDsory_lock(1)",
		"UPDATE pg_sett\xDDngs SET setting = '41' WHERE name = 'lock.fencing_token'",
	} {
		w := latin5(newWire(t, nil, true))
		if got := w.send(q(sql)); !strings.Contains(got, cannotFoldRefusal) {
			t.Errorf("%q: %s; want it refused", sql, got)
		}
	}
}

func TestFoldableNameIsRefusedInTransactionPoolMode(t *testing.T) {
	w := latin5(pooledWire(t, nil))
	if got := w.send(q("SELECT pg_adv\xDDsory_lock(1)")); !strings.Contains(got, cannotFoldRefusal) {
		t.Fatalf("a session advisory lock behind a folded name passed: %s", got)
	}
}

func TestNonASCIIInStringsAndQuotedNamesIsNotFolded(t *testing.T) {
	for _, sql := range []string{
		"UPDATE t SET v = 'caf\xE9'",
		"SELECT \"Gr\xF6\xDFe\" FROM \"T\xDDtle\"",
		"SELECT 1 /* \xDD */",
	} {
		w := latin5(newWire(t, nil, true))
		if got := w.send(q(sql)); strings.Contains(got, cannotFoldRefusal) {
			t.Errorf("%q: %s; nothing here is folded", sql, got)
		}
	}
}

func TestMultibyteServerEncodingFoldsNoName(t *testing.T) {
	w := newWire(t, nil, true)
	w.s.Server(Reply{Type: 'S', Param: "server_encoding", Value: "UTF8"})
	if got := w.send(q("SELECT gr\u00f6\u00dfe FROM t\u0130tle")); strings.Contains(got, cannotFoldRefusal) {
		t.Fatalf("UTF8 server: %s", got)
	}
}
