package gate

import "testing"

// What the pool cannot keep is never missed by the prescan: every text
// whose analysis finds session state a pool cannot keep per client, or a
// session-level SET of a fencing setting, holds a word of mayMatter's or
// mayNeedSession's, so a pooled session that skips analysing a text
// (analyzeKnown) never skips one of these.

// poolPrescanSeeds are texts of every kind the pool refuses or keeps.
var poolPrescanSeeds = []string{
	"LISTEN c", "listen\"c\"", "PREPARE p AS SELECT 1", "EXECUTE p", "DEALLOCATE ALL", "DEALLOCATE PREPARE p",
	"DISCARD ALL", "DISCARD PLANS", "DECLARE c CURSOR WITH HOLD FOR SELECT 1", "LOAD 'auto_explain'",
	"CREATE TEMP TABLE t (a int)", "CREATE TEMPORARY TABLE t (a int)", "CREATE GLOBAL TEMPORARY TABLE t (a int)",
	"CREATE LOCAL TEMP TABLE t (a int)", "CREATE TABLE pg_temp.t (a int)", "create table PG_TEMP.t ()",
	"SELECT 1 INTO TEMP t", "SELECT 1 INTO TEMPORARY TABLE t UNION SELECT 2", "CREATE TEMP TABLE t AS SELECT 1",
	"CREATE TEMP SEQUENCE s", "CREATE TEMP VIEW v AS SELECT 1", "CREATE FUNCTION pg_temp.f() RETURNS int AS 'SELECT 1' LANGUAGE sql",
	"CREATE TYPE pg_temp.ty AS (a int)", "CREATE DOMAIN pg_temp.d AS int", "CREATE TYPE pg_temp.e AS ENUM ('a')",
	"EXPLAIN ANALYZE SELECT 1 INTO TEMP t", "EXPLAIN EXECUTE p", "CREATE TABLE t AS EXECUTE p",
	"SET search_path = a", "SET ROLE r", "SET SESSION AUTHORIZATION r", "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
	"SET LOCAL search_path = pg_temp", "/* x */ set statement_timeout = 5", "SET lock.fencing_token = 42", "RESET ALL",
	"RESET lock.resource", "SET lock.resource TO DEFAULT", `SET U&"lock"."fencing\005ftoken" = 42`,
	"SELECT set_config('search_path', 'a', false)", "SELECT pg_catalog.set_config('x.y', 'z', false)",
	"UPDATE pg_settings SET setting = 'a' WHERE name = 'search_path'", "SELECT pg_advisory_lock(1)",
	"SELECT pg_try_advisory_lock_shared(1, 2)", `SELECT "pg_advisory_lock"(1)`, `SELECT U&"pg_advisory\005flock"(1)`,
	"SELECT 1; LISTEN c", "WITH x AS (SELECT pg_advisory_lock(1)) SELECT * FROM x",
}

func TestPooledPrescanNeverMissesWhatThePoolCannotKeep(t *testing.T) {
	for _, sql := range poolPrescanSeeds {
		if !needsPoolAnalysis(t, sql) {
			t.Errorf("%q: the analysis finds nothing for the pool; a seed should need it", sql)
		}
	}
}

func FuzzPooledPrescan(f *testing.F) {
	for _, s := range poolPrescanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) { needsPoolAnalysis(t, sql) })
}

// needsPoolAnalysis reports whether the analysis of sql finds what a pool
// cannot keep, or a fencing setting kept for the session, failing t when
// the prescan would have skipped it.
func needsPoolAnalysis(t *testing.T, sql string) bool {
	t.Helper()
	a, err := Analyze(sql)
	if err != nil {
		return false
	}
	for _, st := range a.Statements {
		if st.poolSet != nil && !mayMatter(sql) {
			// poolParseText looks for a session SET of lock.* only where
			// mayMatter passes.
			t.Fatalf("%q: sets %q for the session, but mayMatter passes it", sql, st.poolSet.name)
		}
		if st.poolUnsupported != "" || st.poolSet != nil {
			if !mayMatter(sql) && !mayNeedSession(sql) {
				t.Fatalf("%q: the pool cannot keep %q, but the prescan passes it unanalysed", sql, st.poolUnsupported)
			}
			return true
		}
	}
	return false
}
