package integration

import (
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5"
)

// Encodings: a name or text the proxy cannot read as the server does in
// the session's client_encoding is refused (0A000), never checked under
// another name.

// TestNonASCIIConfiguredResourceRefusedUnderLatin1: a configured resource
// with non-ASCII characters is refused (0A000) under a client_encoding other
// than UTF8, never checked under a name the server reads differently.
//
// The config maps invoices to resource "billing-é". The proxy sent the name
// in the check as UTF-8 bytes, but the server reads the session's text in
// client_encoding: under LATIN1 the check was of "billing-Ã©", whose mark is
// not the real one, and the stale token 41 passed. Now refused (0A000).
func TestNonASCIIConfiguredResourceRefusedUnderLatin1(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "invoices"}: {Resource: "billing-é", RequireToken: true},
	}})
	harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('billing-é', 100, now())")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET client_encoding = 'LATIN1'", "SET lock.fencing_token = 41")
	err := rawExec(t, c, "INSERT INTO invoices (amount) VALUES (1)")
	wantCode(t, err, "0A000")
	var n int
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM invoices").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows landed in invoices under the stale token", n)
	}
	// In UTF8 the name reads as the config spells it: checked, and stale.
	u := rawConnect(t, e.viaProxy())
	rawSetup(t, u, "SET lock.fencing_token = 41")
	wantCode(t, rawExec(t, u, "INSERT INTO invoices (amount) VALUES (1)"), "55Z01")
	rawSetup(t, u, "SET lock.fencing_token = 100", "INSERT INTO invoices (amount) VALUES (1)")
}

// TestNonASCIIDefaultResourceRefusedUnderLatin1: the same for
// default_resource: refused (0A000) under LATIN1.
//
// The same with default_resource.
func TestNonASCIIDefaultResourceRefusedUnderLatin1(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{DefaultResource: "konto-é"})
	harnessExec(t, e.direct(), "INSERT INTO fence.hwm VALUES ('konto-é', 100, now())")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET client_encoding = 'LATIN1'", "SET lock.fencing_token = 41")
	err := rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, err, "0A000")
	e.wantUntouched(t)
}

// TestProtectedTableNamedInLatin1Refused: a protected table named with
// LATIN1 bytes is refused (0A000), never taken for a table the config does
// not list.
//
// The config protects table "é©©" (UTF-8 c3a9 c2a9 c2a9). A LATIN1 client
// names it with the bytes e9 a9 a9, which the proxy read as UTF-8 U+9A69, a
// name the config does not list: the write went upstream with no token, and
// the server, converting from LATIN1, wrote the protected table. Now refused
// (0A000).
func TestProtectedTableNamedInLatin1Refused(t *testing.T) {
	e := newFencedEnv(t, &gate.Config{Tables: map[gate.TableRef]gate.Protection{
		{Schema: "public", Name: "é©©"}: {Resource: "billing", RequireToken: true},
	}})
	harnessExec(t, e.direct(), `CREATE TABLE "é©©" (x int)`)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET client_encoding = 'LATIN1'")
	err := rawExec(t, c, "INSERT INTO \"\xe9\xa9\xa9\" VALUES (1)")
	wantCode(t, err, "0A000")
	var n int
	conn := connect(t, e.direct(), pgx.QueryExecModeExec)
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM "é©©"`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows landed in the protected table without a token", n)
	}
}

// TestGBKBackslashTrailByteRefused: under client_encoding GBK a text holding
// a 0x5C byte that may end a two-byte character is refused (0A000).
//
// Under client_encoding GBK the byte 0x5C ('\') may end a two-byte
// character; the proxy refuses text with such bytes.
func TestGBKBackslashTrailByteRefused(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET lock.resource = 'acct/1'", "SET lock.fencing_token = 41", "SET client_encoding = 'GBK'")
	err := rawExec(t, c, "SELECT E'\x81\\'; UPDATE accounts SET balance = 1 WHERE id = 1; SELECT '")
	wantCode(t, err, "0A000")
	e.wantUntouched(t)
}

// TestSJISBackslashByte: in SJIS, 表 is 0x95 0x5C, and 0x5C is '\'.
func TestSJISBackslashByte(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy())
	for _, s := range []string{"SET lock.resource = 'acct/1'", "SET lock.fencing_token = 41", "SET client_encoding = 'SJIS'"} {
		if err := rawExec(t, c, s); err != nil {
			t.Fatal(err)
		}
	}
	pgErr := wantCode(t, rawExec(t, c, "SELECT '\x95\x5c' FROM accounts; UPDATE accounts SET balance = 1"), "0A000")
	if !strings.Contains(pgErr.Message, "SJIS") {
		t.Errorf("message %q does not name the encoding", pgErr.Message)
	}
	e.wantUntouched(t)
}
