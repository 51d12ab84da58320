package integration

import (
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// h5connect opens a low-level session through the proxy with extra
// startup parameters.
func h5connect(t *testing.T, e *env, params map[string]string) *pgconn.PgConn {
	t.Helper()
	cfg, err := pgconn.ParseConfig(e.viaProxy())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	c, err := pgconn.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connect with %v: %v", params, err)
	}
	t.Cleanup(func() { c.Close(t.Context()) })
	return c
}

// h5code returns the SQLSTATE of err, "" for none, "?" for another error.
func h5code(err error) string {
	if err == nil {
		return ""
	}
	if pe, ok := err.(*pgconn.PgError); ok {
		return pe.Code
	}
	return "? " + err.Error()
}

// TestHunt5HandOverForms: texts that look like, or contain, the hand-over
// (SELECT pg_catalog.set_config('lock.fencing_token', …)) and go on to
// write, or set the stale token in a form the proxy might take for a
// hand-over. The mark of acct/1 is 100; token 150 is fresh, 50 stale.
// Nothing written under 50 may land.
func TestHunt5HandOverForms(t *testing.T) {
	e := staleEnv(t)
	const upd = "UPDATE accounts SET balance = balance + 1 WHERE id = 1"
	for _, tc := range []struct {
		name  string
		setup []string // run first, must succeed
		stmts []string // the last one must fail; earlier ones may
	}{
		{"handover then write in one query", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', false); " + upd}},
		{"handover local then write in one query", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', true); " + upd}},
		{"fresh then stale in one select", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '150', false), pg_catalog.set_config('lock.fencing_token', '50', false)", upd}},
		{"comments and newlines", nil, []string{
			"SELECT/**/pg_catalog\n.\n/* x */set_config\t(\n'lock.fencing_token'--c\n,'50'/*,*/,false)--x\n;" + upd}},
		{"upper case name", nil, []string{
			"SELECT pg_catalog.set_config('LOCK.Fencing_Token', '50', false)", upd}},
		{"E string", nil, []string{
			"SELECT pg_catalog.set_config(E'lock.fencing\\x5ftoken', '50', false)", upd}},
		{"U& string", nil, []string{
			"SELECT pg_catalog.set_config(U&'lock.fencing\\005ftoken', '50', false)", upd}},
		{"dollar quotes", nil, []string{
			"SELECT pg_catalog.set_config($$lock.fencing_token$$, $q$50$q$, false)", upd}},
		{"quoted function name", nil, []string{
			`SELECT "pg_catalog"."set_config"('lock.fencing_token', '50', 'f')`, upd}},
		{"string bool", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', 'off')", upd}},
		{"handover and scs off", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '150', false), pg_catalog.set_config('standard_conforming_strings', 'off', false)",
			"SELECT 'a\\' , 'b; SELECT pg_catalog.set_config(''lock.fencing_token'', ''50'', false); " + upd + "; --'"}},
		{"handover and encoding", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '150', false), pg_catalog.set_config('client_encoding', 'SJIS', false)",
			"SELECT '\x95\\'; SELECT pg_catalog.set_config('lock.fencing_token', '50', false); " + upd + "; --'"}},
		{"handover search_path", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', false), pg_catalog.set_config('search_path', 'pg_temp, public', false)", upd}},
		{"handover role", nil, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', false), pg_catalog.set_config('role', 'none', false)", upd}},
		{"handover inside checked transaction", []string{"BEGIN", "SELECT pg_catalog.set_config('lock.fencing_token', '150', false)", "SELECT balance FROM accounts"}, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', false)", upd}},
		{"handover local inside checked transaction", []string{"BEGIN", "SET LOCAL lock.fencing_token = 150", "SELECT balance FROM accounts"}, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', true)", upd}},
		{"handover in savepoint", []string{"SET lock.fencing_token = 150", "BEGIN", "SELECT balance FROM accounts", "SAVEPOINT s"}, []string{
			"SELECT pg_catalog.set_config('lock.fencing_token', '50', false)", "RELEASE SAVEPOINT s", upd}},
		{"handover of resource to a stale one", []string{"SET lock.resource = 'acct/2'", "SET lock.fencing_token = 50", "SELECT balance FROM accounts"}, []string{
			"SELECT pg_catalog.set_config('lock.resource', 'acct/1', false)", upd}},
		{"handover of resource in checked transaction", []string{"SET lock.resource = 'acct/2'", "SET lock.fencing_token = 50", "BEGIN", "SELECT balance FROM accounts"}, []string{
			"SELECT pg_catalog.set_config('lock.resource', 'acct/1', false)", upd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawConnect(t, e.viaProxy())
			if err := rawExec(t, c, "SET lock.resource = 'acct/1'"); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.setup {
				if err := rawExec(t, c, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			var codes []string
			for _, s := range tc.stmts {
				codes = append(codes, h5code(rawExec(t, c, s)))
			}
			if last := codes[len(codes)-1]; last == "" {
				t.Errorf("codes %v: the last statement passed", codes)
			}
			_ = rawExec(t, c, "ROLLBACK")
			e.wantUntouched(t)
			t.Logf("codes %v", codes)
		})
	}
}

// TestHunt5HandOverExtended: the hand-over through the extended protocol,
// with literals (a hand-over) and with parameters (checked under the token
// in force before it).
func TestHunt5HandOverExtended(t *testing.T) {
	e := staleEnv(t)
	ctx := t.Context()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		conn := connect(t, e.viaProxy(), mode)
		mustExec(t, conn, "SET lock.resource = 'acct/1'")
		// Literal hand-over to a stale token: it runs, then the write is refused.
		if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config('lock.fencing_token', '50', false)"); err != nil {
			t.Fatalf("%v: literal hand-over: %v", mode, err)
		}
		_, err := conn.Exec(ctx, "UPDATE accounts SET balance = 1 WHERE id = 1")
		wantCode(t, err, "55Z01")
		// With parameters it is checked under 50 first: refused, token stays 50.
		_, err = conn.Exec(ctx, "SELECT pg_catalog.set_config('lock.fencing_token', $1, false)", "150")
		wantCode(t, err, "55Z01")
		_, err = conn.Exec(ctx, "SELECT pg_catalog.set_config($1, '150', false)", "lock.fencing_token")
		wantCode(t, err, "55Z01")
		_, err = conn.Exec(ctx, "SELECT pg_catalog.set_config('lock.fencing_token', '150', $1)", false)
		wantCode(t, err, "55Z01")
		e.wantUntouched(t)
	}
}

// TestHunt5StartupForms: a stale token given at startup in forms the
// server accepts; the first write without any SET must be checked, and
// so must a write after RESET, RESET ALL or DISCARD ALL, which bring the
// startup value back.
func TestHunt5StartupForms(t *testing.T) {
	e := staleEnv(t)
	const upd = "UPDATE accounts SET balance = balance + 1 WHERE id = 1"
	for _, params := range []map[string]string{
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1"},
		{"options": "-clock.fencing_token=50 -clock.resource=acct/1"},
		{"options": "--lock.fencing_token=50 --lock.resource=acct/1"},
		{"options": "-c lock.fencing_token=150 -c lock.fencing_token=50 -c lock.resource=acct/1"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct\\/1"},
		{"options": "-c LOCK.FENCING_TOKEN=50 -c Lock.Resource=acct/1"},
		{"options": "-c lock.fencing_token=5\\0 -c lock.resource=acct/1"},
		{"options": "\t-c\tlock.fencing_token=50\t-c\tlock.resource=acct/1\t"},
		{"lock.fencing_token": "50", "lock.resource": "acct/1"},
		{"LOCK.FENCING_TOKEN": "50", "LOCK.RESOURCE": "acct/1"},
		{"lock.fencing_token": "50", "options": "-c lock.resource=acct/1"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1 -c search_path=pg_temp,public"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1 -c standard_conforming_strings=off"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1", "client_encoding": "SJIS"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1 -c default_transaction_read_only=on"},
		{"options": "-c lock.fencing_token=50 -c lock.resource=acct/1 -c statement_timeout=1"},
	} {
		t.Run(strings.ReplaceAll(strings.ReplaceAll(mapString(params), "/", "_"), " ", "_"), func(t *testing.T) {
			c := h5connect(t, e, params)
			rw := "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; SET statement_timeout = 0"
			for _, s := range []string{
				upd,
				"SET lock.fencing_token = 150; RESET lock.fencing_token; " + upd,
				"SET lock.fencing_token = 150", "RESET lock.fencing_token", upd,
				"SET lock.fencing_token = 150", "RESET ALL", rw, upd,
				"SET lock.fencing_token = 150", "DISCARD ALL", rw, upd,
				"SET lock.fencing_token = 150", "SET lock.fencing_token TO DEFAULT", upd,
				"BEGIN", "SET LOCAL lock.fencing_token = 150", "SELECT 1", "COMMIT", upd,
				"SELECT pg_catalog.set_config('lock.fencing_token', '150', false)", "SET lock.fencing_token = DEFAULT", upd,
			} {
				err := rawExec(t, c, s)
				if strings.HasPrefix(s, "UPDATE") || strings.HasSuffix(s, upd) {
					if err == nil {
						t.Errorf("%q passed", s)
					} else if code := h5code(err); code != "55Z01" {
						t.Logf("%q: %v", s, err)
					}
				}
			}
			e.wantUntouched(t)
		})
	}
}

func mapString(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v + ";")
	}
	return b.String()
}

// TestHunt5ResourceInterplay: resource changes between statements of one
// transaction, SET LOCAL in a savepoint, empty resource with
// default_resource, a table's configured resource.
func TestHunt5ResourceInterplay(t *testing.T) {
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
				codes = append(codes, h5code(rawExec(t, c, s)))
			}
			if codes[len(codes)-1] == "" {
				t.Errorf("codes %v: the last statement passed", codes)
			}
			_ = rawExec(t, c, "ROLLBACK")
			e.wantUntouched(t)
			if n := h4count(t, e, "SELECT count(*) FROM invoices"); n != 0 {
				t.Errorf("%d invoices written", n)
			}
			t.Logf("codes %v", codes)
		})
	}
}

// TestHunt5FunctionCallInCheckedTransaction: a transaction checked with
// token 150; a fast-path FunctionCall of set_config sets 50 (FunctionCall
// passes there); the next write must be checked again with 50.
func TestHunt5FunctionCallInCheckedTransaction(t *testing.T) {
	e := staleEnv(t)
	var oid uint32
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT 'pg_catalog.set_config(text, text, boolean)'::regprocedure::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lock.fencing_token", "lock.resource"} {
		px := h4raw(t, e, false)
		px.run(t, 1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
		val := "50"
		if name == "lock.resource" {
			// acct/2 passes with 150 and 50; switch the resource under 50 and back
			px.run(t, 1, &pgproto3.Query{String: "SET lock.fencing_token = 50; SET lock.resource = 'acct/2'"})
			val = "acct/1"
		}
		got := px.run(t, 1, &pgproto3.Query{String: "BEGIN; SELECT balance FROM accounts"})
		got += px.run(t, 1, &pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte(name), []byte(val), []byte("false")}})
		got += "|" + px.run(t, 1, &pgproto3.Query{String: "UPDATE accounts SET balance = 7 WHERE id = 1"})
		px.run(t, 1, &pgproto3.Query{String: "COMMIT"})
		t.Logf("%s: %s", name, got)
		if !strings.Contains(got[strings.Index(got, "|"):], "E{") {
			t.Errorf("%s: write after FunctionCall passed: %s", name, got)
		}
		e.wantUntouched(t)
	}
}

// TestHunt5ProbeWithNotices: a stale startup token with
// client_min_messages = debug5, so the hidden startup probe is answered
// with notices around its rows; the write must still be checked.
func TestHunt5ProbeWithNotices(t *testing.T) {
	e := staleEnv(t)
	for _, opts := range []string{
		"-c lock.fencing_token=50 -c lock.resource=acct/1 -c client_min_messages=debug5",
		"-c lock.fencing_token=50 -c lock.resource=acct/1 -c client_min_messages=debug5 -c log_statement=all -c log_min_messages=debug5",
	} {
		c := h5connect(t, e, map[string]string{"options": opts})
		err := rawExec(t, c, "UPDATE accounts SET balance = 9 WHERE id = 1")
		if h5code(err) != "55Z01" {
			t.Errorf("%s: %v, want 55Z01", opts, err)
		}
		e.wantUntouched(t)
	}
}
