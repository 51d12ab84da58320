package integration

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Startup and cancel: a token given at login (startup parameters, role
// defaults) is checked like one set later; a cancel leaves the proxy in
// step with the server.
//
// The tests use staleEnv: the mark of acct/1 is 100; a write under the
// stale token 41 (or 50) must be refused, and the balance must stay 0.

func mapString(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v + ";")
	}
	return b.String()
}

// TestStaleStartupTokenRefusedInEveryForm: a stale token given at startup in
// any form the server accepts is checked, also after RESET, RESET ALL or
// DISCARD ALL bring it back.
//
// A stale token given at startup in forms the server accepts; the first
// write without any SET must be checked, and so must a write after RESET,
// RESET ALL or DISCARD ALL, which bring the startup value back.
func TestStaleStartupTokenRefusedInEveryForm(t *testing.T) {
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
			c := rawConnectParams(t, e.viaProxy(), params)
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
					} else if code := errCode(err); code != "55Z01" {
						t.Logf("%q: %v", s, err)
					}
				}
			}
			e.wantUntouched(t)
		})
	}
}

// TestStaleStartupTokenRefusedAfterResetAll: RESET ALL brings back the stale
// startup token after the session set a current one: the write after it is
// refused.
//
// RESET ALL brings back the stale token of the startup parameters after the
// session set a current one.
func TestStaleStartupTokenRefusedAfterResetAll(t *testing.T) {
	e := staleEnv(t)
	c := rawConnect(t, e.viaProxy()+"&options=-c%20lock.fencing_token%3D41%20-c%20lock.resource%3Dacct%2F1")
	rawSetup(t, c, "SET lock.fencing_token = 100", "SELECT 1", "DO $$ BEGIN END $$")
	wantCode(t, rawExec(t, c, "RESET ALL; UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestStaleRoleDefaultTokenRefused: a stale token from ALTER ROLE … IN
// DATABASE … SET applies at login, through SET ROLE and SET SESSION
// AUTHORIZATION: writes under it are refused.
//
// ALTER ROLE … IN DATABASE … SET applies at login without a word on the
// wire; SET ROLE and SET SESSION AUTHORIZATION do not clear it.
func TestStaleRoleDefaultTokenRefused(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(),
		"ALTER ROLE CURRENT_USER IN DATABASE "+e.db+" SET lock.fencing_token = 41",
		"ALTER ROLE CURRENT_USER IN DATABASE "+e.db+" SET lock.resource = 'acct/1'")
	c := rawConnect(t, e.viaProxy())
	rawSetup(t, c, "SET SESSION AUTHORIZATION DEFAULT", "SET ROLE NONE")
	wantCode(t, rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}

// TestCancelWhileMessageHeldDecidesHeldOneWithServerSettings: a
// CancelRequest ends the running Query while the next one is held; the held
// one is decided with the settings the server has after the cancel.
//
// A CancelRequest (on a connection of its own) cancels the running Query
// while the next one is held; the held one then runs, decided with the
// settings the server really has (the cancelled Query's SETs are rolled
// back).
func TestCancelWhileMessageHeldDecidesHeldOneWithServerSettings(t *testing.T) {
	e := staleEnv(t)
	conn := readyConn(t, e, "held-cancel-held")
	key := conn.key
	conn.send(&pgproto3.Query{String: "SET standard_conforming_strings = off; SELECT pg_sleep(5); " + staleSets})
	conn.send(&pgproto3.Query{String: escapeTrick})
	conn.send(&pgproto3.Query{String: "SHOW standard_conforming_strings"})
	conn.flush()
	time.Sleep(300 * time.Millisecond)
	cc, err := net.Dial("tcp", e.proxy.Addr)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := (&pgproto3.CancelRequest{ProcessID: key.ProcessID, SecretKey: key.SecretKey}).Encode(nil)
	cc.Write(buf)
	cc.Close()
	start := time.Now()
	codes, rows, to := conn.readyCount(3, 10*time.Second)
	t.Logf("codes %v rows %d in %v", codes, rows, time.Since(start))
	if to || time.Since(start) > 3*time.Second {
		t.Fatalf("cancel did not end the sleep: codes %v, timed out %v", codes, to)
	}
	if len(codes) == 0 || codes[0] != "57014" {
		t.Errorf("codes %v, want 57014 first", codes)
	}
	e.wantUntouched(t)
}

// TestStartupParameterToken: pgx sends unknown DSN keys (RuntimeParams) as
// startup parameters of their own; PostgreSQL applies them.
func TestStartupParameterToken(t *testing.T) {
	e := staleEnv(t)
	cfg, err := pgx.ParseConfig(e.viaProxy())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["lock.fencing_token"] = "41"
	cfg.RuntimeParams["lock.resource"] = "acct/1"
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(t.Context(), "UPDATE accounts SET balance = 1 WHERE id = 1")
	wantCode(t, err, "55Z01")
	e.wantUntouched(t)
}

// TestDatabaseDefaultToken: ALTER DATABASE … SET lock.fencing_token applies
// to every new session without a word on the wire.
func TestDatabaseDefaultToken(t *testing.T) {
	e := staleEnv(t)
	harnessExec(t, e.direct(), "ALTER DATABASE "+e.db+" SET lock.fencing_token = 41", "ALTER DATABASE "+e.db+" SET lock.resource = 'acct/1'")
	c := rawConnect(t, e.viaProxy())
	wantCode(t, rawExec(t, c, "UPDATE accounts SET balance = 1 WHERE id = 1"), "55Z01")
	e.wantUntouched(t)
}
