package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5"
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

// TestTokenSources sends a stale token through every source and checks each
// is refused, after a higher mark was set.
func TestTokenSources(t *testing.T) {
	e := newFencedEnv(t, nil)
	setup := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	mustExec(t, setup, "/* fencing_token=100 resource=acct/1 */ SELECT 1")
	if m := e.mark(t, "acct/1"); m != 100 {
		t.Fatalf("a read with a comment token did not advance the mark: %d", m)
	}
	update := "UPDATE accounts SET balance = balance + $1 WHERE id = 1"
	cases := []struct {
		name    string
		options string
		pre     []string
		stmt    string
	}{
		{name: "comment", stmt: "/* fencing_token=99 resource=acct/1 */ " + update},
		{name: "comment comma separated", stmt: update + " /* fencing_token=99,resource=acct/1 */"},
		{name: "sqlcommenter", stmt: update + " /*fencing_token='99',resource='acct%2F1'*/"},
		{name: "SET", pre: []string{"SET lock.fencing_token = 99", "SET lock.resource = 'acct/1'"}, stmt: update},
		{name: "set_config", pre: []string{"SELECT set_config('lock.fencing_token', '99', false), set_config('lock.resource', 'acct/1', false)"}, stmt: update},
		{name: "startup options", options: "-c lock.fencing_token=99 -c lock.resource=acct/1", stmt: update},
		{name: "default resource from comment token only", pre: []string{"SET lock.resource = 'acct/1'"}, stmt: "/* fencing_token=99 */ " + update},
	}
	for _, tc := range cases {
		for mname, mode := range modes {
			t.Run(tc.name+"/"+mname, func(t *testing.T) {
				cfg, _ := pgx.ParseConfig(e.viaProxy())
				cfg.DefaultQueryExecMode = mode
				if tc.options != "" {
					cfg.RuntimeParams["options"] = tc.options
				}
				c, err := pgx.ConnectConfig(t.Context(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(context.Background())
				for _, p := range tc.pre {
					mustExec(t, c, p)
				}
				before := e.balance(t)
				_, err = c.Exec(t.Context(), tc.stmt, 1)
				wantCode(t, err, "55Z01")
				if after := e.balance(t); after != before {
					t.Errorf("the refused statement ran: balance %d → %d", before, after)
				}
			})
		}
	}
}

// TestSettingSemantics: SET lock.fencing_token fences the session's writes;
// RESET, a rolled-back SET and DISCARD ALL leave no token; SET LOCAL lasts
// one transaction.
func TestSettingSemantics(t *testing.T) {
	e := newFencedEnv(t, nil)
	c := connect(t, e.viaProxy(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "SET lock.resource = 'acct/1'")
	mustExec(t, c, "SET lock.fencing_token = 10")
	mustExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	// RESET: no token any more, so the statement is unfenced and the mark stays.
	mustExec(t, c, "RESET lock.fencing_token")
	mustExec(t, c, "UPDATE accounts SET balance = 2 WHERE id = 1")
	if m := e.mark(t, "acct/1"); m != 10 {
		t.Fatalf("mark %d after RESET, want 10", m)
	}
	// A SET undone by ROLLBACK leaves no token behind.
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "SET lock.fencing_token = 20")
	mustExec(t, c, "ROLLBACK")
	mustExec(t, c, "UPDATE accounts SET balance = 3 WHERE id = 1")
	if m := e.mark(t, "acct/1"); m != 10 {
		t.Fatalf("mark %d after a rolled-back SET, want 10", m)
	}
	// SET LOCAL lasts one transaction.
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "SET LOCAL lock.fencing_token = 30")
	mustExec(t, c, "UPDATE accounts SET balance = 4 WHERE id = 1")
	mustExec(t, c, "COMMIT")
	if m := e.mark(t, "acct/1"); m != 30 {
		t.Fatalf("mark %d after SET LOCAL 30, want 30", m)
	}
	mustExec(t, c, "SET lock.fencing_token = 5") // stale now
	_, err := c.Exec(t.Context(), "UPDATE accounts SET balance = 5 WHERE id = 1")
	wantCode(t, err, "55Z01")
	// DISCARD ALL drops the token.
	mustExec(t, c, "DISCARD ALL")
	mustExec(t, c, "UPDATE accounts SET balance = 6 WHERE id = 1")
	if got := e.balance(t); got != 6 {
		t.Fatalf("balance %d after DISCARD ALL, want 6", got)
	}
}

// TestMalformedTokens: a malformed token, in a comment or in the setting, is
// refused (22023) in every protocol mode, as is a token without a resource;
// nothing runs.
func TestMalformedTokens(t *testing.T) {
	e := newFencedEnv(t, nil)
	for _, tok := range []string{"abc", "0", "-1", "9223372036854775808", "1.5"} {
		for name, mode := range modes {
			t.Run(tok+"/"+name, func(t *testing.T) {
				c := connect(t, e.viaProxy(), mode)
				_, err := c.Exec(t.Context(), "/* fencing_token="+tok+" resource=acct/1 */ UPDATE accounts SET balance = $1 WHERE id = 1", -1)
				wantCode(t, err, "22023")
				mustExec(t, c, "SET lock.resource = 'acct/1'")
				mustExec(t, c, "SET lock.fencing_token = '"+tok+"'")
				_, err = c.Exec(t.Context(), "UPDATE accounts SET balance = $1 WHERE id = 1", -1)
				wantCode(t, err, "22023")
				if b := e.balance(t); b == -1 {
					t.Fatal("a statement with a malformed token ran")
				}
			})
		}
	}
	c := connect(t, e.viaProxy(), pgx.QueryExecModeExec)
	_, err := c.Exec(t.Context(), "/* fencing_token=5 */ UPDATE accounts SET balance = -1 WHERE id = 1")
	pgErr := wantCode(t, err, "22023")
	if !strings.Contains(pgErr.Message, "has no resource") {
		t.Errorf("token without resource: %q", pgErr.Message)
	}
}
