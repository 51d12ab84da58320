package gate

import (
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
)

// PrecheckResult is the outcome of a pre-check (see Precheck).
type PrecheckResult uint8

const (
	// PrecheckNone: no pre-check has just completed.
	PrecheckNone PrecheckResult = iota
	// PrecheckProceed: no token is set; send the client's Query.
	PrecheckProceed
	// PrecheckRefused: the client got the refusal and ReadyForQuery; drop
	// its Query.
	PrecheckRefused
)

// Precheck reports whether the client's Query must wait for a check of its
// own first, and returns that check's text. It applies to a Query that is
// one statement which cannot run inside a transaction block (VACUUM, CREATE
// INDEX CONCURRENTLY, …), in a session whose lock.fencing_token setting may
// hold a token: such a statement cannot share a transaction with the check,
// so the check runs as a Query of its own and raises 0A000 only when the
// setting holds a token. The caller sends the returned text as a Query,
// waits until TakePrecheck reports the outcome, then sends the client's
// Query (through Query, as usual) or drops it. Precheck records nothing when
// it returns false.
func (s *Session) Precheck(sql string) (string, bool) {
	if !s.tokenMaybe || s.unit.open || !mayBeNoTxnBlock(sql) {
		return "", false
	}
	a, err := s.cfg.Analyzer.Analyze(sql)
	if err != nil || len(a.Statements) != 1 {
		return "", false
	}
	st := &a.Statements[0]
	if st.Kind != NoTxnBlock || st.Directives.Token != 0 {
		return "", false // a comment token is refused by Query itself
	}
	if _, _, protected := s.cfg.protection(st.Writes); protected {
		return "", false // refused by Query itself
	}
	s.beginUnit()
	s.slots.push(slot{kind: slotQuery, injected: []injKind{injRaise}, precheck: true})
	s.endUnitWith()
	msg := strings.Replace(msgCannotFenceFn, "%s", firstWords(st.Text), 1)
	return string(hwm.AppendRaiseIfToken(nil, codeCannotFence, msg)), true
}

// TakePrecheck returns the outcome of the pre-check whose ReadyForQuery was
// the last one passed to ReadyForQuery, once; PrecheckNone otherwise.
func (s *Session) TakePrecheck() PrecheckResult {
	r := s.precheck
	s.precheck = PrecheckNone
	return r
}

// noTxnWords are fragments without which a statement cannot be one that
// refuses a transaction block (VACUUM; CREATE/DROP DATABASE or TABLESPACE;
// … CONCURRENTLY; ALTER SYSTEM; subscriptions; REINDEX SCHEMA/SYSTEM/
// DATABASE; CLUSTER; COMMIT/ROLLBACK PREPARED). A false match only costs a
// parse; the parser decides.
var noTxnWords = [...]string{"vacuum", "database", "tablespace", "concurrently", "system", "subscription", "reindex", "cluster", "prepared"}

func mayBeNoTxnBlock(sql string) bool {
	for _, w := range noTxnWords {
		if containsFold(sql, w) {
			return true
		}
	}
	return false
}
