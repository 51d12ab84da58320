package gate

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// tables parses "a, s.b" into TableRefs for test tables.
func tables(s string) []TableRef {
	if s == "" {
		return nil
	}
	var out []TableRef
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if i := strings.LastIndexByte(n, '.'); i >= 0 {
			out = append(out, TableRef{Schema: n[:i], Name: n[i+1:]})
		} else {
			out = append(out, TableRef{Name: n})
		}
	}
	return out
}

// flag bits for compact test tables.
const (
	fFence    = 1 << iota // TouchesFence
	fSets                 // SetsFenceSetting
	fLocal                // Local
	fCopyFrom             // CopyFrom
	fReadOnly             // ReadOnly
	fChain                // Chain
	fOpaque               // Opaque
	fLexing               // SetsLexing
)

func flagsOf(st Statement) int {
	f := 0
	for _, b := range []struct {
		on  bool
		bit int
	}{{st.TouchesFence, fFence}, {st.SetsFenceSetting, fSets}, {st.Local, fLocal}, {st.CopyFrom, fCopyFrom}, {st.ReadOnly, fReadOnly}, {st.Chain, fChain}, {st.Opaque, fOpaque}, {st.SetsLexing, fLexing}} {
		if b.on {
			f |= b.bit
		}
	}
	return f
}

func TestAnalyzeStatement(t *testing.T) {
	tests := []struct {
		name   string
		sql    string
		kind   Kind
		writes string // comma-separated [schema.]name
		flags  int
		stName string // Statement.Name
	}{
		// Read
		{"select", "SELECT a FROM t WHERE b = 1", Read, "", 0, ""},
		{"values", "VALUES (1), (2)", Read, "", 0, ""},
		{"table", "TABLE t", Read, "", 0, ""},
		{"select for update is read", "SELECT * FROM t FOR UPDATE", Read, "", 0, ""},
		{"select volatile function is read", "SELECT nextval('s'), pg_notify('c', 'x')", Read, "", 0, ""},
		{"read-only cte", "WITH x AS (SELECT 1) SELECT * FROM x", Read, "", 0, ""},
		{"explain", "EXPLAIN SELECT 1", Read, "", 0, ""},
		{"explain of write without analyze", "EXPLAIN DELETE FROM t", Read, "", 0, ""},
		{"explain analyze false", "EXPLAIN (ANALYZE false) DELETE FROM t", Read, "", 0, ""},
		{"explain analyze of read", "EXPLAIN ANALYZE SELECT 1", Read, "", 0, ""},
		{"copy to", "COPY t TO STDOUT", Read, "", 0, ""},
		{"copy query to", "COPY (SELECT * FROM t) TO STDOUT WITH (FORMAT csv)", Read, "", 0, ""},
		{"declare cursor", "DECLARE c CURSOR FOR SELECT * FROM t", Read, "", 0, "c"},
		{"fetch", "FETCH 10 FROM c", Read, "", fOpaque, "c"},
		{"move", "MOVE NEXT IN c", Read, "", fOpaque, "c"},
		{"create table as execute", "CREATE TABLE t AS EXECUTE p", Write, "t", fOpaque, ""},
		{"lock", "LOCK TABLE t IN ACCESS EXCLUSIVE MODE", Read, "", 0, ""},
		{"read fence.hwm", "SELECT token FROM fence.hwm WHERE resource = 'r'", Read, "", 0, ""},
		{"explain read fence.hwm", "EXPLAIN SELECT * FROM fence.hwm", Read, "", 0, ""},
		{"copy fence.hwm to", "COPY fence.hwm TO STDOUT", Read, "", 0, ""},

		// Write: DML and every source of Writes
		{"insert", "INSERT INTO public.t (a) VALUES (1)", Write, "public.t", 0, ""},
		{"insert on conflict", "INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = 2", Write, "t", 0, ""},
		{"insert select", "INSERT INTO a SELECT * FROM b", Write, "a", 0, ""},
		{"update pgbench", "UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 42", Write, "pgbench_accounts", 0, ""},
		{"update from", "UPDATE a SET x = b.x FROM b WHERE a.id = b.id", Write, "a", 0, ""},
		{"delete", "DELETE FROM s.t WHERE a = 1 RETURNING *", Write, "s.t", 0, ""},
		{"merge", "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN UPDATE SET b = s.b WHEN NOT MATCHED THEN INSERT VALUES (s.a, s.b)", Write, "t", 0, ""},
		{"truncate", "TRUNCATE a, s.b RESTART IDENTITY", Write, "a, s.b", 0, ""},
		{"copy from stdin", "COPY t (a, b) FROM STDIN", Write, "t", fCopyFrom, ""},
		{"copy from file", "COPY s.t FROM '/tmp/x.csv' WITH (FORMAT csv)", Write, "s.t", fCopyFrom, ""},
		{"copy delete returning to", "COPY (DELETE FROM t RETURNING *) TO STDOUT", Write, "t", 0, ""},
		{"modifying cte", "WITH d AS (DELETE FROM a RETURNING *) SELECT * FROM d", Write, "a", 0, ""},
		{"modifying cte in insert", "WITH u AS (UPDATE a SET x = 1 RETURNING id) INSERT INTO b SELECT id FROM u", Write, "b, a", 0, ""},
		{"nested modifying cte", "WITH x AS (WITH y AS (INSERT INTO a VALUES (1) RETURNING 1) SELECT * FROM y) SELECT * FROM x", Write, "a", 0, ""},
		{"select into", "SELECT * INTO newt FROM t", Write, "newt", 0, ""},
		{"create table as", "CREATE TABLE s.newt AS SELECT * FROM t", Write, "s.newt", 0, ""},
		{"create matview", "CREATE MATERIALIZED VIEW mv AS SELECT 1", Write, "mv", 0, ""},
		{"explain analyze write", "EXPLAIN ANALYZE UPDATE t SET a = 1", Write, "t", 0, ""},
		{"explain analyze option list", "EXPLAIN (ANALYZE, BUFFERS) INSERT INTO t VALUES (1)", Write, "t", 0, ""},
		{"duplicate targets once", "WITH a1 AS (DELETE FROM t RETURNING *) DELETE FROM t", Write, "t", 0, ""},
		{"quoted names", `INSERT INTO "S"."My Table" VALUES (1)`, Write, "S.My Table", 0, ""},
		{"catalog qualified", "DELETE FROM db.s.t", Write, "s.t", 0, ""},

		// Write: DDL
		{"alter table", "ALTER TABLE t ADD COLUMN c int", Write, "t", 0, ""},
		{"alter table attach", "ALTER TABLE t ATTACH PARTITION p FOR VALUES FROM (1) TO (2)", Write, "t, p", 0, ""},
		{"alter table inherit", "ALTER TABLE c INHERIT s.p", Write, "c, s.p", 0, ""},
		{"alter table no inherit", "ALTER TABLE c NO INHERIT p", Write, "c, p", 0, ""},
		{"detach partition", "ALTER TABLE t DETACH PARTITION p", Write, "t, p", 0, ""},
		{"drop table", "DROP TABLE a, s.b CASCADE", Write, "a, s.b", 0, ""},
		{"drop view", "DROP VIEW v", Write, "v", 0, ""},
		{"drop index", "DROP INDEX i", Write, "i", 0, ""},
		{"create table", "CREATE TABLE t (a int)", Write, "t", 0, ""},
		{"create partition", "CREATE TABLE p PARTITION OF s.t FOR VALUES FROM (1) TO (2)", Write, "p, s.t", 0, ""},
		{"create index", "CREATE INDEX ON s.t (a)", Write, "s.t", 0, ""},
		{"create trigger", "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()", Write, "t", 0, ""},
		{"create rule", "CREATE RULE r AS ON INSERT TO t DO INSTEAD NOTHING", Write, "t", 0, ""},
		{"create rule with action", "CREATE RULE r AS ON INSERT TO t DO ALSO INSERT INTO log VALUES (1)", Write, "t", 0, ""},
		{"create policy", "CREATE POLICY p ON t USING (true)", Write, "t", 0, ""},
		{"rename table", "ALTER TABLE t RENAME TO u", Write, "t", 0, ""},
		{"set schema", "ALTER TABLE t SET SCHEMA s", Write, "t", 0, ""},
		{"cluster table", "CLUSTER t USING i", Write, "t", 0, ""},
		{"reindex table", "REINDEX TABLE t", Write, "t", 0, ""},
		{"reindex index", "REINDEX INDEX i", Write, "", 0, ""},
		{"refresh matview", "REFRESH MATERIALIZED VIEW CONCURRENTLY mv", Write, "mv", 0, ""},
		{"create view", "CREATE VIEW v AS SELECT 1", Write, "v", 0, ""},
		{"grant on table", "GRANT SELECT ON s.t TO r", Write, "s.t", 0, ""},
		{"create function body not written", "CREATE FUNCTION f() RETURNS void BEGIN ATOMIC INSERT INTO t VALUES (1); END", Write, "", 0, ""},
		{"alter type add value", "ALTER TYPE e ADD VALUE 'x'", Write, "", 0, ""},
		{"analyze", "ANALYZE t", Write, "", 0, ""},
		{"create extension", "CREATE EXTENSION IF NOT EXISTS pgcrypto", Write, "", 0, ""},
		{"create subscription without slot", "CREATE SUBSCRIPTION s CONNECTION 'x' PUBLICATION p WITH (connect = false)", Write, "", 0, ""},
		{"alter subscription no refresh", "ALTER SUBSCRIPTION s SET PUBLICATION p WITH (refresh = false)", Write, "", 0, ""},

		// Write: opaque
		{"do", "DO $$ BEGIN UPDATE t SET a = 1; END $$", Write, "", fOpaque, ""},
		{"execute", "EXECUTE p(1, 2)", Write, "", fOpaque, "p"},
		{"call", "CALL p(1)", Write, "", fOpaque, ""},
		{"set scs", "SET standard_conforming_strings = off", Setting, "", fLexing, ""},
		{"set names", "SET NAMES 'SJIS'", Setting, "", fLexing, ""},
		{"set_config encoding", "SELECT set_config('client_encoding', 'SJIS', false)", Read, "", fLexing, ""},
		{"set_config unknown name", "SELECT set_config(n, 'x', false) FROM t", Read, "", fSets | fLexing, ""},
		{"notify", "NOTIFY chan, 'payload'", Write, "", 0, ""},

		// Setting
		{"set", "SET statement_timeout = '5s'", Setting, "", 0, ""},
		{"set token", "SET lock.fencing_token = 42", Setting, "", fSets, ""},
		{"set token to", "SET lock.fencing_token TO '42'", Setting, "", fSets, ""},
		{"set session token", "SET SESSION lock.fencing_token = 42", Setting, "", fSets, ""},
		{"set local resource", "SET LOCAL lock.resource = 'orders/42'", Setting, "", fSets | fLocal, ""},
		{"set token quoted mixed case", `SET "Lock"."Fencing_Token" = 1`, Setting, "", fSets, ""},
		{"set token default", "SET lock.fencing_token TO DEFAULT", Setting, "", fSets, ""},
		{"reset token", "RESET lock.fencing_token", Setting, "", fSets, ""},
		{"reset resource", "RESET lock.resource", Setting, "", fSets, ""},
		{"reset all", "RESET ALL", Setting, "", fSets | fLexing, ""},
		{"reset other", "RESET work_mem", Setting, "", 0, ""},
		{"set local other", "SET LOCAL work_mem = '1MB'", Setting, "", fLocal, ""},
		{"show", "SHOW lock.fencing_token", Setting, "", 0, ""},
		{"show all", "SHOW ALL", Setting, "", 0, ""},
		{"set transaction", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", Setting, "", 0, ""},
		{"set transaction read only", "SET TRANSACTION READ ONLY", Setting, "", fReadOnly, ""},
		{"set session characteristics", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", Setting, "", 0, ""},
		{"set constraints", "SET CONSTRAINTS ALL DEFERRED", Setting, "", 0, ""},
		{"set role", "SET ROLE app", Setting, "", 0, ""},
		{"set session authorization", "SET SESSION AUTHORIZATION app", Setting, "", 0, ""},
		{"discard plans", "DISCARD PLANS", Setting, "", 0, ""},
		{"discard temp", "DISCARD TEMP", Setting, "", 0, ""},
		{"set search_path", "SET search_path = app, public", Setting, "", 0, ""},

		// set_config anywhere in the tree
		{"set_config token", "SELECT set_config('lock.fencing_token', '42', false)", Read, "", fSets, ""},
		{"set_config resource local", "SELECT set_config('lock.resource', 'r', true)", Read, "", fSets, ""},
		{"set_config qualified cast", "SELECT pg_catalog.set_config('LOCK.FENCING_TOKEN'::text, '1', false)", Read, "", fSets, ""},
		{"set_config other", "SELECT set_config('application_name', 'x', false)", Read, "", 0, ""},
		{"set_config param name", "SELECT set_config($1, $2, false)", Read, "", fSets | fLexing, ""},
		{"set_config expression name", "SELECT set_config('lock.' || 'resource', 'r', false)", Read, "", fSets | fLexing, ""},
		{"set_config in where", "SELECT 1 FROM t WHERE set_config('lock.resource', t.r, true) IS NOT NULL", Read, "", fSets, ""},
		{"set_config in update", "UPDATE t SET a = set_config('lock.fencing_token', '3', false)", Write, "t", fSets, ""},
		{"set_config in prepare", "PREPARE p AS SELECT set_config('lock.resource', $1, false)", Other, "", 0, "p"},
		{"set_config in function body", "CREATE FUNCTION f() RETURNS text BEGIN ATOMIC SELECT set_config('lock.resource', 'x', false); END", Write, "", 0, ""},
		{"set_config under explain", "EXPLAIN SELECT set_config('lock.resource', 'x', false)", Read, "", 0, ""},
		{"set_config under explain analyze", "EXPLAIN ANALYZE SELECT set_config('lock.resource', 'x', false)", Read, "", fSets, ""},
		{"set_config in subquery", "SELECT (SELECT set_config(name, 'x', false) FROM pg_settings LIMIT 1)", Read, "", fSets | fLexing, ""},

		// Transaction control
		{"begin", "BEGIN", Begin, "", 0, ""},
		{"begin isolation", "BEGIN ISOLATION LEVEL REPEATABLE READ", Begin, "", 0, ""},
		{"begin read only", "BEGIN READ ONLY", Begin, "", fReadOnly, ""},
		{"begin read write", "BEGIN READ WRITE", Begin, "", 0, ""},
		{"start transaction read only", "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY, DEFERRABLE", Begin, "", fReadOnly, ""},
		{"commit", "COMMIT", Commit, "", 0, ""},
		{"end", "END", Commit, "", 0, ""},
		{"commit and chain", "COMMIT AND CHAIN", Commit, "", fChain, ""},
		{"prepare transaction", "PREPARE TRANSACTION 'gid1'", Commit, "", 0, "gid1"},
		{"rollback", "ROLLBACK", Rollback, "", 0, ""},
		{"abort", "ABORT", Rollback, "", 0, ""},
		{"rollback and chain", "ROLLBACK AND CHAIN", Rollback, "", fChain, ""},
		{"savepoint", "SAVEPOINT sp1", Savepoint, "", 0, "sp1"},
		{"rollback to", "ROLLBACK TO SAVEPOINT sp1", RollbackTo, "", 0, "sp1"},
		{"rollback to short", "ROLLBACK TO sp1", RollbackTo, "", 0, "sp1"},
		{"release", "RELEASE SAVEPOINT sp1", Release, "", 0, "sp1"},
		{"release short", "RELEASE sp1", Release, "", 0, "sp1"},
		{"discard all", "DISCARD ALL", DiscardAll, "", fSets | fLexing, ""},

		// NoTxnBlock
		{"vacuum", "VACUUM", NoTxnBlock, "", 0, ""},
		{"vacuum table", "VACUUM (VERBOSE) t", NoTxnBlock, "", 0, ""},
		{"vacuum analyze", "VACUUM ANALYZE t", NoTxnBlock, "", 0, ""},
		{"vacuum full", "VACUUM FULL t", NoTxnBlock, "", 0, ""},
		{"create database", "CREATE DATABASE d", NoTxnBlock, "", 0, ""},
		{"drop database", "DROP DATABASE IF EXISTS d WITH (FORCE)", NoTxnBlock, "", 0, ""},
		{"alter database set tablespace", "ALTER DATABASE d SET TABLESPACE ts", NoTxnBlock, "", 0, ""},
		{"create tablespace", "CREATE TABLESPACE ts LOCATION '/x'", NoTxnBlock, "", 0, ""},
		{"drop tablespace", "DROP TABLESPACE ts", NoTxnBlock, "", 0, ""},
		{"alter system", "ALTER SYSTEM SET work_mem = '4MB'", NoTxnBlock, "", 0, ""},
		{"alter system token", "ALTER SYSTEM SET lock.fencing_token = 1", NoTxnBlock, "", 0, ""},
		{"create index concurrently", "CREATE INDEX CONCURRENTLY i ON t (a)", NoTxnBlock, "t", 0, ""},
		{"drop index concurrently", "DROP INDEX CONCURRENTLY i", NoTxnBlock, "i", 0, ""},
		{"reindex concurrently", "REINDEX TABLE CONCURRENTLY t", NoTxnBlock, "t", 0, ""},
		{"reindex concurrently option", "REINDEX (CONCURRENTLY) INDEX i", NoTxnBlock, "", 0, ""},
		{"reindex schema", "REINDEX SCHEMA s", NoTxnBlock, "", 0, ""},
		{"reindex database", "REINDEX DATABASE d", NoTxnBlock, "", 0, ""},
		{"reindex system", "REINDEX SYSTEM d", NoTxnBlock, "", 0, ""},
		{"cluster all", "CLUSTER", NoTxnBlock, "", 0, ""},
		{"detach concurrently", "ALTER TABLE t DETACH PARTITION p CONCURRENTLY", NoTxnBlock, "t, p", 0, ""},
		{"commit prepared", "COMMIT PREPARED 'g'", NoTxnBlock, "", 0, "g"},
		{"rollback prepared", "ROLLBACK PREPARED 'g'", NoTxnBlock, "", 0, "g"},
		{"create subscription", "CREATE SUBSCRIPTION s CONNECTION 'x' PUBLICATION p", NoTxnBlock, "", 0, ""},
		{"alter subscription refresh", "ALTER SUBSCRIPTION s REFRESH PUBLICATION", NoTxnBlock, "", 0, ""},
		{"drop subscription", "DROP SUBSCRIPTION s", NoTxnBlock, "", 0, ""},

		// Other
		{"prepare", "PREPARE p (int) AS SELECT $1", Other, "", 0, "p"},
		{"deallocate", "DEALLOCATE p", Other, "", 0, "p"},
		{"deallocate all", "DEALLOCATE ALL", Other, "", 0, ""},
		{"close", "CLOSE c", Other, "", 0, "c"},
		{"listen", "LISTEN chan", Other, "", 0, ""},
		{"unlisten", "UNLISTEN *", Other, "", 0, ""},
		{"checkpoint", "CHECKPOINT", Other, "", 0, ""},
		{"load", "LOAD 'auto_explain'", Other, "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.sql)
			if err != nil {
				t.Fatalf("Analyze(%q): %v", tt.sql, err)
			}
			if len(a.Statements) != 1 {
				t.Fatalf("Analyze(%q): %d statements, want 1", tt.sql, len(a.Statements))
			}
			st := a.Statements[0]
			if st.Kind != tt.kind {
				t.Errorf("Kind = %v, want %v", st.Kind, tt.kind)
			}
			if want := tables(tt.writes); !reflect.DeepEqual(st.Writes, want) {
				t.Errorf("Writes = %v, want %v", st.Writes, want)
			}
			if got := flagsOf(st); got != tt.flags {
				t.Errorf("flags = %06b, want %06b (fence, sets, local, copyFrom, readOnly, chain from the right)", got, tt.flags)
			}
			if st.Name != tt.stName {
				t.Errorf("Name = %q, want %q", st.Name, tt.stName)
			}
			if st.Text != tt.sql {
				t.Errorf("Text = %q, want the whole input", st.Text)
			}
		})
	}
}

func TestAnalyzeTouchesFence(t *testing.T) {
	tests := []struct {
		name    string
		sql     string
		touches bool
	}{
		{"delete cte", "WITH x AS (DELETE FROM fence.hwm RETURNING *) SELECT * FROM x", true},
		{"update", "UPDATE fence.hwm SET token = 1", true},
		{"insert quoted", `INSERT INTO "fence"."hwm" VALUES ('r', 1, now())`, true},
		{"insert upper case", "INSERT INTO FENCE.HWM VALUES ('r', 1, now())", true},
		{"delete", "DELETE FROM fence.hwm", true},
		{"merge", "MERGE INTO fence.hwm h USING t ON true WHEN MATCHED THEN DELETE", true},
		{"truncate", "TRUNCATE fence.hwm", true},
		{"truncate among others", "TRUNCATE a, fence.hwm", true},
		{"copy from", "COPY fence.hwm FROM STDIN", true},
		{"drop schema", "DROP SCHEMA fence CASCADE", true},
		{"drop schema list", "DROP SCHEMA other, fence", true},
		{"drop table", "DROP TABLE fence.hwm", true},
		{"drop function", "DROP FUNCTION fence.check_and_advance(text, bigint)", true},
		{"alter table", "ALTER TABLE fence.hwm DISABLE TRIGGER ALL", true},
		{"alter schema owner", "ALTER SCHEMA fence OWNER TO app", true},
		{"rename schema", "ALTER SCHEMA fence RENAME TO old", true},
		{"rename into fence", "ALTER SCHEMA x RENAME TO fence", true},
		{"create table", "CREATE TABLE fence.x()", true},
		{"create schema", "CREATE SCHEMA fence", true},
		{"create schema authorization", "CREATE SCHEMA AUTHORIZATION fence", true},
		{"create function", "CREATE FUNCTION fence.f() RETURNS int LANGUAGE sql AS 'select 1'", true},
		{"create index", "CREATE INDEX ON fence.hwm (token)", true},
		{"grant table", "GRANT UPDATE ON fence.hwm TO app", true},
		{"grant schema", "GRANT CREATE ON SCHEMA fence TO app", true},
		{"grant all in schema", "GRANT ALL ON ALL TABLES IN SCHEMA fence TO app", true},
		{"revoke function", "REVOKE EXECUTE ON FUNCTION fence.check_and_advance(text, bigint) FROM PUBLIC", true},
		{"default privileges", "ALTER DEFAULT PRIVILEGES IN SCHEMA fence GRANT ALL ON TABLES TO app", true},
		{"comment on schema", "COMMENT ON SCHEMA fence IS 'x'", true},
		{"set schema into fence", "ALTER TABLE t SET SCHEMA fence", true},
		{"call fence function", "SELECT fence.check_and_advance('r', 1)", true},
		{"call procedure", "CALL fence.repair('r')", true},
		{"select for update", "SELECT * FROM fence.hwm FOR UPDATE", true},
		{"select other fence table", "SELECT * FROM fence.schema_version", true},
		{"insert reading fence", "INSERT INTO t SELECT token FROM fence.hwm", true},
		{"lock", "LOCK TABLE fence.hwm", true},
		{"prepare write", "PREPARE p AS DELETE FROM fence.hwm", true},
		{"prepare locking read", "PREPARE p AS SELECT * FROM fence.hwm FOR SHARE", true},
		{"declare locking read", "DECLARE c CURSOR FOR SELECT * FROM fence.hwm FOR UPDATE", true},
		{"function body", "CREATE FUNCTION f() RETURNS void BEGIN ATOMIC DELETE FROM fence.hwm; END", true},
		{"function string body", "CREATE FUNCTION f() RETURNS void LANGUAGE sql AS $$ DELETE FROM fence.hwm $$", true},
		{"procedure plpgsql body", "CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN TRUNCATE Fence.hwm; END $$", true},
		{"rule action", "CREATE RULE r AS ON INSERT TO t DO ALSO DELETE FROM fence.hwm", true},
		{"do mentioning fence", "DO $$ BEGIN EXECUTE 'DELETE FROM ' || 'Fence.hwm'; END $$", true},
		{"explain write", "EXPLAIN DELETE FROM fence.hwm", true},
		{"set search_path", "SET search_path = fence, public", true},
		{"set search_path one string", "SET search_path TO 'public,fence'", true},
		{"set_config search_path", "SELECT set_config('search_path', 'fence', false)", true},
		{"set_config search_path param", "SELECT set_config('search_path', $1, false)", true},
		{"fence type", "SELECT 1::fence.mytype", true},
		{"alter function", "ALTER FUNCTION fence.check_and_advance(text, bigint) SECURITY INVOKER", true},

		{"plain read of hwm", "SELECT * FROM fence.hwm", false},
		{"prepared plain read of hwm", "PREPARE p AS SELECT token FROM fence.hwm WHERE resource = $1", false},
		{"cursor over hwm", "DECLARE c CURSOR FOR SELECT * FROM fence.hwm", false},
		{"read hwm in join", "SELECT t.*, h.token FROM t JOIN fence.hwm h ON h.resource = t.r", false},
		{"read hwm with qualified columns", "SELECT fence.hwm.token FROM fence.hwm", false},
		{"string literal fence", "INSERT INTO t VALUES ('fence', 'fence.hwm')", false},
		{"column named fence", "UPDATE t SET fence = 1 WHERE fence > 0", false},
		{"table named fence", "DROP TABLE fence", false},
		{"table named fence unqualified insert", "INSERT INTO fence VALUES (1)", false},
		{"other schema", "DELETE FROM fences.hwm", false},
		{"quoted mixed case schema", `DELETE FROM "Fence".hwm`, false},
		{"function named fence", "SELECT fence(1)", false},
		{"create table with fence column", "CREATE TABLE t (fence int)", false},
		{"set search_path other", "SET search_path = app, public", false},
		{"do without fence", "DO $$ BEGIN NULL; END $$", false},
		{"function body without fence", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", false},
		{"join using column fence", "SELECT * FROM a JOIN b USING (fence, id)", false},
		{"copy column list", "COPY t (fence, b) FROM STDIN", false},
		{"copy force quote", "COPY t TO STDOUT (FORMAT csv, FORCE_QUOTE (fence, b))", false},
		{"alias column names", "SELECT * FROM t AS x (fence, b)", false},
		{"cte column names", "WITH x (fence, b) AS (SELECT 1, 2) SELECT * FROM x", false},
		{"enum label", "CREATE TYPE e AS ENUM ('fence', 'wall')", false},
		{"unique constraint columns", "ALTER TABLE t ADD UNIQUE (fence, b)", false},
		{"insert column list", "INSERT INTO t (fence, b) VALUES (1, 2)", false},
		{"function named fence dropped", "DROP FUNCTION fence(int)", false},
		{"operator in fence", "SELECT 1 OPERATOR(fence.+) 2", true},
		{"comment on fence table", "COMMENT ON TABLE fence.hwm IS 'x'", true},
		{"drop type in fence", "DROP TYPE fence.t", true},
		{"alter function owner", "ALTER FUNCTION fence.f() OWNER TO app", true},
		{"create trigger on fence", "CREATE TRIGGER tr AFTER INSERT ON fence.hwm FOR EACH ROW EXECUTE FUNCTION f()", true},
		{"trigger calling fence function", "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION fence.f()", true},
		{"select into fence", "SELECT * INTO fence.copy FROM t", true},
		{"create view in fence", "CREATE VIEW fence.v AS SELECT 1", true},
		{"create extension in fence", "CREATE EXTENSION pgcrypto SCHEMA fence", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.sql)
			if err != nil {
				t.Fatalf("Analyze(%q): %v", tt.sql, err)
			}
			if got := a.Statements[0].TouchesFence; got != tt.touches {
				t.Errorf("TouchesFence(%q) = %v, want %v", tt.sql, got, tt.touches)
			}
		})
	}
}

func TestAnalyzeMultiStatement(t *testing.T) {
	sql := "BEGIN; /* fencing_token=42 resource=orders/42 */ UPDATE t SET a = 1;\n" +
		"SELECT ';' AS semi, $$ ; $$ /* fencing_token=43 */; SAVEPOINT s; ROLLBACK TO s; COMMIT"
	a, err := Analyze(sql)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		kind Kind
		text string
		d    Directives
	}
	want := []row{
		{Begin, "BEGIN", Directives{}},
		{Write, "/* fencing_token=42 resource=orders/42 */ UPDATE t SET a = 1", Directives{42, "orders/42"}},
		{Read, "SELECT ';' AS semi, $$ ; $$ /* fencing_token=43 */", Directives{Token: 43}},
		{Savepoint, "SAVEPOINT s", Directives{}},
		{RollbackTo, "ROLLBACK TO s", Directives{}},
		{Commit, "COMMIT", Directives{}},
	}
	if len(a.Statements) != len(want) {
		t.Fatalf("%d statements, want %d: %+v", len(a.Statements), len(want), a.Statements)
	}
	for i, w := range want {
		st := a.Statements[i]
		if st.Kind != w.kind || st.Text != w.text || st.Directives != w.d {
			t.Errorf("statement %d = {%v %q %+v}, want {%v %q %+v}", i, st.Kind, st.Text, st.Directives, w.kind, w.text, w.d)
		}
		if !strings.Contains(sql[st.Start:st.End], st.Text) {
			t.Errorf("statement %d: span [%d,%d) = %q does not hold %q", i, st.Start, st.End, sql[st.Start:st.End], st.Text)
		}
	}
}

func TestAnalyzeDirectivePlacement(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		want []Directives
	}{
		{"single leading", "/* fencing_token=1 */ SELECT 1", []Directives{{Token: 1}}},
		{"single trailing after semicolon", "SELECT 1; /* fencing_token=1 */", []Directives{{Token: 1}}},
		{"single trailing sqlcommenter", "UPDATE t SET a = 1 /*fencing_token='7',resource='a%2Fb'*/", []Directives{{7, "a/b"}}},
		{"multi each its own", "SELECT 1 /* fencing_token=1 */; SELECT 2 /* fencing_token=2 */", []Directives{{Token: 1}, {Token: 2}}},
		{"multi leading belongs to next", "SELECT 1; /* resource=b */ SELECT 2", []Directives{{}, {Resource: "b"}}},
		{"multi trailing applies to all", "SELECT 1; SELECT 2; /* fencing_token=5 */", []Directives{{Token: 5}, {Token: 5}}},
		{"literal not a comment", "SELECT '/* fencing_token=9 */'; SELECT 2", []Directives{{}, {}}},
		{"dollar body not a comment", "SELECT $f$ /* fencing_token=9 */ $f$", []Directives{{}}},
		{"line comment", "SELECT 1 -- fencing_token=3\n", []Directives{{Token: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.sql)
			if err != nil {
				t.Fatal(err)
			}
			var got []Directives
			for _, st := range a.Statements {
				got = append(got, st.Directives)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Analyze(%q) directives = %+v, want %+v", tt.sql, got, tt.want)
			}
		})
	}
}

func TestAnalyzePrepared(t *testing.T) {
	a, err := Analyze("/* fencing_token=4 */ PREPARE p (int) AS UPDATE s.t SET a = $1")
	if err != nil {
		t.Fatal(err)
	}
	st := a.Statements[0]
	if st.Kind != Other || st.Name != "p" || st.Writes != nil {
		t.Fatalf("PREPARE = %+v", st)
	}
	p := st.Prepared
	if p == nil || p.Kind != Write || !reflect.DeepEqual(p.Writes, tables("s.t")) || p.Directives.Token != 4 || p.Text != st.Text {
		t.Fatalf("Prepared = %+v", p)
	}
}

func TestAnalyzeErrors(t *testing.T) {
	tests := []struct {
		name  string
		sql   string
		check func(error) bool
	}{
		{"syntax", "SELEC 1", isErr[*ParseError]},
		{"syntax in second", "SELECT 1; UPDATE", isErr[*ParseError]},
		{"unterminated comment", "SELECT 1 /* fencing_token=1", isErr[*ParseError]},
		{"nul byte", "SELECT 1\x00", isErr[*ParseError]},
		{"token abc", "/* fencing_token=abc */ UPDATE t SET a = 1", isErr[*TokenError]},
		{"token zero", "UPDATE t SET a = 1 /* fencing_token=0 */", isErr[*TokenError]},
		{"token negative", "/* fencing_token=-1 */ SELECT 1", isErr[*TokenError]},
		{"token overflow", "/* fencing_token=9223372036854775808 */ SELECT 1", isErr[*TokenError]},
		{"token empty", "SELECT 1 /*fencing_token=''*/", isErr[*TokenError]},
		{"token in second statement", "SELECT 1; SELECT 2 /* fencing_token=x */", isErr[*TokenError]},
		{"conflicting tokens in one statement", "/* fencing_token=1 */ SELECT 1 /* fencing_token=2 */", isErr[*TokenError]},
		{"empty resource", "SELECT 1 /* resource='' */", isErr[*DirectiveError]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Analyze(tt.sql)
			if err == nil || a != nil {
				t.Fatalf("Analyze(%q) = %+v, %v; want an error", tt.sql, a, err)
			}
			if !tt.check(err) {
				t.Errorf("Analyze(%q) error %v (%T) of the wrong type", tt.sql, err, err)
			}
		})
	}
}

func isErr[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestAnalyzeEmpty(t *testing.T) {
	for _, sql := range []string{"", "  ", ";", "/* fencing_token=1 */", "-- just a comment"} {
		a, err := Analyze(sql)
		if err != nil || len(a.Statements) != 0 {
			t.Errorf("Analyze(%q) = %+v, %v; want no statements", sql, a, err)
		}
	}
}

func TestParseErrorPosition(t *testing.T) {
	_, err := Analyze("SELECT 1 FORM t")
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	if pe.Position != 15 || !pe.Syntax || !strings.Contains(pe.Message, "syntax error") || pe.Unwrap() == nil {
		t.Errorf("ParseError = %+v", pe)
	}
}

func TestParseErrorTooDeep(t *testing.T) {
	// Valid SQL whose tree is deeper than protobuf decoding allows: not a
	// syntax error, and the caller must not treat it as one.
	_, err := Analyze("SELECT 1" + strings.Repeat(" + 1", 20000))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
	if pe.Syntax {
		t.Errorf("ParseError.Syntax = true for a valid but deep query: %v", pe)
	}
}

func TestKindString(t *testing.T) {
	if Other.String() != "Other" || NoTxnBlock.String() != "NoTxnBlock" || Kind(200).String() != "Kind(200)" {
		t.Error("Kind.String")
	}
	if !Read.Fenced() || !Write.Fenced() || Setting.Fenced() || NoTxnBlock.Fenced() {
		t.Error("Kind.Fenced")
	}
}
