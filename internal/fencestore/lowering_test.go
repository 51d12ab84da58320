package fencestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMarksNeverGoDown checks that the store itself refuses every write that
// would lower a mark, even by its owner or a superuser and even built by
// dynamic SQL that no text filter can read, except through fence.set_mark
// (fencestore.Set), the operator's deliberate repair.
func TestMarksNeverGoDown(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 100)
	setMark(t, c, "other", 5)

	for _, stmt := range []string{
		"UPDATE fence.hwm SET token = 50 WHERE resource = 'r'",
		"UPDATE fence.hwm SET resource = 'moved' WHERE resource = 'r'",
		"DELETE FROM fence.hwm WHERE resource = 'r'",
		"TRUNCATE fence.hwm",
		"WITH d AS (DELETE FROM fence.hwm RETURNING *) SELECT count(*) FROM d",
		"INSERT INTO fence.hwm VALUES ('r', 1, now()) ON CONFLICT (resource) DO UPDATE SET token = excluded.token",
		// Dynamic SQL that builds the table's name: class 9 of the fail-closed issue.
		"DO $$BEGIN EXECUTE 'update fe' || 'nce.hwm set token = 1'; END$$",
		// Triggers enabled ALWAYS fire under replication too.
		"SET session_replication_role = replica; UPDATE fence.hwm SET token = 1",
		// set_mark's setting ends with the call: a later write in the same transaction is refused.
		"BEGIN; SELECT fence.set_mark('other', 6); UPDATE fence.hwm SET token = 1 WHERE resource = 'r'",
	} {
		_, err := c.Exec(ctx, stmt)
		if code, _ := pgErr(t, err); code != fencestore.CodeMarkLowered {
			t.Errorf("%s: err %v, want %s", stmt, err, fencestore.CodeMarkLowered)
		}
		if _, err := c.Exec(ctx, "ROLLBACK; RESET ALL"); err != nil {
			t.Fatal(err)
		}
		if got := mark(t, c, "r"); got != 100 {
			t.Fatalf("after %s: mark %d, want 100", stmt, got)
		}
	}

	// Rising marks and harmless updates pass.
	for _, stmt := range []string{
		"UPDATE fence.hwm SET token = 101 WHERE resource = 'r'",
		"UPDATE fence.hwm SET updated_at = now() WHERE resource = 'r'",
		"INSERT INTO fence.hwm VALUES ('new', 3, now())",
	} {
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	if err := call(ctx, c, fencestore.CheckArgs{Token: "102", Resource: "r", Advance: true}); err != nil {
		t.Errorf("fence.check advancing: %v", err)
	}

	// The deliberate repair lowers it.
	if prev, err := fencestore.Set(ctx, session{c}, "r", 7); err != nil || prev != 102 {
		t.Fatalf("Set = %d, %v; want previous 102", prev, err)
	}
	if got := mark(t, c, "r"); got != 7 {
		t.Errorf("after Set: mark %d, want 7", got)
	}
}

// TestUpgradeFromVersion1 takes a store back to version 1 and lets Migrate
// upgrade it: the triggers arrive and marks stay.
func TestUpgradeFromVersion1(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 100)
	if _, err := c.Exec(ctx, `SELECT 1`+dropVersion3+`; DROP FUNCTION fence.refuse_lowering() CASCADE; DROP FUNCTION fence.set_mark(text, bigint);
		DELETE FROM fence.schema_version WHERE version = 2`); err != nil {
		t.Fatal(err)
	}
	st, err := fencestore.Status(ctx, session{c})
	if err != nil || st.OK() || st.Version != 1 {
		t.Fatalf("version 1 store: %v, %v", st, err)
	}
	res, err := fencestore.Migrate(ctx, session{c})
	if err != nil || res.String() != "upgraded fence schema from version 1 to "+latest {
		t.Fatalf("Migrate = %v, %v", res, err)
	}
	if st, err := fencestore.Status(ctx, session{c}); err != nil || !st.OK() {
		t.Fatalf("after upgrade: %v, %v", st, err)
	}
	if got := mark(t, c, "r"); got != 100 {
		t.Errorf("mark after upgrade %d, want 100", got)
	}
	_, err = c.Exec(ctx, "DELETE FROM fence.hwm")
	if code, _ := pgErr(t, err); code != fencestore.CodeMarkLowered {
		t.Errorf("DELETE after upgrade: %v", err)
	}
}

// TestOwnerRoleMigratesAndRepairs: the documented set-up, a dedicated role
// that is not a superuser, installs the store (PostgreSQL 15 refuses such a
// role a function's SET clause for an unknown parameter) and can repair a
// mark through fencestore.Set, while its own direct lowering is refused.
func TestOwnerRoleMigratesAndRepairs(t *testing.T) {
	db := newDB(t)
	role := "fence_owner_" + db.name
	if _, err := db.super(t).Exec(t.Context(), "CREATE ROLE "+role+" LOGIN; GRANT CREATE ON DATABASE "+db.name+" TO "+role+
		"; DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fence_client') THEN CREATE ROLE fence_client NOLOGIN; END IF; END$$"); err != nil {
		t.Fatal(err)
	}
	owner := db.connect(t, role)
	if _, err := fencestore.Migrate(t.Context(), session{owner}); err != nil {
		t.Fatalf("migrate as %s: %v", role, err)
	}
	setMark(t, owner, "r", 100)
	_, err := owner.Exec(t.Context(), "UPDATE fence.hwm SET token = 1")
	if code, _ := pgErr(t, err); code != fencestore.CodeMarkLowered {
		t.Errorf("owner's direct lowering: %v, want %s", err, fencestore.CodeMarkLowered)
	}
	if prev, err := fencestore.Set(t.Context(), session{owner}, "r", 7); err != nil || prev != 100 {
		t.Fatalf("Set as owner = %d, %v", prev, err)
	}
}

// TestUpgradeFromVersion3: a store made by version 3's first routines (here
// a fence.guard that passes every write, as a stand-in for the old body)
// is reported, and migrate replaces them with version 4's (and brings the
// store on to the latest version).
func TestUpgradeFromVersion3(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	if _, err := c.Exec(ctx, `DELETE FROM fence.schema_version WHERE version = 4`+dropVersion5+`;
		CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$BEGIN RETURN NULL; END$$`); err != nil {
		t.Fatal(err)
	}
	st, err := fencestore.Status(ctx, session{c})
	if err != nil || st.OK() || st.Version != 3 || !strings.Contains(st.String(), "version 3 is older than "+latest) {
		t.Fatalf("version 3 store: %v, %v", st, err)
	}
	res, err := fencestore.Migrate(ctx, session{c})
	if err != nil || res.String() != "upgraded fence schema from version 3 to "+latest {
		t.Fatalf("Migrate = %v, %v", res, err)
	}
	if st, err := fencestore.Status(ctx, session{c}); err != nil || !st.OK() {
		t.Fatalf("after upgrade: %v, %v", st, err)
	}
	var config []string
	if err := c.QueryRow(ctx, "SELECT coalesce(proconfig, '{}') FROM pg_proc WHERE oid = 'fence.guard()'::regprocedure").Scan(&config); err != nil || len(config) != 0 {
		t.Errorf("fence.guard's settings after upgrade: %v, %v; want none", config, err)
	}
}

// TestUpgradeFromVersion4: a store at version 4 (here with a
// fence.ddl_relations that maps nothing, as a stand-in for version 4's,
// which knew no types, functions or sequences) is reported, and migrate
// brings version 5's routines: ddl_relations follows pg_depend, drop_guard
// counts dropped defaults and constraints, ddl_start exists.
func TestUpgradeFromVersion4(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	if _, err := c.Exec(ctx, `SELECT 1`+dropVersion5+`;
		CREATE OR REPLACE FUNCTION fence.ddl_relations(p_classid oid, p_objid oid) RETURNS oid[] LANGUAGE sql STABLE
		SET search_path = pg_catalog, pg_temp AS $$SELECT '{}'::oid[]$$`); err != nil {
		t.Fatal(err)
	}
	st, err := fencestore.Status(ctx, session{c})
	if err != nil || st.OK() || st.Version != 4 || !strings.Contains(st.String(), "version 4 is older than "+latest) {
		t.Fatalf("version 4 store: %v, %v", st, err)
	}
	res, err := fencestore.Migrate(ctx, session{c})
	if err != nil || res.String() != "upgraded fence schema from version 4 to "+latest {
		t.Fatalf("Migrate = %v, %v", res, err)
	}
	if st, err := fencestore.Status(ctx, session{c}); err != nil || !st.OK() {
		t.Fatalf("after upgrade: %v, %v", st, err)
	}
	var rels, drop, start bool
	err = c.QueryRow(ctx, `SELECT position('pg_depend' IN prosrc) > 0 FROM pg_proc WHERE oid = 'fence.ddl_relations(oid, oid)'::regprocedure`).Scan(&rels)
	if err == nil {
		err = c.QueryRow(ctx, `SELECT position('pg_attrdef' IN prosrc) > 0 FROM pg_proc WHERE oid = 'fence.drop_guard()'::regprocedure`).Scan(&drop)
	}
	if err == nil {
		err = c.QueryRow(ctx, `SELECT to_regprocedure('fence.ddl_start()') IS NOT NULL`).Scan(&start)
	}
	if err != nil || !rels || !drop || !start {
		t.Errorf("after upgrade: ddl_relations follows pg_depend %v, drop_guard counts defaults %v, ddl_start exists %v (%v)", rels, drop, start, err)
	}
}

// TestUpgradeFromVersion6: a store at version 6 (here with a fence.check
// that raises a one-line 55Z02, as a stand-in for version 6's) is reported,
// and migrate brings version 7's refusals with DETAIL and HINT, leaving a C
// fence.guard (the operator's choice) as it was.
func TestUpgradeFromVersion6(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	if _, err := c.Exec(ctx, `SELECT 1`+dropVersion7+`;
		CREATE OR REPLACE PROCEDURE fence.check(p_token text, p_resource text, p_table_resource text,
			p_default_resource text, p_require_token boolean, p_advance boolean)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
		AS $$BEGIN RAISE EXCEPTION USING ERRCODE = '55Z02', MESSAGE = 'one long line'; END$$;
		`+fencestore.CGuardSQL); err != nil {
		t.Fatal(err)
	}
	st, err := fencestore.Status(ctx, session{c})
	if err != nil || st.OK() || st.Version != 6 || !strings.Contains(st.String(), "version 6 is older than "+latest) {
		t.Fatalf("version 6 store: %v, %v", st, err)
	}
	res, err := fencestore.Migrate(ctx, session{c})
	if err != nil || res.String() != "upgraded fence schema from version 6 to "+latest {
		t.Fatalf("Migrate = %v, %v", res, err)
	}
	if st, err := fencestore.Status(ctx, session{c}); err != nil || !st.OK() {
		t.Fatalf("after upgrade: %v, %v", st, err)
	}
	err = inTx(ctx, c, "BEGIN", func() error {
		return call(ctx, c, fencestore.CheckArgs{TableResource: "r", RequireToken: true, Advance: true})
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Message != `fencing token required for resource "r"` || pe.Detail == "" || pe.Hint == "" {
		t.Errorf("after upgrade: %v (DETAIL %q, HINT %q), want version 7's 55Z02", err, pe.Detail, pe.Hint)
	}
	var impl string
	var super bool
	if err := c.QueryRow(ctx, fencestore.GuardImplQuery).Scan(&impl, &super); err != nil || impl != "c" {
		t.Errorf("fence.guard after upgrade: %q, %v; want the C guard kept", impl, err)
	}
}

// TestUpgradeFromVersion7: a store at version 7 (fence.hwm's triggers as
// versions 2 to 7 made them) is reported, and migrate brings version 8's
// triggers, which run fence.refuse_lowering only where a mark could go
// down, keeping the marks and refusing their lowering.
func TestUpgradeFromVersion7(t *testing.T) {
	db := newStore(t)
	c := db.super(t)
	ctx := t.Context()
	setMark(t, c, "r", 100)
	if _, err := c.Exec(ctx, `SELECT 1`+dropVersion8); err != nil {
		t.Fatal(err)
	}
	st, err := fencestore.Status(ctx, session{c})
	if err != nil || st.OK() || st.Version != 7 || !strings.Contains(st.String(), "version 7 is older than "+latest) {
		t.Fatalf("version 7 store: %v, %v", st, err)
	}
	res, err := fencestore.Migrate(ctx, session{c})
	if err != nil || res.String() != "upgraded fence schema from version 7 to "+latest {
		t.Fatalf("Migrate = %v, %v", res, err)
	}
	if st, err := fencestore.Status(ctx, session{c}); err != nil || !st.OK() {
		t.Fatalf("after upgrade: %v, %v", st, err)
	}
	if got := mark(t, c, "r"); got != 100 {
		t.Errorf("mark after upgrade %d, want 100", got)
	}
	for _, stmt := range []string{"UPDATE fence.hwm SET token = 1", "DELETE FROM fence.hwm"} {
		_, err = c.Exec(ctx, stmt)
		if code, _ := pgErr(t, err); code != fencestore.CodeMarkLowered {
			t.Errorf("%s after upgrade: %v, want %s", stmt, err, fencestore.CodeMarkLowered)
		}
	}
}
