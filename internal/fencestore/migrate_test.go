package fencestore_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

func TestMigrateTwice(t *testing.T) {
	db := newDB(t)
	q := session{db.super(t)}
	ctx := t.Context()

	st, err := fencestore.Status(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if st.OK() || st.Version != 0 || st.String() != "fence schema version 0: not installed: run fenceproxy migrate" {
		t.Errorf("before: %+v %q", st, st)
	}

	res, err := fencestore.Migrate(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fencestore.MigrateResult{From: 0, To: fencestore.LatestVersion}); res != want || !res.Changed() {
		t.Errorf("first = %+v, want %+v", res, want)
	}
	if got, want := res.String(), "installed fence schema version "+strconv.Itoa(fencestore.LatestVersion); got != want {
		t.Errorf("first says %q, want %q", got, want)
	}

	res, err = fencestore.Migrate(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed() || res.String() != "fence schema already at version "+strconv.Itoa(fencestore.LatestVersion) {
		t.Errorf("second = %+v %q, want a no-op", res, res)
	}

	st, err = fencestore.Status(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OK() || st.Version != fencestore.LatestVersion || st.Latest != fencestore.LatestVersion || st.String() != "fence schema version "+strconv.Itoa(fencestore.LatestVersion)+": ok" {
		t.Errorf("after: %+v %q", st, st)
	}
	var n int
	if err := db.super(t).QueryRow(ctx, "SELECT count(*) FROM fence.schema_version").Scan(&n); err != nil || n != fencestore.LatestVersion {
		t.Errorf("schema_version rows = %d, %v; want %d", n, err, fencestore.LatestVersion)
	}
}

func TestMigrateConcurrent(t *testing.T) {
	db := newDB(t)
	const n = 4
	qs := make([]session, n)
	for i := range qs {
		qs[i] = session{db.super(t)}
	}
	results := make([]fencestore.MigrateResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range qs {
		wg.Go(func() { results[i], errs[i] = fencestore.Migrate(t.Context(), qs[i]) })
	}
	wg.Wait()
	installed := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("migrate %d: %v", i, errs[i])
		}
		if results[i].To != fencestore.LatestVersion {
			t.Errorf("migrate %d: %+v", i, results[i])
		}
		if results[i].Changed() {
			installed++
		}
	}
	if installed != 1 {
		t.Errorf("%d runs installed the schema, want 1: %+v", installed, results)
	}
}

// latest is fencestore.LatestVersion as status and migrate print it.
var latest = strconv.Itoa(fencestore.LatestVersion)

func TestMigrateRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup string
		want  string
	}{
		{name: "foreign schema", setup: "CREATE SCHEMA fence",
			want: "schema fence exists but has no fence.schema_version"},
		{name: "newer version", setup: "INSERT INTO fence.schema_version (version, name) VALUES (99, 'future')",
			want: "fence schema is at version 99, newer than this fenceproxy (" + latest + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var db testDB
			if strings.HasPrefix(tt.setup, "INSERT") {
				db = newStore(t)
			} else {
				db = newDB(t)
			}
			c := db.super(t)
			if _, err := c.Exec(t.Context(), tt.setup); err != nil {
				t.Fatal(err)
			}
			_, err := fencestore.Migrate(t.Context(), session{c})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			st, err := fencestore.Status(t.Context(), session{c})
			if err != nil {
				t.Fatal(err)
			}
			if st.OK() {
				t.Errorf("status OK for a refused store: %+v", st)
			}
			// The failed migration left the session usable, outside a transaction.
			if s := c.PgConn().TxStatus(); s != 'I' {
				t.Errorf("session after failed migrate: transaction status %c, want I", s)
			}
		})
	}
}

func TestStatusProblems(t *testing.T) {
	unguarded := "fence.hwm lacks its triggers as version " + latest + " installs them (hwm_never_delete, hwm_never_lower and hwm_never_truncate, enabled ALWAYS, calling fence.refuse_lowering): marks could be lowered"
	tests := []struct {
		name  string
		setup []string
		want  string
	}{
		{name: "procedure missing", setup: []string{"DROP PROCEDURE fence.check"},
			want: "fence schema version " + latest + ": procedure fence.check(text, text, text, text, boolean, boolean) is missing"},
		{name: "table missing", setup: []string{"DROP TABLE fence.hwm"},
			want: "fence schema version " + latest + ": table fence.hwm is missing; " + unguarded},
		{name: "trigger disabled", setup: []string{"ALTER TABLE fence.hwm DISABLE TRIGGER hwm_never_lower"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "trigger not always", setup: []string{"ALTER TABLE fence.hwm ENABLE TRIGGER hwm_never_truncate"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "trigger dropped", setup: []string{"DROP TRIGGER hwm_never_lower ON fence.hwm"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "delete trigger dropped", setup: []string{"DROP TRIGGER hwm_never_delete ON fence.hwm"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "trigger narrowed", setup: []string{"DROP TRIGGER hwm_never_lower ON fence.hwm",
			"CREATE TRIGGER hwm_never_lower BEFORE UPDATE ON fence.hwm FOR EACH ROW WHEN (NEW.token < 0) EXECUTE FUNCTION fence.refuse_lowering()",
			"ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_lower"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "trigger on other events", setup: []string{"DROP TRIGGER hwm_never_delete ON fence.hwm",
			"CREATE TRIGGER hwm_never_delete BEFORE INSERT ON fence.hwm FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering()",
			"ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_delete"}, want: "fence schema version " + latest + ": " + unguarded},
		{name: "trigger function changed", setup: []string{"CREATE OR REPLACE FUNCTION fence.refuse_lowering() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$"},
			want: "fence schema version " + latest + ": " + unguarded},
		{name: "not security definer", setup: []string{"ALTER PROCEDURE fence.check SECURITY INVOKER"},
			want: "fence schema version " + latest + ": procedure fence.check is not SECURITY DEFINER with search_path = pg_catalog, pg_temp"},
		{name: "search_path reset", setup: []string{"ALTER PROCEDURE fence.check RESET search_path"},
			want: "fence schema version " + latest + ": procedure fence.check is not SECURITY DEFINER with search_path = pg_catalog, pg_temp"},
		{name: "body changed", setup: []string{"CREATE OR REPLACE PROCEDURE fence.check(p_token text, p_resource text, p_table_resource text, p_default_resource text, p_require_token boolean, p_advance boolean) LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$BEGIN END$$"},
			want: "fence schema version " + latest + ": procedure fence.check differs from version " + latest + "'s: run fenceproxy migrate on a fresh schema or restore it"},
		{name: "writable", setup: []string{"CREATE ROLE status_w", "GRANT INSERT, UPDATE ON fence.hwm TO status_w, PUBLIC"},
			want: "fence schema version " + latest + ": roles other than the owner may write fence.hwm: PUBLIC, status_w"},
		{name: "schema creatable", setup: []string{"GRANT CREATE ON SCHEMA fence TO PUBLIC"},
			want: "fence schema version " + latest + ": roles other than the owner may create objects in schema fence: PUBLIC"},
		{name: "check to PUBLIC", setup: []string{"GRANT EXECUTE ON PROCEDURE fence.check TO PUBLIC"},
			want: "fence schema version " + latest + ": PUBLIC may execute fence.check: any role can raise a mark; REVOKE EXECUTE ON PROCEDURE fence.check(text, text, text, text, boolean, boolean) FROM PUBLIC and GRANT fence_client to the application roles"},
		{name: "passed not definer", setup: []string{"ALTER FUNCTION fence.passed(text) SECURITY INVOKER"},
			want: "fence schema version " + latest + ": fence.passed or fence.guard differs from version " + latest + "'s (fence.passed must be SECURITY DEFINER; fence.guard this version's PL/pgSQL body or the C guard): the database guard cannot be trusted"},
		{name: "guard routine dropped", setup: []string{"DROP FUNCTION fence.drop_guard()"},
			want: "fence schema version " + latest + ": guard routines missing: fence.drop_guard()"},
		{name: "start routine dropped", setup: []string{"DROP FUNCTION fence.ddl_start()"},
			want: "fence schema version " + latest + ": guard routines missing: fence.ddl_start()"},
		{name: "old version", setup: []string{"DELETE FROM fence.schema_version"},
			want: "fence schema version 0: schema fence exists but has no fence.schema_version: not made by fenceproxy migrate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newStore(t)
			c := db.super(t)
			for _, s := range tt.setup {
				if _, err := c.Exec(t.Context(), s); err != nil {
					t.Fatal(err)
				}
			}
			st, err := fencestore.Status(t.Context(), session{c})
			if err != nil {
				t.Fatal(err)
			}
			if st.OK() || st.String() != tt.want {
				t.Errorf("status %q\nwant %q", st, tt.want)
			}
		})
	}
	t.Run("not accessible", func(t *testing.T) {
		db := newStore(t)
		if _, err := db.super(t).Exec(t.Context(), "REVOKE ALL ON fence.schema_version FROM PUBLIC; CREATE ROLE status_r LOGIN"); err != nil {
			t.Fatal(err)
		}
		_, err := fencestore.Status(t.Context(), session{db.connect(t, "status_r")})
		if !errors.Is(err, fencestore.ErrNotInstalled) {
			t.Errorf("err = %v, want ErrNotInstalled", err)
		}
	})
}

// TestMigrateAsOwner migrates as a dedicated role that is not a superuser,
// as docs/fence-store.md recommends: it needs CREATE on the database;
// fence_client exists already (roles belong to the cluster).
func TestMigrateAsOwner(t *testing.T) {
	db := newDB(t)
	super := db.super(t)
	ctx := t.Context()
	owner := "owner_" + db.name
	setup := []string{"CREATE ROLE " + owner + " LOGIN", "GRANT CREATE ON DATABASE " + db.name + " TO " + owner,
		"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fence_client') THEN CREATE ROLE fence_client NOLOGIN; END IF; END$$"}
	for _, s := range setup {
		if _, err := super.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	q := session{db.connect(t, owner)}
	if _, err := fencestore.Migrate(ctx, q); err != nil {
		t.Fatal(err)
	}
	if st, err := fencestore.Status(ctx, q); err != nil || !st.OK() {
		t.Fatalf("status as the owner: %v, %v", st, err)
	}
}
