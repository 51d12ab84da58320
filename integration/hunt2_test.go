package integration

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestHunt2PgSettingsTurnsOffStandardStrings: UPDATE pg_settings sets a
// setting through the view's rule (set_config); the gate's classifier
// knows that (SetsLexing), but its byte filter (mayMatter) had no word for
// pg_settings, so in a session without a token the UPDATE went upstream
// unanalysed and nothing waited for the server's answer. A Query sent right
// behind it was then read with standard_conforming_strings on while the
// server read it with it off: the proxy saw one string where the server
// ran SET lock.fencing_token = 41, no probe followed, and the next write
// ran with no check under the stale token.
func TestHunt2PgSettingsTurnsOffStandardStrings(t *testing.T) {
	e := staleEnv(t)
	conn, fe := copyConn(t, e)
	if got := copyTranscript(t, conn, fe, 3, nil,
		&pgproto3.Query{String: "SET lock.resource = 'acct/1'"},
		&pgproto3.Query{String: "DO $$ BEGIN END $$"}, // the probe after it finds no token
		&pgproto3.Query{String: "SELECT"},             // the probe has been answered
	); got != "CZCZTDCZ" {
		t.Fatalf("setup: %s", got)
	}
	got := copyTranscript(t, conn, fe, 3, nil,
		&pgproto3.Query{String: "UPDATE pg_settings SET setting = 'off' WHERE name LIKE 'standard_conf%'"},
		&pgproto3.Query{String: `SELECT 'a\' , ' ; SET lock.fencing_token = 41; -- '`},
		&pgproto3.Query{String: "UPDATE accounts SET balance = 1 WHERE id = 1"},
	)
	if !strings.HasSuffix(got, "E{55Z01}Z") {
		t.Errorf("replies %s: want the write refused with 55Z01", got)
	}
	e.wantUntouched(t)
}

// TestHunt2TokenSpellings: a stale token spelled with a sign, leading
// zeros, URL encoding or in another form is refused as stale or as
// malformed, in a comment and in the setting; nothing lands.
func TestHunt2TokenSpellings(t *testing.T) {
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
