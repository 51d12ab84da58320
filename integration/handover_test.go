package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Hand-over forms: SELECT pg_catalog.set_config('lock.fencing_token', …)
// with constants passes unchecked (a new holder takes over); anything that
// only looks like it, or sets the token another way, is checked.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

// TestStaleTokenRefusedInEveryHandOverForm: whatever form a hand-over
// (SELECT pg_catalog.set_config of the token) takes, nothing written under
// the stale token it sets lands.
//
// Texts that look like, or contain, the hand-over (SELECT
// pg_catalog.set_config('lock.fencing_token', …)) and go on to write, or set
// the stale token in a form the proxy might take for a hand-over. The mark
// of acct/1 is 100; token 150 is fresh, 50 stale. Nothing written under 50
// may land.
func TestStaleTokenRefusedInEveryHandOverForm(t *testing.T) {
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
				codes = append(codes, errCode(rawExec(t, c, s)))
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

// TestHandOverThroughExtendedProtocol: a hand-over with literals runs and
// the stale write after it is refused; one with parameters is checked under
// the token in force before it.
//
// The hand-over through the extended protocol, with literals (a hand-over)
// and with parameters (checked under the token in force before it).
func TestHandOverThroughExtendedProtocol(t *testing.T) {
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

// TestHandOverByOverloadedSetConfigIsChecked: only pg_catalog.set_config is
// a hand-over: an overload in public that writes is checked, and its stale
// write refused.
//
// The hand-over exemption (no check for a plain SELECT set_config(const,
// const, const)) trusts the function's name. A set_config(varchar, varchar,
// boolean) in schema public is an exact match for varchar-cast constants and
// wins over pg_catalog.set_config(text, text, boolean); it writes. In a
// session that carries the stale token 41 the statement is forwarded without
// a check and the UPDATE inside lands.
func TestHandOverByOverloadedSetConfigIsChecked(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), `CREATE FUNCTION public.set_config(varchar, varchar, boolean) RETURNS text LANGUAGE sql AS $$
		UPDATE accounts SET balance = 1 WHERE id = 1;
		SELECT pg_catalog.set_config($1::text, $2::text, $3) $$`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
	)
	err := rawExec(t, c, "SELECT set_config('lock.fencing_token'::varchar, '41'::varchar, false)")
	if err == nil {
		t.Errorf("SELECT set_config(varchar…) (a user function that writes) with the stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// TestHandOverWithDomainTypedConstantIsChecked: a hand-over whose constant
// is cast to a domain (whose CHECK may write) is checked, and its stale
// write refused.
//
// The same exemption with the real, schema-qualified pg_catalog.set_config:
// a constant cast to a domain runs the domain's CHECK, which may call any
// function; this one writes.
func TestHandOverWithDomainTypedConstantIsChecked(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION public.bump(text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN UPDATE accounts SET balance = 1 WHERE id = 1; RETURN true; END $$`,
		`CREATE DOMAIN public.tok AS text CHECK (public.bump(VALUE))`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c,
		"SET lock.resource = 'acct/1'",
		"SET lock.fencing_token = 41",
	)
	err := rawExec(t, c, "SELECT pg_catalog.set_config('lock.fencing_token', '41'::public.tok, false)")
	if err == nil {
		t.Errorf("hand-over with a domain-typed constant (its CHECK writes) under the stale token 41 was not refused")
	}
	e.wantUntouched(t)
}

// TestTransactionOnlySetWithAParameterOfAUsersTypeKeepsTheSessionChecked:
// a Parse that declares a parameter of a user's domain runs the domain's
// CHECK at every Bind, even where the text never uses the parameter; this
// one leaves the stale token 41 for the session. The statement's text sets
// the token for its transaction only, but what the Bind ran is not in the
// text: the next write is still checked, and refused.
func TestTransactionOnlySetWithAParameterOfAUsersTypeKeepsTheSessionChecked(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		`CREATE FUNCTION public.leak(text) RETURNS boolean LANGUAGE sql AS $$
		   SELECT pg_catalog.set_config('lock.fencing_token', '41', false) IS NOT NULL
		      AND pg_catalog.set_config('lock.resource', 'acct/1', false) IS NOT NULL $$`,
		`CREATE DOMAIN public.dtext AS text CHECK (public.leak(VALUE))`)
	c := rawConnect(t, e.viaProxy())
	res := c.ExecParams(t.Context(), "SELECT 'public.dtext'::regtype::oid", nil, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	oid, err := strconv.ParseUint(string(res.Rows[0][0]), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	r := c.ExecParams(t.Context(), "SELECT pg_catalog.set_config('lock.fencing_token', '100', true)",
		[][]byte{[]byte("x")}, []uint32{uint32(oid)}, nil, nil).Read()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1"); err == nil {
		t.Errorf("write under the stale token 41 the domain's CHECK left for the session was not refused")
	}
	e.wantUntouched(t)
}

// TestSetConfigNameTruncatedByCastIsSeen: a set_config of a name that a cast
// truncates to lock.fencing_token is seen as setting the token: the stale
// write after it is refused.
//
// The gate reads set_config's setting name through casts (constString) but
// not what the cast does: 'lock.fencing_tokenXX'::varchar(18) is
// 'lock.fencing_token' on the server. In a plain session (startup probe: no
// token) the proxy sees no fencing setting change, never probes, and the
// next UPDATE goes upstream with no check while the server holds the stale
// token 41.
func TestSetConfigNameTruncatedByCastIsSeen(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	if err := rawExec(t, c, "SELECT set_config('lock.resourceXX'::varchar(13), 'acct/1', false), set_config('lock.fencing_tokenXX'::varchar(18), '41', false)"); err != nil {
		t.Fatal(err)
	}
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	if err == nil {
		t.Errorf("UPDATE with the stale token 41 (set through a truncating cast) was not refused")
	}
	e.wantUntouched(t)
}

// TestFunctionCallSettingTokenInCheckedTransactionChecksAgain: a fast-path
// FunctionCall of set_config changing the token or resource in a checked
// transaction makes the next write checked again.
//
// A transaction checked with token 150; a fast-path FunctionCall of
// set_config sets 50 (FunctionCall passes there); the next write must be
// checked again with 50.
func TestFunctionCallSettingTokenInCheckedTransactionChecksAgain(t *testing.T) {
	e := staleEnv(t)
	var oid uint32
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT 'pg_catalog.set_config(text, text, boolean)'::regprocedure::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lock.fencing_token", "lock.resource"} {
		px := readyConn(t, e, "")
		px.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 150; SET lock.resource = 'acct/1'"})
		val := "50"
		if name == "lock.resource" {
			// acct/2 passes with 150 and 50; switch the resource under 50 and back
			px.transcript(1, &pgproto3.Query{String: "SET lock.fencing_token = 50; SET lock.resource = 'acct/2'"})
			val = "acct/1"
		}
		got := px.transcript(1, &pgproto3.Query{String: "BEGIN; SELECT balance FROM accounts"})
		got += px.transcript(1, &pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte(name), []byte(val), []byte("false")}})
		got += "|" + px.transcript(1, &pgproto3.Query{String: "UPDATE accounts SET balance = 7 WHERE id = 1"})
		px.transcript(1, &pgproto3.Query{String: "COMMIT"})
		t.Logf("%s: %s", name, got)
		if !strings.Contains(got[strings.Index(got, "|"):], "E{") {
			t.Errorf("%s: write after FunctionCall passed: %s", name, got)
		}
		e.wantUntouched(t)
	}
}

// TestFunctionCallSettingStaleTokenAfterTokenlessCheckChecksAgain: a
// fast-path FunctionCall of set_config setting a stale token in a
// transaction checked with none makes the next write checked.
//
// A FunctionCall is allowed in a transaction that has passed its check, and
// the probe after it notices the token; but the transaction stays "checked"
// for the gate, so the UPDATE that follows in the same transaction runs with
// the new (stale) token 41 and no check. The check had passed with no token
// at all (only lock.resource set).
func TestFunctionCallSettingStaleTokenAfterTokenlessCheckChecksAgain(t *testing.T) {
	e := staleEnv(t)
	var oid uint32
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT 'pg_catalog.set_config(text, text, boolean)'::regprocedure::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	conn := readyConn(t, e, "fastpath")
	conn.send(&pgproto3.Query{String: "SET lock.resource = 'acct/1'"})
	conn.send(&pgproto3.Query{String: "BEGIN; SELECT 1"})
	conn.flush()
	if codes, _, to := conn.readyCount(2, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("setup: codes %v, timed out %v", codes, to)
	}
	conn.send(&pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte("lock.fencing_token"), []byte("41"), []byte("false")}})
	conn.flush()
	if codes, _, to := conn.readyCount(1, 10*time.Second); to || len(codes) > 0 {
		t.Fatalf("FunctionCall: codes %v, timed out %v", codes, to)
	}
	time.Sleep(500 * time.Millisecond) // the hidden probe after the call is answered
	conn.send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"})
	conn.send(&pgproto3.Query{String: "COMMIT"})
	conn.await(2)
	e.wantUntouched(t)
}

// TestFunctionCallSetConfig: the fast-path FunctionCall of set_config sets
// the token without any text; the next write must be checked with it.
func TestFunctionCallSetConfig(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{DefaultResource: "acct/1"})
	harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('acct/1', 100, now())")
	c := rawConnect(t, e.viaProxy())
	// A plain session (no token yet): the call passes.
	var oid uint32
	admin := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := admin.QueryRow(t.Context(), "SELECT 'pg_catalog.set_config(text, text, boolean)'::regprocedure::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	conn := c.Conn()
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.FunctionCall{Function: oid, ArgFormatCodes: []uint16{0}, Arguments: [][]byte{[]byte("lock.fencing_token"), []byte("41"), []byte("false")}, ResultFormatCode: 0})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("FunctionCall: %s %s", e.Code, e.Message)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	fe.Send(&pgproto3.Query{String: "UPDATE accounts SET balance = 1"})
	fe.Flush()
	var code string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if er, ok := msg.(*pgproto3.ErrorResponse); ok {
			code = er.Code
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if code != "55Z01" {
		t.Fatalf("write after FunctionCall set_config: code %q, want 55Z01", code)
	}
	e.wantUntouched(t)
}
