package gate

import (
	"strings"
	"testing"
)

// Under token_scope: transaction (Config.TransactionTokens) a check reads
// lock.fencing_token and lock.resource only where its own transaction set
// them; elsewhere it is guarded: it refuses when the server connection
// carries a value (a transaction pooler may have lent it from another
// client). These transcripts pin down where trust starts and ends.

// guarded starts a check that refuses settings its transaction did not set.
const guarded = "DO $fence$BEGIN IF "

// lastCheck returns the form of the last check in upstream: "guarded" when
// it sits inside a guard's DO block.
func lastCheck(upstream string) string {
	i := strings.LastIndex(upstream, "fence.check(")
	if i < 0 {
		return "none"
	}
	if g := strings.LastIndex(upstream[:i], guarded); g >= 0 && g > strings.LastIndex(upstream[:i], "END$fence$") {
		return "guarded"
	}
	return "plain"
}

func txnTokensWire(t *testing.T, token bool) *wire {
	return newWire(t, &Config{TransactionTokens: true}, token)
}

func TestTransactionTokensTrustOnlyWhatTheTransactionSet(t *testing.T) {
	tests := []struct {
		name, query, want string
	}{
		// Both set in the transaction: the check reads them as they are.
		{"SET LOCAL of both", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; UPDATE t SET v = 1", "plain"},
		{"set_config with is_local true", "BEGIN; SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', 'on'); UPDATE t SET v = 1", "plain"},
		// The resource would come from the connection: guarded.
		{"SET LOCAL of the token only", "BEGIN; SET LOCAL lock.fencing_token = 4; UPDATE t SET v = 1", "guarded"},
		{"a comment token without resource", "/* fencing_token=4 */ UPDATE t SET v = 1", "guarded"},
		// A comment naming both reads neither setting.
		{"a comment with token and resource", "/* fencing_token=4 resource=r */ UPDATE t SET v = 1", "plain"},
		// What ends the transaction, or may undo what it set, ends trust.
		{"after COMMIT", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; COMMIT; BEGIN; UPDATE t SET v = 1", "guarded"},
		{"after ROLLBACK TO SAVEPOINT", "BEGIN; SAVEPOINT a; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; ROLLBACK TO a; UPDATE t SET v = 1", "guarded"},
		{"after RESET", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; RESET lock.resource; UPDATE t SET v = 1", "guarded"},
		{"after code the proxy cannot see", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; DO $$BEGIN END$$; UPDATE t SET v = 1", "guarded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := txnTokensWire(t, false)
			got := w.send(q(tt.query))
			// The last check before the client's UPDATE decides.
			last := lastCheck(got[:strings.LastIndex(got, "UPDATE t")])
			if f := last; f != tt.want {
				t.Fatalf("check before the UPDATE is %s, want %s\nupstream %s", f, tt.want, got)
			}
		})
	}
}

// A session-level SET or set_config of lock.* is refused with 55Z05 before
// it runs; one for the transaction, and a RESET, run as sent.
func TestTransactionTokensRefuseSessionLevelSettings(t *testing.T) {
	refused := []string{
		"SET lock.fencing_token = 4",
		"SET SESSION lock.resource = 'r'",
		"SELECT pg_catalog.set_config('lock.fencing_token', '4', false)",
		"SELECT set_config('lock.resource', 'r', $1)",
		"SELECT set_config(name, 'r', true) FROM settings",
		"SET lock.fencing_token FROM CURRENT",
	}
	for _, sql := range refused {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); !strings.Contains(got, "ERRCODE = '55Z05'") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	allowed := []string{
		"SET LOCAL lock.fencing_token = 4",
		"RESET lock.fencing_token",
		"RESET ALL",
		"SET lock.resource TO DEFAULT",
		"SELECT pg_catalog.set_config('lock.fencing_token', '4', true)",
	}
	for _, sql := range allowed {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); strings.Contains(got, "55Z05") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	// In the default scope the same statements run.
	w := newWire(t, nil, false)
	if got := w.send(q("SET lock.fencing_token = 4")); got != "Q(SET lock.fencing_token = 4)" {
		t.Errorf("session scope: %s", got)
	}
}

// A unit sent before the server answered one that set the settings for its
// transaction waits for that answer: whether the transaction is still open
// (and the settings still its own) is the server's to say. Once it said so,
// the check reads them.
func TestTransactionTokensWaitForTheBlockToBeConfirmed(t *testing.T) {
	w := txnTokensWire(t, false)
	w.send(q("BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'"))
	if got := w.send(q("UPDATE t SET v = 1")); got != "WAIT" {
		t.Fatalf("pipelined unit: %s, want WAIT", got)
	}
	w.replies("CCCZ", 'T')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "plain" {
		t.Fatalf("inside the confirmed block: %s", got)
	}
	w.replies("CCZ", 'T')
	w.send(q("COMMIT"))
	w.replies("CZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "guarded" && lastCheck(got) != "none" {
		t.Fatalf("after the block ended: %s", got)
	}
	// A block the server reports aborted keeps nothing.
	w = txnTokensWire(t, false)
	w.send(q("BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; SELECT 1/0"))
	w.replies("CCCEZ", 'E')
	w.send(q("ROLLBACK"))
	w.replies("CZ", 'I')
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) == "plain" {
		t.Fatalf("after an aborted block: %s", got)
	}
}

func TestCheckStartupRefusesSessionTokensUnderTransactionScope(t *testing.T) {
	cfg := &Config{TransactionTokens: true}
	for _, p := range []map[string]string{
		{"options": "-c lock.fencing_token=4"},
		{"options": "--lock.resource=r"},
		{"lock.fencing_token": "4"},
		{"LOCK.RESOURCE": "r"},
	} {
		if err := CheckStartup(cfg, p); err == nil {
			t.Errorf("%v: accepted", p)
		}
	}
	if err := CheckStartup(cfg, map[string]string{"options": "-c search_path=app", "application_name": "lock.x"}); err != nil {
		t.Errorf("unrelated parameters refused: %v", err)
	}
	if err := CheckStartup(&Config{}, map[string]string{"options": "-c lock.fencing_token=4"}); err != nil {
		t.Errorf("session scope refused a startup token: %v", err)
	}
}
