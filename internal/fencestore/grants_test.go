package fencestore_test

import (
	"errors"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// TestGrants connects as an unprivileged application role straight to
// PostgreSQL: it may read the marks and advance them through fence.check,
// but not write fence.hwm or create anything in schema fence — even when the
// migrating role's default privileges would have granted it more.
func TestGrants(t *testing.T) {
	for _, defaults := range []bool{false, true} {
		name := "plain"
		if defaults {
			name = "with default privileges"
		}
		t.Run(name, func(t *testing.T) {
			db := newDB(t)
			super := db.super(t)
			ctx := t.Context()
			role := "app_" + db.name
			setup := []string{"CREATE ROLE " + role + " LOGIN"}
			if defaults {
				setup = append(setup,
					"ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO "+role,
					"ALTER DEFAULT PRIVILEGES GRANT ALL ON SCHEMAS TO "+role,
					"ALTER DEFAULT PRIVILEGES GRANT ALL ON SCHEMAS TO PUBLIC",
					"ALTER DEFAULT PRIVILEGES GRANT ALL ON ROUTINES TO "+role)
			}
			for _, s := range setup {
				if _, err := super.Exec(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fencestore.Migrate(ctx, session{super}); err != nil {
				t.Fatal(err)
			}
			if _, err := super.Exec(ctx, "GRANT fence_client TO "+role); err != nil {
				t.Fatal(err)
			}
			if st, err := fencestore.Status(ctx, session{super}); err != nil || !st.OK() {
				t.Fatalf("status %v, %v", st, err)
			}
			setMark(t, super, "r", 5)
			app := db.connect(t, role)

			for _, stmt := range []string{
				"INSERT INTO fence.hwm VALUES ('x', 1, now())",
				"UPDATE fence.hwm SET token = 1",
				"DELETE FROM fence.hwm",
				"TRUNCATE fence.hwm",
				"INSERT INTO fence.schema_version (version, name) VALUES (2, 'x')",
				"DELETE FROM fence.schema_version",
				"CREATE TABLE fence.mine (x int)",
				"CREATE FUNCTION fence.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
				"CREATE OR REPLACE PROCEDURE fence.check(p_token text, p_resource text, p_table_resource text, p_default_resource text, p_require_token boolean, p_advance boolean) LANGUAGE sql AS ''",
				"DROP PROCEDURE fence.check",
				"ALTER TABLE fence.hwm ADD COLUMN x int",
				"DROP SCHEMA fence CASCADE",
				"SELECT fence.set_mark('r', 1)",
				"ALTER TABLE fence.hwm DISABLE TRIGGER hwm_never_lower",
			} {
				_, err := app.Exec(ctx, stmt)
				if code, _ := pgErr(t, err); code != "42501" {
					t.Errorf("%s: err %v, want 42501 permission denied", stmt, err)
				}
			}
			if got := mark(t, app, "r"); got != 5 {
				t.Errorf("app reads mark %d, want 5", got)
			}
			if err := call(ctx, app, fencestore.CheckArgs{Token: "7", Resource: "r", Advance: true}); err != nil {
				t.Fatalf("app cannot advance: %v", err)
			}
			if got := mark(t, super, "r"); got != 7 {
				t.Errorf("mark after app's check = %d, want 7", got)
			}
			err := call(ctx, app, fencestore.CheckArgs{Token: "6", Resource: "r", Advance: true})
			if code, _ := pgErr(t, err); code != "55Z01" {
				t.Errorf("app's stale token: %v", err)
			}
			// Admin writes need the owner: the app role gets permission denied.
			if _, err := fencestore.Set(ctx, session{app}, "r", 1); err == nil {
				t.Errorf("app could Set")
			}
		})
	}
}

// TestNotInstalled checks the errors of a missing or inaccessible store, both
// what the server says to the injected call and what ClientError makes of it.
func TestNotInstalled(t *testing.T) {
	tests := []struct {
		name    string
		install bool
		setup   []string
		code    string
		noList  bool // List, too, finds the store missing
	}{
		{name: "no schema", code: "3F000", noList: true},
		{name: "no procedure", install: true, setup: []string{"DROP PROCEDURE fence.check"}, code: "42883"},
		{name: "no table", install: true, setup: []string{"DROP TABLE fence.hwm"}, code: "42P01", noList: true},
		{name: "no execute", install: true, setup: []string{"REVOKE EXECUTE ON PROCEDURE fence.check FROM fence_client"}, code: "42501"},
		{name: "no usage", install: true, setup: []string{"REVOKE USAGE ON SCHEMA fence FROM PUBLIC"}, code: "42501", noList: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var db testDB
			if tt.install {
				db = newStore(t)
			} else {
				db = newDB(t)
			}
			super := db.super(t)
			role := "app_" + db.name
			if _, err := super.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN"); err != nil {
				t.Fatal(err)
			}
			// fence_client exists once any database of the cluster was migrated.
			if _, err := super.Exec(t.Context(), "DO $$BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'fence_client') THEN GRANT fence_client TO "+role+"; END IF; END$$"); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.setup {
				if _, err := super.Exec(t.Context(), s); err != nil {
					t.Fatal(err)
				}
			}
			app := db.connect(t, role)
			for _, run := range []func() error{
				func() error {
					return call(t.Context(), app, fencestore.CheckArgs{Token: "1", Resource: "r", Advance: true})
				},
				func() error {
					return callLiteral(t.Context(), app, fencestore.CheckArgs{Token: "1", Resource: "r", Advance: true})
				},
			} {
				code, msg := pgErr(t, run())
				if code != tt.code {
					t.Fatalf("server said %s %q, want %s", code, msg, tt.code)
				}
				newCode, newMsg, rewrite := fencestore.ClientError(code, msg)
				want := "fence store not installed or not accessible (" + msg +
					`): run "fenceproxy migrate" on this database, and check that the role may execute fence.check`
				if !rewrite || newCode != fencestore.CodeNotInstalled || newMsg != want {
					t.Errorf("ClientError = %s %q %v\nwant %s %q", newCode, newMsg, rewrite, fencestore.CodeNotInstalled, want)
				}
			}
			st, err := fencestore.Status(t.Context(), session{app})
			if err == nil && st.OK() {
				t.Errorf("Status as the application role is OK: %v", st)
			}
			if err != nil && !errors.Is(err, fencestore.ErrNotInstalled) {
				t.Errorf("Status: %v, want ErrNotInstalled or problems", err)
			}
			t.Logf("status: %v, %v", st, err)
			_, err = fencestore.List(t.Context(), session{app})
			if got := errors.Is(err, fencestore.ErrNotInstalled); got != tt.noList {
				t.Errorf("List: %v, ErrNotInstalled %v, want %v", err, got, tt.noList)
			}
		})
	}
}

func TestClientErrorPassesFencingErrors(t *testing.T) {
	for _, code := range []string{"55Z01", "55Z02", "22023", "40001", "57014", "XX000"} {
		c, m, rewrite := fencestore.ClientError(code, "msg")
		if rewrite || c != code || m != "msg" {
			t.Errorf("ClientError(%s) = %s %q %v, want unchanged", code, c, m, rewrite)
		}
	}
}
