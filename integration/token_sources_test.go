package integration

import (
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
)

// Token sources: a token comes from a comment directive, the session's
// settings or a default resource; each spelling and each resource choice
// is checked.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestStaleTokenRefusedInEverySpelling: a stale token is refused, as stale
// or as malformed, in every spelling, in a comment and in the setting.
//
// A stale token spelled with a sign, leading zeros, URL encoding or in
// another form is refused as stale or as malformed, in a comment and in the
// setting; nothing lands.
func TestStaleTokenRefusedInEverySpelling(t *testing.T) {
	e := staleEnv(t)
	upd := "UPDATE accounts SET balance = 1 WHERE id = 1"
	for _, tc := range []struct{ pre, stmt, code string }{
		{"", "/* fencing_token=+99 resource=acct/1 */ " + upd, "55Z01"},
		{"", "/* fencing_token=0099 resource=acct/1 */ " + upd, "55Z01"},
		{"", "/*fencing_token='%2B99',resource='acct%2F1'*/ " + upd, "55Z01"},
		{"", "/* fencing_token=9.9e1 resource=acct/1 */ " + upd, "22023"},
		{"", "/* fencing_token=0x63 resource=acct/1 */ " + upd, "22023"},
		{"", "/* fencing_token=\uff19\uff19 resource=acct/1 */ " + upd, "22023"},
		{"", "/* fencing_token=18446744073709551715 resource=acct/1 */ " + upd, "22023"},
		{"", "/* fencing_token=-99 resource=acct/1 */ " + upd, "22023"},
		{"", "/* fencing_token=99 resource=acct/1 */ /* fencing_token=100 */ " + upd, "22023"},
		{"SET lock.fencing_token = '+99'", upd, "22023"},
		{"SET lock.fencing_token = ' 99'", upd, "22023"},
		{"SET lock.fencing_token = '0099'", upd, "55Z01"},
		{"SET lock.fencing_token = '99e0'", upd, "22023"},
		{"SET lock.fencing_token = '18446744073709551715'", upd, "22023"},
	} {
		c := rawConnect(t, e.viaProxy())
		rawSetup(t, c, "SET lock.resource = 'acct/1'")
		if tc.pre != "" {
			rawSetup(t, c, tc.pre)
		}
		wantCode(t, rawExec(t, c, tc.stmt), tc.code)
	}
	e.wantUntouched(t)
}

// TestDirectiveKeyMatchedWithUnicodeFolding: a directive key spelled with a
// character that folds to ASCII (a Kelvin sign) is the key: its stale token
// is refused.
//
// The gate compares directive keys with Unicode folding
// ("fencing_to\u212Aen", with a Kelvin sign, is the token key) but its
// filter before the scanner looked for the keys in ASCII: the stale token 41
// in such a comment was dropped, and in a session with no token the write
// ran with no check.
func TestDirectiveKeyMatchedWithUnicodeFolding(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET lock.resource = 'acct/1'")
	wantCode(t, rawExec(t, c, "/* fencing_to\u212Aen=41 */ UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestStaleTokenRefusedWhateverResourceIsInForce: a stale token is refused
// whichever way the resource is chosen: changed or reset in a transaction,
// SET LOCAL in savepoints, default_resource, a table's resource, a comment,
// a hand-over.
//
// Resource changes between statements of one transaction, SET LOCAL in a
// savepoint, empty resource with default_resource, a table's configured
// resource.
func TestStaleTokenRefusedWhateverResourceIsInForce(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{
		DefaultResource: "acct/1",
		Tables:          map[gate.TableRef]gate.Protection{{Name: "invoices"}: {Resource: "acct/1"}},
	})
	harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('acct/1', 100, now())")
	const upd = "UPDATE accounts SET balance = balance + 1 WHERE id = 1"
	for _, tc := range []struct {
		name  string
		stmts []string // the last must fail
	}{
		{"empty resource falls back to default", []string{"SET lock.fencing_token = 50", "SET lock.resource = ''", upd}},
		{"resource changed in a transaction", []string{"SET lock.fencing_token = 50", "SET lock.resource = 'acct/2'", "BEGIN", "SELECT 1", "SET lock.resource = 'acct/1'", upd}},
		{"resource changed in a transaction, one query", []string{"SET lock.fencing_token = 50", "SET lock.resource = 'acct/2'", "BEGIN; SELECT 1; SET lock.resource = 'acct/1'; " + upd}},
		{"resource reset in a transaction", []string{"SET lock.fencing_token = 50", "BEGIN", "SET LOCAL lock.resource = 'acct/2'", "SELECT 1", "RESET lock.resource", upd}},
		{"set local in savepoint, rollback to", []string{"SET lock.fencing_token = 50", "SET lock.resource = 'acct/1'", "BEGIN", "SAVEPOINT s", "SET LOCAL lock.resource = 'acct/2'", "SELECT 1", "ROLLBACK TO s", upd}},
		{"set in savepoint, rollback to, one query", []string{"SET lock.fencing_token = 50", "BEGIN; SAVEPOINT s; SET LOCAL lock.resource = 'acct/2'; SELECT 1; ROLLBACK TO s; " + upd}},
		{"set local in savepoint released then rollback to outer", []string{"SET lock.fencing_token = 50", "BEGIN", "SAVEPOINT a", "SAVEPOINT s", "SET LOCAL lock.resource = 'acct/2'", "SELECT 1", "RELEASE s", "ROLLBACK TO a", upd}},
		{"table resource wins over lock.resource for a configured table", []string{"SET lock.fencing_token = 50", "SET lock.resource = 'acct/2'", "INSERT INTO invoices(amount) VALUES (1)"}},
		{"comment resource and table resource", []string{"SET lock.fencing_token = 50", "/* resource=acct/2 */ INSERT INTO invoices(amount) VALUES (1)"}},
		{"resource handover then write", []string{"SET lock.fencing_token = 50", "SET lock.resource = 'acct/2'", "SELECT 1", "SELECT pg_catalog.set_config('lock.resource', '', false); " + upd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConnect(t, e.viaProxy())
			var codes []string
			for _, s := range tc.stmts {
				codes = append(codes, errCode(rawExec(t, c, s)))
			}
			if codes[len(codes)-1] == "" {
				t.Errorf("codes %v: the last statement passed", codes)
			}
			_ = rawExec(t, c, "ROLLBACK")
			e.wantUntouched(t)
			if n := e.count(t, "SELECT count(*) FROM invoices"); n != 0 {
				t.Errorf("%d invoices written", n)
			}
			t.Logf("codes %v", codes)
		})
	}
}
