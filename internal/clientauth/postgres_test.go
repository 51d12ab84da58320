package clientauth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
	"github.com/fenceproxy/fenceproxy/internal/clientauth"
	"github.com/fenceproxy/fenceproxy/internal/pgcluster"
	"github.com/jackc/pgx/v5"
)

// rolpassword creates role with password under password_encryption enc in
// the harness's PostgreSQL and returns the secret the server stored.
func rolpassword(t *testing.T, role, password, enc string) string {
	t.Helper()
	pg := harness.Postgres(t)
	c, err := pgx.Connect(t.Context(), pg.DSN(pgcluster.Superuser, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(t.Context(), "SET password_encryption = '"+enc+"'")
	if err == nil {
		_, err = c.Exec(t.Context(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	}
	if err == nil {
		_, err = c.Exec(t.Context(), "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD "+quoteLiteral(password))
	}
	if err != nil {
		t.Fatal(err)
	}
	var secret string
	if err := c.QueryRow(t.Context(), "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&secret); err != nil {
		t.Fatal(err)
	}
	return secret
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func TestSecretsStoredByPostgreSQLAuthenticatePgx(t *testing.T) {
	cases := []struct {
		enc     string
		kind    clientauth.Kind
		methods []clientauth.Method
	}{
		{"scram-sha-256", clientauth.SCRAMVerifier, []clientauth.Method{clientauth.SCRAMSHA256, clientauth.MD5, clientauth.Password}},
		{"md5", clientauth.MD5Hash, []clientauth.Method{clientauth.MD5, clientauth.Password}},
	}
	const role, pw = "u", "p"
	for _, c := range cases {
		secret := rolpassword(t, role, pw, c.enc)
		f := parse(t, quote(role)+" "+quote(secret))
		if k, _ := f.Kind(role); k != c.kind {
			t.Fatalf("%s: PostgreSQL's secret %q read as %v", c.enc, secret, k)
		}
		for _, m := range c.methods {
			t.Run(c.enc+"/"+m.String(), func(t *testing.T) {
				o, err := login(t, serve(t, m, f), role, pw)
				if err != nil || o.err != nil {
					t.Fatalf("client: %v; server: %v", err, o.err)
				}
				o, err = login(t, serve(t, m, f), role, pw+"x")
				authFailed(t, role, o, err)
			})
		}
	}
}

func TestPlainSecretIsThePasswordPostgreSQLWantsForTheServerLogin(t *testing.T) {
	pg := harness.Postgres(t)
	// The harness's roles must give their password over TCP (pg_hba.conf).
	roles := map[string]string{harness.ScramUser: harness.ScramPassword, harness.MD5User: harness.MD5Password}
	for role, pw := range roles {
		f := parse(t, quote(role)+" "+quote(pw))
		got, ok := f.Password(role)
		if !ok {
			t.Fatalf("%s: no password for a plain secret", role)
		}
		if err := connect(t, pg.DSN(role, "postgres"), got); err != nil {
			t.Errorf("%s: PostgreSQL refused the file's password: %v", role, err)
		}
		if err := connect(t, pg.DSN(role, "postgres"), got+"x"); err == nil {
			t.Errorf("%s: PostgreSQL accepted a wrong password: the test proves nothing", role)
		}
	}
}

// connect logs into dsn with password and disconnects.
func connect(t *testing.T, dsn, password string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = password
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		return err
	}
	return c.Close(context.Background())
}
