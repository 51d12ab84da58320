package fencestore

import "strings"

// A migration brings the fence schema from Version-1 to Version. Its
// statements run in order, in one transaction, after the advisory lock.
// Migrations are never edited once released: an upgrade is a new entry.
// Routines must be changed with CREATE OR REPLACE, which keeps the grants an
// operator may have narrowed (see docs/fence-store.md).
type migration struct {
	Version    int
	Name       string
	Statements []string
}

// migrations is the ordered history of the fence schema; the last entry is
// the version this binary installs.
var migrations = []migration{
	{Version: 1, Name: "high-water marks and fence.check", Statements: []string{
		`CREATE SCHEMA fence`,
		// Schemas get no PUBLIC privileges by default; say so anyway, then
		// let everyone resolve names in it but create nothing.
		`REVOKE ALL ON SCHEMA fence FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA fence TO PUBLIC`,
		`CREATE TABLE fence.schema_version (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
			applied_by name NOT NULL DEFAULT CURRENT_USER
		)`,
		`CREATE TABLE fence.hwm (
			resource   text PRIMARY KEY,
			token      bigint NOT NULL CHECK (token > 0),
			updated_at timestamptz NOT NULL
		)`,
		`CREATE PROCEDURE fence.check(p_token text, p_resource text, p_table_resource text,
			p_default_resource text, p_require_token boolean, p_advance boolean)
		LANGUAGE plpgsql
		SECURITY DEFINER
		SET search_path = pg_catalog, pg_temp
		AS $check$` + checkBody + `$check$`,
		revokeStrangers,
		`REVOKE ALL ON TABLE fence.schema_version, fence.hwm FROM PUBLIC`,
		`GRANT SELECT ON TABLE fence.schema_version, fence.hwm TO PUBLIC`,
		`REVOKE ALL ON PROCEDURE ` + checkSignature + ` FROM PUBLIC`,
		`GRANT EXECUTE ON PROCEDURE ` + checkSignature + ` TO PUBLIC`,
	}},
	{Version: 2, Name: "marks never go down except through fence.set_mark", Statements: []string{
		`CREATE FUNCTION fence.refuse_lowering() RETURNS trigger
		LANGUAGE plpgsql
		SET search_path = pg_catalog, pg_temp
		AS $refuse$` + refuseLoweringBody + `$refuse$`,
		`CREATE TRIGGER hwm_never_lower BEFORE UPDATE OR DELETE ON fence.hwm
			FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering()`,
		`CREATE TRIGGER hwm_never_truncate BEFORE TRUNCATE ON fence.hwm
			FOR EACH STATEMENT EXECUTE FUNCTION fence.refuse_lowering()`,
		// ALWAYS: session_replication_role = replica does not switch them off.
		`ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_lower`,
		`ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_truncate`,
		`CREATE FUNCTION fence.set_mark(p_resource text, p_token bigint) RETURNS bigint
		LANGUAGE plpgsql
		SET search_path = pg_catalog, pg_temp
		AS $set$` + setMarkBody + `$set$`,
		strings.Replace(revokeStrangers, "'PROCEDURE '", "'ROUTINE '", 1),
		`REVOKE ALL ON FUNCTION fence.refuse_lowering(), ` + setMarkSignature + ` FROM PUBLIC`,
	}},
	{Version: 3, Name: "database guard for protected tables; EXECUTE on fence.check to fence_client", Statements: []string{
		createClientRole,
		protectedTable,
		definer("fence.passed(p_resource text) RETURNS boolean", passedBody),
		unpinned("fence.guard() RETURNS trigger", guardBody),
		definer("fence.refresh() RETURNS void", refreshBody),
		invoker("fence.sync(p_apply boolean) RETURNS SETOF text", syncBody),
		`CREATE FUNCTION fence.ddl_relations(p_classid oid, p_objid oid) RETURNS oid[]
		LANGUAGE sql STABLE
		SET search_path = pg_catalog, pg_temp
		AS $rels$` + ddlRelationsBody + `$rels$`,
		invoker("fence.ddl_require(p_rels oid[], p_tag text) RETURNS void", ddlRequireBody),
		invoker("fence.ddl_guard() RETURNS event_trigger", ddlGuardBody),
		invoker("fence.drop_guard() RETURNS event_trigger", dropGuardBody),
		strings.Replace(revokeStrangers, "'PROCEDURE '", "'ROUTINE '", 1),
		`REVOKE ALL ON TABLE fence.protected FROM PUBLIC`,
		`GRANT SELECT ON TABLE fence.protected TO PUBLIC`,
		`REVOKE ALL ON FUNCTION ` + strings.Join(guardRoutines, ", ") + ` FROM PUBLIC`,
		// Every role that writes a protected table runs these (triggers run
		// with the writer's rights); fence.passed and fence.refresh are
		// SECURITY DEFINER, take nothing a caller could forge and only read
		// or recompute.
		`GRANT EXECUTE ON FUNCTION ` + strings.Join(guardRoutines, ", ") + ` TO PUBLIC`,
		`REVOKE ALL ON PROCEDURE ` + checkSignature + ` FROM PUBLIC`,
		`GRANT EXECUTE ON PROCEDURE ` + checkSignature + ` TO ` + ClientRole,
	}},
	// Version 3's routines as this binary has them: the guard without a
	// SET clause (cheaper, every name qualified), CREATE TRIGGER on a
	// protected table needing a check, and a guard narrowed by WHEN or a
	// column list no longer taken for the guard. Migration 3 installs the
	// same bodies on a fresh store; this one brings stores made by the
	// first version 3 up to them (privileges and owners are kept).
	{Version: 4, Name: "database guard: cheaper fence.guard; CREATE TRIGGER and narrowed guards need a check", Statements: []string{
		orReplace(unpinned("fence.guard() RETURNS trigger", guardBody)),
		orReplace(invoker("fence.sync(p_apply boolean) RETURNS SETOF text", syncBody)),
		orReplace(invoker("fence.ddl_guard() RETURNS event_trigger", ddlGuardBody)),
	}},
	// The database guard sees DDL that changes a protected table's data
	// without naming it: fence.ddl_relations follows pg_depend to the
	// tables that use a type, domain, collation, function or sequence;
	// fence.drop_guard also counts a protected table's dropped defaults and
	// constraints; fence.ddl_start (protect puts it on ddl_command_start)
	// refuses concurrent commands on protected tables before their first
	// commit. Migration 3 installs the same ddl_relations and drop_guard on
	// a fresh store.
	{Version: 5, Name: "database guard: DDL on what protected tables use; concurrent DDL refused at ddl_command_start", Statements: []string{
		`CREATE OR REPLACE FUNCTION fence.ddl_relations(p_classid oid, p_objid oid) RETURNS oid[]
		LANGUAGE sql STABLE
		SET search_path = pg_catalog, pg_temp
		AS $rels$` + ddlRelationsBody + `$rels$`,
		orReplace(invoker("fence.drop_guard() RETURNS event_trigger", dropGuardBody)),
		`CREATE FUNCTION fence.ddl_named(p_text text, p_name text) RETURNS boolean
		LANGUAGE plpgsql IMMUTABLE STRICT
		SET search_path = pg_catalog, pg_temp
		AS $named$` + ddlNamedBody + `$named$`,
		invoker("fence.ddl_start() RETURNS event_trigger", ddlStartBody),
		`REVOKE ALL ON FUNCTION ` + strings.Join(startRoutines, ", ") + ` FROM PUBLIC`,
		// Every role that runs DDL runs the event trigger, with its rights.
		`GRANT EXECUTE ON FUNCTION ` + strings.Join(startRoutines, ", ") + ` TO PUBLIC`,
	}},
	// Every advancing check writes a new version of the mark's row, so that
	// a holder under REPEATABLE READ or SERIALIZABLE cannot pass its check
	// with a snapshot older than the previous holder's commit; and a token
	// ceiling, so that a token far above what the lock service mints
	// cannot lock a resource out (NULL: none).
	{Version: 6, Name: "fence.check: a new row version per check (isolation); token ceiling", Statements: []string{
		`CREATE TABLE fence.token_ceiling (
			one boolean PRIMARY KEY DEFAULT true CHECK (one),
			max_token bigint NOT NULL CHECK (max_token > 0)
		)`,
		`REVOKE ALL ON TABLE fence.token_ceiling FROM PUBLIC`,
		`GRANT SELECT ON TABLE fence.token_ceiling TO PUBLIC`,
		replaceCheck,
	}},
	// Refusals in PostgreSQL's style: a short message (the resource, token
	// and mark in it, which the proxy's refusal log reads: refusal.go), what
	// happened in DETAIL, what to do in HINT. 55Z01's message is unchanged.
	// fence.guard gets the new PL/pgSQL body unless it is the C guard (any
	// symbol of the library: protect swaps an older one).
	{Version: 7, Name: "refusals as message, DETAIL and HINT", Statements: []string{
		replaceCheck,
		`CREATE OR REPLACE FUNCTION fence.refuse_lowering() RETURNS trigger
		LANGUAGE plpgsql
		SET search_path = pg_catalog, pg_temp
		AS $refuse$` + refuseLoweringBody + `$refuse$`,
		replacePLpgSQLGuard,
		orReplace(invoker("fence.ddl_require(p_rels oid[], p_tag text) RETURNS void", ddlRequireBody)),
		orReplace(invoker("fence.ddl_start() RETURNS event_trigger", ddlStartBody)),
	}},
	// Each check costs the server less: one UPDATE locks the mark's row
	// and writes its new version (versions before took the lock with a
	// SELECT … FOR NO KEY UPDATE first), and fence.refuse_lowering runs
	// only for an UPDATE that could lower a mark, which a WHEN clause the
	// server evaluates itself tells, or a DELETE: no PL/pgSQL trigger call
	// per check.
	{Version: 8, Name: "cheaper fence.check: one UPDATE per check; hwm_never_lower only where a mark could go down", Statements: []string{
		replaceCheck,
		`DROP TRIGGER hwm_never_lower ON fence.hwm`,
		`CREATE TRIGGER hwm_never_lower BEFORE UPDATE ON fence.hwm FOR EACH ROW
			WHEN (NEW.token OPERATOR(pg_catalog.<) OLD.token OR NEW.resource OPERATOR(pg_catalog.<>) OLD.resource)
			EXECUTE FUNCTION fence.refuse_lowering()`,
		`CREATE TRIGGER hwm_never_delete BEFORE DELETE ON fence.hwm
			FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering()`,
		`ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_lower`,
		`ALTER TABLE fence.hwm ENABLE ALWAYS TRIGGER hwm_never_delete`,
	}},
}

// hwmTriggers are fence.hwm's triggers, as pg_get_triggerdef shows them,
// by the version that installed them last: version 2's until version 8.
// Status reports a store whose triggers differ (dropped, disabled, not
// enabled ALWAYS, narrowed, on other events).
var hwmTriggers = map[int][]string{
	2: {
		"CREATE TRIGGER hwm_never_lower BEFORE DELETE OR UPDATE ON fence.hwm FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering()",
		"CREATE TRIGGER hwm_never_truncate BEFORE TRUNCATE ON fence.hwm FOR EACH STATEMENT EXECUTE FUNCTION fence.refuse_lowering()",
	},
	8: {
		"CREATE TRIGGER hwm_never_delete BEFORE DELETE ON fence.hwm FOR EACH ROW EXECUTE FUNCTION fence.refuse_lowering()",
		"CREATE TRIGGER hwm_never_lower BEFORE UPDATE ON fence.hwm FOR EACH ROW WHEN (((new.token < old.token) OR (new.resource <> old.resource))) EXECUTE FUNCTION fence.refuse_lowering()",
		"CREATE TRIGGER hwm_never_truncate BEFORE TRUNCATE ON fence.hwm FOR EACH STATEMENT EXECUTE FUNCTION fence.refuse_lowering()",
	},
}

// replaceCheck puts checkBody in place as fence.check (migrations 6, 7 and 8;
// one body for every version, as migration 1 installs it).
const replaceCheck = `CREATE OR REPLACE PROCEDURE fence.check(p_token text, p_resource text, p_table_resource text,
			p_default_resource text, p_require_token boolean, p_advance boolean)
		LANGUAGE plpgsql
		SECURITY DEFINER
		SET search_path = pg_catalog, pg_temp
		AS $check$` + checkBody + `$check$`

// replacePLpgSQLGuard makes fence.guard guardBody (PLpgSQLGuardSQL), or
// creates it when it is missing, unless it is a function of the C guard's
// library: the operator chose it, and it stays.
var replacePLpgSQLGuard = `DO $guard$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS p JOIN pg_catalog.pg_language AS l ON l.oid = p.prolang
		WHERE p.oid = pg_catalog.to_regprocedure('fence.guard()') AND l.lanname = 'c' AND p.probin = '` + CGuardLibrary + `') THEN
		EXECUTE $sql$` + PLpgSQLGuardSQL + `$sql$;
	END IF;
END
$guard$`

// orReplace turns a CREATE FUNCTION statement into CREATE OR REPLACE.
func orReplace(create string) string {
	return strings.Replace(create, "CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", 1)
}

// allowLoweringSetting is the setting fence.refuse_lowering lets a mark go
// down under. Only fence.set_mark sets it, around its own write (with
// set_config: a SET clause on the function would need GRANT SET ON
// PARAMETER for a non-superuser owner on PostgreSQL 15); whoever can write
// fence.hwm at all (its owner, a superuser) could set it too, so it stops
// accidents and dynamic SQL that builds the table's name, not a superuser
// who means it.
const allowLoweringSetting = "fence.allow_lowering"

// setMarkSignature names fence.set_mark with its argument types.
const setMarkSignature = "fence.set_mark(text, bigint)"

// refuseLoweringBody refuses, with CodeMarkLowered, any change to fence.hwm
// that could lower a mark: an UPDATE to a lower token or another resource,
// a DELETE, a TRUNCATE. A rising token (fence.check) passes.
const refuseLoweringBody = `
BEGIN
	IF pg_catalog.current_setting('` + allowLoweringSetting + `', true) IS NOT DISTINCT FROM 'on' THEN
		RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
	END IF;
	IF TG_OP = 'UPDATE' THEN
		IF NEW.resource = OLD.resource AND NEW.token >= OLD.token THEN
			RETURN NEW;
		END IF;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '` + CodeMarkLowered + `',
		MESSAGE = pg_catalog.format('%s on fence.hwm refused: high-water marks never go down', TG_OP),
		DETAIL = 'An UPDATE to a lower token or to another resource, a DELETE and a TRUNCATE of fence.hwm are refused.',
		HINT = 'To lower a mark on purpose, use fenceproxy hwm set (fence.set_mark).';
END
`

// setMarkBody makes p_token the mark of p_resource, whatever it was, and
// returns the previous mark (0: none). No FOR UPDATE in old: the upsert
// modifies the row in the same command, and a locking read of it would then
// skip it.
const setMarkBody = `
DECLARE
	v_previous bigint;
BEGIN
	PERFORM pg_catalog.set_config('` + allowLoweringSetting + `', 'on', true);
	WITH old AS (SELECT h.token FROM fence.hwm AS h WHERE h.resource = p_resource)
	INSERT INTO fence.hwm AS h (resource, token, updated_at) VALUES (p_resource, p_token, pg_catalog.now())
	ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
	RETURNING COALESCE((SELECT old.token FROM old), 0) INTO v_previous;
	PERFORM pg_catalog.set_config('` + allowLoweringSetting + `', '', true);
	RETURN v_previous;
END
`

// checkSignature names the procedure with its argument types.
const checkSignature = "fence.check(text, text, text, text, boolean, boolean)"

// checkBody is fence.check's body. Migration 1 installs it on a fresh
// store (which is used only once migrated to the end, so the table of
// migration 6 it reads is there by then); migration 6 puts it in place of
// the body earlier versions installed, which locked an equal token's mark
// without writing it and had no ceiling, migration 7 once more (its
// refusals with DETAIL and HINT) and migration 8 again (one UPDATE per
// check). Everything is schema-qualified; the operators (=, <, ~ …)
// resolve through the pinned search_path, where pg_catalog comes first and
// pg_temp, last, is never searched for operators.
//
// Advance: the UPDATE of a mark not above the token takes the row lock on
// the newest version of the row, waiting for a concurrent holder to
// finish, and re-reads what that holder committed before it writes (READ
// COMMITTED; under REPEATABLE READ and SERIALIZABLE the wait ends in a
// serialization failure instead, since the holder waited for wrote a new
// version of the row). Every advancing check writes a new version
// (docs/isolation.md). The lock is held to commit, which serializes
// holders of one resource. A mark the UPDATE leaves alone is read to tell
// a stale token (a higher mark) from a missing mark, which is inserted.
//
// Check only (read-only transaction, or p_advance false): a plain SELECT; FOR
// SHARE is not allowed in read-only transactions.
const checkBody = `
DECLARE
	v_text     text := COALESCE(NULLIF(p_token, ''), NULLIF(pg_catalog.current_setting('lock.fencing_token', true), ''));
	v_resource text := COALESCE(NULLIF(p_resource, ''), NULLIF(pg_catalog.current_setting('lock.resource', true), ''),
	                            NULLIF(p_table_resource, ''), NULLIF(p_default_resource, ''));
	v_token    bigint;
	v_mark     bigint;
	v_ceiling  bigint;
BEGIN
	IF v_text IS NULL THEN
		IF p_require_token THEN
			RAISE EXCEPTION USING ERRCODE = '55Z02',
				MESSAGE = pg_catalog.format('fencing token required for resource "%s"', COALESCE(NULLIF(p_table_resource, ''), v_resource)),
				DETAIL = 'The resource''s tables are protected with require_token, and this transaction carries no fencing token.',
				HINT = 'Set lock.fencing_token, or add fencing_token= to the statement''s comment.';
		END IF;
		RETURN;
	END IF;

	-- Decimal digits only (no sign, no blanks), 1 .. 2^63-1. Nested IFs: SQL
	-- does not promise to short-circuit OR, and the casts fail on junk.
	IF v_text ~ '^[0-9]+$' AND pg_catalog.length(pg_catalog.ltrim(v_text, '0')) BETWEEN 1 AND 19 THEN
		IF v_text::pg_catalog.numeric <= 9223372036854775807 THEN
			v_token := v_text::pg_catalog.int8;
		END IF;
	END IF;
	IF v_token IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('invalid fencing token "%s"', v_text),
			DETAIL = 'A fencing token is a positive 64-bit integer in decimal digits, without sign or blanks.',
			HINT = 'Pass the token the lock service granted, unchanged.';
	END IF;

	IF v_resource IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('fencing token %s has no resource', v_token),
			DETAIL = 'A token is checked against the high-water mark of one resource, and none was named.',
			HINT = 'Set lock.resource, add resource= to the statement''s comment, map the table to a resource in the config, or set default_resource.';
	END IF;

	SELECT c.max_token INTO v_ceiling FROM fence.token_ceiling AS c;
	IF v_token > v_ceiling THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('fencing token %s for resource "%s" is above the token ceiling %s', v_token, v_resource, v_ceiling),
			DETAIL = 'The lock service mints no such token: a mark this high would lock out every real holder.',
			HINT = 'If the lock service really mints it, raise the ceiling with fenceproxy hwm ceiling.';
	END IF;

	IF p_advance AND pg_catalog.current_setting('transaction_read_only') = 'off' THEN
		-- Lock the mark's row to commit, and write a new version of it, also
		-- for an equal token: a later holder under REPEATABLE READ or
		-- SERIALIZABLE whose snapshot was taken before this transaction
		-- committed then fails to lock the row (40001) instead of reading
		-- data older than this holder's writes. updated_at becomes now():
		-- the guard's fence.passed knows a version this transaction wrote by
		-- it. A mark above the token is left alone and refused below. A
		-- missing row is inserted; if another session inserts it first,
		-- update theirs instead.
		FOR attempt IN 1..3 LOOP
			UPDATE fence.hwm AS h SET token = v_token, updated_at = pg_catalog.now()
				WHERE h.resource = v_resource AND h.token <= v_token;
			IF FOUND THEN
				RETURN;
			END IF;
			SELECT h.token INTO v_mark FROM fence.hwm AS h WHERE h.resource = v_resource;
			IF FOUND AND v_mark > v_token THEN
				EXIT;
			END IF;
			-- Missing (or lowered by fence.set_mark since the UPDATE: the
			-- insert does nothing, and the next attempt updates it).
			INSERT INTO fence.hwm AS h (resource, token, updated_at)
				VALUES (v_resource, v_token, pg_catalog.now())
				ON CONFLICT (resource) DO NOTHING;
			IF FOUND THEN
				RETURN;
			END IF;
			v_mark := NULL;
		END LOOP;
		IF v_mark IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = '40001',
				MESSAGE = pg_catalog.format('could not lock the high-water mark of resource "%s"', v_resource),
				DETAIL = 'Concurrent transactions created the mark while this one tried to lock it, and its snapshot cannot see their row.',
				HINT = 'Retry the transaction.';
		END IF;
	ELSE
		SELECT h.token INTO v_mark FROM fence.hwm AS h WHERE h.resource = v_resource;
	END IF;

	IF v_mark > v_token THEN
		RAISE EXCEPTION USING ERRCODE = '55Z01',
			MESSAGE = pg_catalog.format('stale fencing token %s for resource "%s": high-water mark is %s', v_token, v_resource, v_mark),
			DETAIL = 'A holder with a higher fencing token has used this resource since.',
			HINT = 'This holder has lost its lock and must stop; acquire the lock again for a new token.';
	END IF;
END
`

// revokeStrangers removes every privilege that a role other than the owner
// holds on the fence objects, e.g. through ALTER DEFAULT PRIVILEGES of the
// migrating role; the explicit grants follow it.
const revokeStrangers = `DO $revoke$
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT DISTINCT 'TABLE ' || c.oid::pg_catalog.regclass::text AS obj, a.grantee
		FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
		WHERE c.relnamespace = 'fence'::pg_catalog.regnamespace AND a.grantee <> c.relowner AND a.grantee <> 0
		UNION
		SELECT DISTINCT 'PROCEDURE ' || p.oid::pg_catalog.regprocedure::text, a.grantee
		FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
		WHERE p.pronamespace = 'fence'::pg_catalog.regnamespace AND a.grantee <> p.proowner AND a.grantee <> 0
		UNION
		SELECT DISTINCT 'SCHEMA fence', a.grantee
		FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS a
		WHERE n.nspname = 'fence' AND a.grantee <> n.nspowner AND a.grantee <> 0
	LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', r.obj, r.grantee::pg_catalog.regrole);
	END LOOP;
END
$revoke$`

// definer is CREATE FUNCTION sig, SECURITY DEFINER with the pinned
// search_path, in plpgsql.
func definer(sig, body string) string {
	return "CREATE FUNCTION " + sig + "\n\tLANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp\n\tAS $body$" + body + "$body$"
}

// unpinned is CREATE FUNCTION sig with the caller's rights and no SET
// clause, in plpgsql: only for a body that qualifies every name and
// operator (fence.guard, which runs on every write and is kept cheap).
func unpinned(sig, body string) string {
	return "CREATE FUNCTION " + sig + "\n\tLANGUAGE plpgsql\n\tAS $body$" + body + "$body$"
}

// invoker is CREATE FUNCTION sig with the caller's rights and the pinned
// search_path, in plpgsql.
func invoker(sig, body string) string {
	return "CREATE FUNCTION " + sig + "\n\tLANGUAGE plpgsql SET search_path = pg_catalog, pg_temp\n\tAS $body$" + body + "$body$"
}
