package fencestore

// The database guard (migration 3): triggers that fenceproxy protect puts on
// protected tables refuse a write unless the transaction has passed a fence
// check for the table's resource (docs/design.md "Fail closed", rule 8).
//
// The ground truth is the row of the resource's mark in fence.hwm: when
// fence.check advances, it updates that row (a new version, also for an
// equal token) or inserts it (first token), held to commit and undone by
// ROLLBACK TO SAVEPOINT. Only the fence routines, the owner and
// superusers can lock or write fence.hwm: other roles have SELECT only, and
// row-lock clauses need UPDATE. Nothing a client can SET records it.

// ClientRole is the role migration 3 creates (when missing) and grants
// EXECUTE on fence.check; application roles get it with GRANT fence_client.
const ClientRole = "fence_client"

// GuardTrigger is the name of the statement-level trigger protect installs
// on every guarded relation.
const GuardTrigger = "fence_guard"

// Event trigger names; protect creates them when its role is a superuser.
const (
	DDLEventTrigger   = "fence_guard_ddl"
	DropEventTrigger  = "fence_guard_drop"
	StartEventTrigger = "fence_guard_ddl_start" // since version 5
)

// createClientRole creates fence_client unless it exists, and says what to do
// when the migrating role may not create roles.
const createClientRole = `DO $role$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '` + ClientRole + `') THEN
		BEGIN
			CREATE ROLE ` + ClientRole + ` NOLOGIN;
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE EXCEPTION USING ERRCODE = '42501',
				MESSAGE = 'fenceproxy migrate needs the role ` + ClientRole + `, and ' || CURRENT_USER || ' may not create roles',
				HINT = 'Run CREATE ROLE ` + ClientRole + ` NOLOGIN as a superuser or a role with CREATEROLE, then migrate again.';
		END;
	END IF;
END
$role$`

// protectedTable is the registry: every relation that carries the guard.
// resource is set for the tables the config names (written by protect);
// rows with resource NULL are their partitions, inheritance children and
// ancestors, kept by fence.refresh. resources is what a write needs.
const protectedTable = `CREATE TABLE fence.protected (
	relid      oid PRIMARY KEY,
	resource   text,
	resources  text[] NOT NULL,
	configured text,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
)`

// passedBody is fence.passed(p_resource): has this transaction passed an
// advancing check for p_resource that is still in effect? Cheap path: the
// mark's row was locked, inserted or updated by the top-level transaction
// (xmax or xmin is our xid; a row version we wrote also has updated_at =
// now(), our transaction's start, which tells it from a frozen row whose
// original xmin has the same low 32 bits, 2^32 transactions ago).
// xmax is compared as a plain xid. It can be a MultiXact id only after a
// transaction locked the row and then raised the token in a savepoint it
// rolled back (lock + aborted update); that id stays on the row until the
// next check of the resource replaces it. A transaction whose own xid equals
// that number in its low 32 bits would pass the fast path without a check:
// a known, narrow residual (the two counters are independent). A lock-only
// xmax older than 2^32 transactions cannot remain: freezing removes it
// before the xid could come round.
const passedBody = `
DECLARE
	v_top   bigint := pg_catalog.pg_current_xact_id_if_assigned()::text::int8;
	v_xmin  xid;
	v_xmax  xid;
	v_at    timestamptz;
	v_after xid;
	v_low   bigint;
	v_d     bigint;
BEGIN
	IF v_top IS NULL THEN
		RETURN false; -- no xid: this transaction has locked and written nothing
	END IF;
	SELECT h.xmin, h.xmax, h.updated_at INTO v_xmin, v_xmax, v_at FROM fence.hwm AS h WHERE h.resource = p_resource;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	v_low := v_top & 4294967295;
	IF v_xmax::text::int8 = v_low THEN
		RETURN true;
	END IF;
	-- The xmin column shows a frozen row's original xid, which may repeat
	-- our xid's low bits; a version we wrote also carries our now().
	IF v_at = pg_catalog.now() AND v_xmin::text::int8 = v_low THEN
		RETURN true;
	END IF;
	v_d := (v_xmin::text::int8 - v_low + 4294967296) % 4294967296;
	IF v_at = pg_catalog.now() AND v_d < 2147483648 THEN
		BEGIN
			IF pg_catalog.pg_xact_status((v_top + v_d)::text::pg_catalog.xid8) = 'in progress' THEN
				RETURN true;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			NULL; -- an old frozen xmin that maps past the next xid
		END;
	END IF;
	IF v_xmax::text = '0' THEN
		RETURN false;
	END IF;
	BEGIN
		PERFORM FROM fence.hwm AS h WHERE h.resource = p_resource FOR NO KEY UPDATE NOWAIT;
		SELECT h.xmax INTO v_after FROM fence.hwm AS h WHERE h.resource = p_resource;
		RAISE EXCEPTION USING ERRCODE = 'FZ001';
	EXCEPTION
		WHEN lock_not_available THEN
			RETURN false;
		WHEN SQLSTATE 'FZ001' THEN
			RETURN v_after::text = v_xmax::text;
	END;
END
`

// guardBody is the trigger function: every resource in TG_ARGV must have
// passed its check. The common case (the check ran at the top level of
// this transaction: the mark's row is locked or written by our xid, the
// same test fence.passed starts with) is decided by one indexed query;
// anything else asks fence.passed, which returns true only after a check.
//
// It runs on every write statement to a protected table, so it is kept
// cheap (docs/guard.md, "What it costs", has the measurements): no SET
// clause (a function with one saves and restores search_path on every call,
// about a third of the trigger's cost), xids compared as xids rather than
// through text. Without the pinned search_path the caller's search_path is
// in effect, and the caller is the writer the guard judges: so every name
// is qualified — tables, functions and types with their schema, and every
// operator as OPERATOR(pg_catalog.…), because a writer could otherwise
// put an "=" of its own before pg_catalog's and pass the fast path. A
// missing xid (nothing locked or written yet) makes v_xid NULL, the fast
// path's comparisons NULL and the query find nothing: fence.passed decides.
const guardBody = `
DECLARE
	v_xid pg_catalog.xid := pg_catalog.xid(pg_catalog.pg_current_xact_id_if_assigned());
BEGIN
	FOR i IN 0 .. TG_NARGS OPERATOR(pg_catalog.-) 1 LOOP
		PERFORM FROM fence.hwm AS h
		WHERE h.resource OPERATOR(pg_catalog.=) TG_ARGV[i]
			AND (h.xmax OPERATOR(pg_catalog.=) v_xid
				OR h.xmin OPERATOR(pg_catalog.=) v_xid AND h.updated_at OPERATOR(pg_catalog.=) pg_catalog.now());
		CONTINUE WHEN FOUND;
		IF NOT fence.passed(TG_ARGV[i]) THEN
			RAISE EXCEPTION USING ERRCODE = '` + CodeTokenRequired + `',
				MESSAGE = pg_catalog.format('fencing token required: %s on %I.%I needs a fence check for resource "%s"',
					TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[i]),
				DETAIL = '` + guardDetail + `',
				HINT = '` + guardHint + `';
		END IF;
	END LOOP;
	RETURN NULL;
END
`

// guardDetail and guardHint are fence.guard's DETAIL and HINT for a write
// without a check; the C guard (ext/fence_guard) raises the same message,
// detail and hint (the guard tests run both).
const (
	guardDetail = "The table is protected by the database guard, and this transaction has not passed a fence check for the resource."
	guardHint   = "Write through fenceproxy with a fencing token, or CALL fence.check(…) for the resource earlier in the same transaction."
)

// The C guard: ext/fence_guard builds a shared library whose function makes
// guardBody's decision in C, without a PL/pgSQL call or an SPI query (docs/guard.md,
// "What it costs", has both measured): the same fast path, then
// fence.passed, then 55Z02. It is installed as the extension fence_guard:
// make install puts the library in the server's $libdir and
// fence_guard.control with its script (which creates no object) in its
// share directory. fenceproxy protect, as a superuser (only a superuser may
// create a C function or this extension), runs CREATE EXTENSION and swaps
// fence.guard to the library's function with CREATE OR REPLACE, which keeps
// the function's oid, owner and grants, so every installed trigger follows;
// PLpgSQLGuardSQL swaps it back. fence.guard stays the fence store's
// function, not the extension's: DROP EXTENSION leaves it and its triggers.
// Migration 7, which replaces the PL/pgSQL body, leaves a C fence.guard
// alone.
//
// A new decision, or new messages, get a new symbol; the library keeps the
// old ones, so that a store whose fence.guard names one keeps working (with
// that symbol's messages, which an older fenceproxy parses) until protect
// swaps it. fence_guard_v1 raised the one-line message of store version 6
// and earlier; fence_guard_v2 raises guardBody's message, DETAIL and HINT.
const (
	CGuardExtension = "fence_guard"
	CGuardLibrary   = "$libdir/fence_guard"
	CGuardSymbol    = "fence_guard_v2"
)

// CGuardExtensionSQL creates the extension; 58P01 when the server has no
// fence_guard.control (the extension is not installed).
const CGuardExtensionSQL = "CREATE EXTENSION IF NOT EXISTS " + CGuardExtension

// CGuardSQL makes fence.guard the C function. PostgreSQL checks the library
// and the symbol when it runs this: 58P01 when the library is missing,
// 42883 when it has no such function (a library older than this binary).
const CGuardSQL = `CREATE OR REPLACE FUNCTION fence.guard() RETURNS trigger LANGUAGE c AS '` +
	CGuardLibrary + `', '` + CGuardSymbol + `'`

// PLpgSQLGuardSQL makes fence.guard guardBody again.
var PLpgSQLGuardSQL = orReplace(unpinned("fence.guard() RETURNS trigger", guardBody))

// GuardImplQuery names fence.guard's implementation: "c" (this binary's C
// guard), "plpgsql" (guardBody), or "other" (neither: status reports it);
// and whether the current role is a superuser.
const GuardImplQuery = `SELECT COALESCE((SELECT ` + guardImplCase + ` FROM pg_catalog.pg_proc AS p
	WHERE p.oid = pg_catalog.to_regprocedure('fence.guard()')), 'other'),
	COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = CURRENT_USER), false)`

// guardImplCase is "c", "plpgsql" or "other" for fence.guard's pg_proc row
// p (guardBody is spliced in, dollar-quoted).
const guardImplCase = `CASE
	WHEN p.prolang = (SELECT l.oid FROM pg_catalog.pg_language AS l WHERE l.lanname = 'c')
		AND p.prosrc = '` + CGuardSymbol + `' AND p.probin = '` + CGuardLibrary + `' THEN 'c'
	WHEN p.prolang = (SELECT l.oid FROM pg_catalog.pg_language AS l WHERE l.lanname = 'plpgsql')
		AND p.prosrc = ` + "$guardbody$" + guardBody + "$guardbody$" + ` THEN 'plpgsql'
	ELSE 'other' END`

// refreshBody recomputes the registry's derived rows from the configured
// ones and the catalogs: a configured table's resource guards it, its
// descendants (partitions, inheritance children: a write to them is a write
// to it) and its ancestors (a write through them can reach it). Rows of
// dropped relations go. It writes only what changed.
const refreshBody = `
BEGIN
	DELETE FROM fence.protected AS p
	WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = p.relid);
	WITH RECURSIVE conf AS (
		SELECT p.relid, p.resource FROM fence.protected AS p WHERE p.resource IS NOT NULL
	), down(relid, resource) AS (
		SELECT * FROM conf
		UNION SELECT i.inhrelid, d.resource FROM pg_catalog.pg_inherits AS i JOIN down AS d ON i.inhparent = d.relid
	), up(relid, resource) AS (
		SELECT * FROM conf
		UNION SELECT i.inhparent, u.resource FROM pg_catalog.pg_inherits AS i JOIN up AS u ON i.inhrelid = u.relid
	), want AS (
		SELECT x.relid, pg_catalog.array_agg(DISTINCT x.resource ORDER BY x.resource) AS resources
		FROM (SELECT * FROM down UNION SELECT * FROM up) AS x GROUP BY x.relid
	), gone AS (
		DELETE FROM fence.protected AS p
		WHERE NOT EXISTS (SELECT FROM want AS w WHERE w.relid = p.relid)
	)
	INSERT INTO fence.protected AS p (relid, resources)
	SELECT w.relid, w.resources FROM want AS w
	ON CONFLICT (relid) DO UPDATE SET resources = excluded.resources, updated_at = pg_catalog.now()
	WHERE p.resources IS DISTINCT FROM excluded.resources;
END
`

// triggerArgs is the tgargs bytea that fence.guard(resources…) stores, for
// comparing an installed trigger with the registry.
const triggerArgs = `(SELECT pg_catalog.decode(COALESCE(pg_catalog.string_agg(pg_catalog.encode(pg_catalog.convert_to(u.x, pg_catalog.getdatabaseencoding()), 'hex') || '00', '' ORDER BY u.o), ''), 'hex')
	FROM pg_catalog.unnest(p.resources) WITH ORDINALITY AS u(x, o))`

// guardTriggerType is pg_trigger.tgtype of BEFORE INSERT OR UPDATE OR
// DELETE OR TRUNCATE … FOR EACH STATEMENT.
const guardTriggerType = "62"

// guardExact holds when trigger t is the guard that registry row p wants:
// fence_guard, calling fence.guard with p's resources, BEFORE every write
// FOR EACH STATEMENT, enabled, and with nothing that narrows when it
// fires: no WHEN condition (WHEN (false) would never fire) and no column
// list (UPDATE OF a would not fire for an UPDATE of b).
const guardExact = `t.tgname = '` + GuardTrigger + `'
	AND t.tgfoid = 'fence.guard()'::pg_catalog.regprocedure AND t.tgtype = ` + guardTriggerType + `
	AND t.tgenabled IN ('O', 'A') AND t.tgqual IS NULL AND pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) = 0
	AND t.tgargs = ` + triggerArgs

// guardMissing selects the registry rows p whose relation lacks the guard
// trigger as the registry wants it.
const guardMissing = `NOT EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
	WHERE t.tgrelid = p.relid AND ` + guardExact + `)`

// syncBody makes the guard triggers match the registry (after fence.refresh)
// and returns the DDL, which it runs only when p_apply. It runs with the
// caller's rights: creating a trigger needs TRIGGER on the table.
const syncBody = `
DECLARE
	r     record;
	v_sql text;
BEGIN
	PERFORM fence.refresh();
	FOR r IN
		SELECT p.relid::pg_catalog.regclass::text AS rel,
			(SELECT pg_catalog.string_agg(pg_catalog.quote_literal(u.x), ', ' ORDER BY u.o)
			 FROM pg_catalog.unnest(p.resources) WITH ORDINALITY AS u(x, o)) AS args
		FROM fence.protected AS p WHERE ` + guardMissing + `
		ORDER BY 1
	LOOP
		v_sql := pg_catalog.format('CREATE OR REPLACE TRIGGER ` + GuardTrigger + ` BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION fence.guard(%s)', r.rel, r.args);
		IF p_apply THEN
			EXECUTE v_sql;
		END IF;
		RETURN NEXT v_sql;
	END LOOP;
	FOR r IN
		SELECT t.tgrelid::pg_catalog.regclass::text AS rel FROM pg_catalog.pg_trigger AS t
		WHERE t.tgname = '` + GuardTrigger + `' AND t.tgfoid = 'fence.guard()'::pg_catalog.regprocedure
		AND NOT EXISTS (SELECT FROM fence.protected AS p WHERE p.relid = t.tgrelid)
		ORDER BY 1
	LOOP
		v_sql := pg_catalog.format('DROP TRIGGER ` + GuardTrigger + ` ON %s', r.rel);
		IF p_apply THEN
			EXECUTE v_sql;
		END IF;
		RETURN NEXT v_sql;
	END LOOP;
END
`

// ddlRelationsBody maps an object a DDL command touched to the relations
// whose data it can change: a relation (or column), an index's table, every
// relation of a schema, a trigger's, rule's, policy's, constraint's or
// default's table (version 3); and, since version 5, every relation that
// uses the object, found through pg_depend, what DROP … CASCADE would
// reach: the columns of an enum, domain, composite type or collation (and
// of its array type, of a domain over it, of a composite type with such an
// attribute, of a table's row type); typed tables; the defaults, CHECK
// constraints, generated columns, index expressions, triggers, rules and
// policies that call a function (or an operator, cast or operator class
// built on it); the defaults that call a sequence, and the table that owns
// it (serial, identity).
//
// The walk goes from an object to the objects that depend on it. From a
// table or view it goes only to its row type (a column of that type is
// data of another table), not to what merely refers to it (an FK of
// another table, a view): DDL on a table referenced by a protected one
// does not change the protected rows. Some objects hang under their owner
// rather than the reverse, so the walk also goes up their automatic or
// internal dependency: a domain's constraint to the domain, an operator
// family's members to the family, a sequence to the table that owns it,
// a composite type's relation to its type.
//
// The fence routines are left out (every guard trigger calls fence.guard,
// which protect and migrate replace): only the store's owner or a
// superuser can change them, and status and verify check fence.guard and
// fence.passed. Names a function's body uses are not dependencies (except
// in a SQL-standard body): replacing a function that another function
// calls is out of reach (docs/guard.md).
const ddlRelationsBody = `
WITH RECURSIVE obj(classid, objid) AS (
	SELECT p_classid, p_objid WHERE p_classid <> 'pg_catalog.pg_namespace'::pg_catalog.regclass
		AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS f
			WHERE p_classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND f.oid = p_objid AND f.pronamespace = 'fence'::pg_catalog.regnamespace)
	UNION
	SELECT n.classid, n.objid FROM obj, LATERAL (
		SELECT d.classid, d.objid FROM pg_catalog.pg_depend AS d
		WHERE d.refclassid = obj.classid AND d.refobjid = obj.objid
			AND (obj.classid <> 'pg_catalog.pg_class'::pg_catalog.regclass
				OR d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
				OR EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = obj.objid AND c.relkind IN ('S', 'c')))
		UNION ALL
		SELECT d.refclassid, d.refobjid FROM pg_catalog.pg_depend AS d
		WHERE d.classid = obj.classid AND d.objid = obj.objid AND d.deptype IN ('a', 'i')
			AND (obj.classid IN ('pg_catalog.pg_constraint'::pg_catalog.regclass, 'pg_catalog.pg_amop'::pg_catalog.regclass,
					'pg_catalog.pg_amproc'::pg_catalog.regclass)
				OR obj.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
					AND EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = obj.objid AND c.relkind IN ('S', 'c')))
	) AS n
)
SELECT COALESCE(pg_catalog.array_agg(DISTINCT r.relid) FILTER (WHERE r.relid <> 0), '{}') FROM (
	SELECT c.oid FROM pg_catalog.pg_class AS c
	WHERE p_classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND c.relnamespace = p_objid
	UNION ALL
	SELECT CASE obj.classid
		WHEN 'pg_catalog.pg_class'::pg_catalog.regclass THEN
			COALESCE((SELECT i.indrelid FROM pg_catalog.pg_index AS i WHERE i.indexrelid = obj.objid), obj.objid)
		WHEN 'pg_catalog.pg_trigger'::pg_catalog.regclass THEN
			(SELECT t.tgrelid FROM pg_catalog.pg_trigger AS t WHERE t.oid = obj.objid)
		WHEN 'pg_catalog.pg_rewrite'::pg_catalog.regclass THEN
			(SELECT r.ev_class FROM pg_catalog.pg_rewrite AS r WHERE r.oid = obj.objid)
		WHEN 'pg_catalog.pg_policy'::pg_catalog.regclass THEN
			(SELECT p.polrelid FROM pg_catalog.pg_policy AS p WHERE p.oid = obj.objid)
		WHEN 'pg_catalog.pg_constraint'::pg_catalog.regclass THEN
			(SELECT c.conrelid FROM pg_catalog.pg_constraint AS c WHERE c.oid = obj.objid)
		WHEN 'pg_catalog.pg_attrdef'::pg_catalog.regclass THEN
			(SELECT d.adrelid FROM pg_catalog.pg_attrdef AS d WHERE d.oid = obj.objid)
	END FROM obj
) AS r(relid)
`

// ddlRequireBody refuses, with 55Z02, a command (p_tag) that touched a
// guarded relation of p_rels when this transaction has not passed the check
// of each of its resources.
const ddlRequireBody = `
DECLARE
	r record;
BEGIN
	FOR r IN
		SELECT COALESCE(c.oid::pg_catalog.regclass::text, p.configured, 'relation ' || p.relid) AS rel, u.x AS resource
		FROM fence.protected AS p LEFT JOIN pg_catalog.pg_class AS c ON c.oid = p.relid,
			pg_catalog.unnest(p.resources) AS u(x)
		WHERE p.relid = ANY (p_rels)
		ORDER BY 1, 2
	LOOP
		IF NOT fence.passed(r.resource) THEN
			RAISE EXCEPTION USING ERRCODE = '` + CodeTokenRequired + `',
				MESSAGE = pg_catalog.format('fencing token required: %s on protected table %s needs a fence check for resource "%s"', p_tag, r.rel, r.resource),
				DETAIL = 'DDL on a protected table, or on what its data uses, needs the same fence check as a write, and this transaction has not passed it.',
				HINT = 'Run the DDL through fenceproxy with a fencing token, or CALL fence.check(…) for the resource earlier in the same transaction.';
		END IF;
	END LOOP;
END
`

// ddlGuardBody is the ddl_command_end event trigger: DDL on a guarded
// relation needs the check. ALTER TABLE is checked before and after the
// registry follows the change (… INHERIT makes a table guarded, NO INHERIT
// or DETACH ends it). A new partition or child (CREATE TABLE: empty, so no
// check) and an attached one get their guard trigger.
//
// CREATE TRIGGER needs the check too (a trigger can change or drop the rows
// a checked write lands, and CREATE OR REPLACE TRIGGER fence_guard would
// replace the guard itself), except for the one trigger fence.sync creates:
// fence_guard calling fence.guard with the registry's resources, exactly
// what the guard wants there, which weakens nothing.
const ddlGuardBody = `
DECLARE
	r       record;
	v_rels  oid[] := '{}';
	v_sync  boolean := false;
	v_alter boolean := false;
BEGIN
	FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
		IF r.command_tag = 'CREATE TRIGGER' THEN
			IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger AS t JOIN fence.protected AS p ON p.relid = t.tgrelid
				WHERE t.oid = r.objid AND ` + guardExact + `) THEN
				v_rels := v_rels || fence.ddl_relations(r.classid, r.objid);
			END IF;
		ELSE
			v_rels := v_rels || fence.ddl_relations(r.classid, r.objid);
			v_sync := v_sync OR r.command_tag IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE');
			v_alter := v_alter OR r.command_tag <> 'CREATE TABLE';
		END IF;
	END LOOP;
	IF pg_catalog.cardinality(v_rels) = 0 THEN
		RETURN;
	END IF;
	PERFORM fence.ddl_require(v_rels, TG_TAG);
	IF v_sync THEN
		PERFORM fence.refresh();
		IF EXISTS (SELECT FROM fence.protected AS p WHERE p.relid = ANY (v_rels)) THEN
			IF v_alter THEN
				PERFORM fence.ddl_require(v_rels, TG_TAG);
			END IF;
			PERFORM fence.sync(true);
		END IF;
	END IF;
END
`

// dropGuardBody is the sql_drop event trigger: dropping a guarded relation
// or a column of one (also through DROP SCHEMA … CASCADE, DROP OWNED BY, or
// DROP TYPE, FUNCTION, SEQUENCE or COLLATION … CASCADE), or the guard
// trigger, a rule, a policy, a constraint or a default of one, needs the
// check. The dropped rows are gone from the catalogs here: a dependent
// object's table is found by its name (schema, table, object).
const dropGuardBody = `
DECLARE
	r      record;
	v_rels oid[] := '{}';
BEGIN
	FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_dropped_objects() LOOP
		IF r.classid = 'pg_catalog.pg_class'::pg_catalog.regclass THEN
			v_rels := v_rels || r.objid;
		ELSIF r.classid IN ('pg_catalog.pg_trigger'::pg_catalog.regclass, 'pg_catalog.pg_rewrite'::pg_catalog.regclass,
				'pg_catalog.pg_policy'::pg_catalog.regclass, 'pg_catalog.pg_attrdef'::pg_catalog.regclass)
				AND pg_catalog.cardinality(r.address_names) = 3
			OR r.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND r.object_type = 'table constraint'
				AND pg_catalog.cardinality(r.address_names) = 3 THEN
			v_rels := v_rels || pg_catalog.to_regclass(pg_catalog.quote_ident(r.address_names[1]) || '.' || pg_catalog.quote_ident(r.address_names[2]))::oid;
		END IF;
	END LOOP;
	PERFORM fence.ddl_require(v_rels, TG_TAG);
	PERFORM fence.refresh();
END
`

// ddlNamedBody is fence.ddl_named(p_text, p_name): could p_text, one SQL
// statement, name the relation p_name? A superset test, for the
// ddl_command_start trigger, which has only the statement's text: true
// when p_name (or its quoted form, "" for ") occurs in it, letter case
// ignored, not inside a longer word. An unquoted name is delimited by
// characters that cannot continue an identifier, a quoted one by its
// quotes; a name that fills NAMEDATALEN may stand for a longer, truncated
// one, so its right edge is not tested. A digit or $ before it counts as a
// delimiter (an identifier cannot start with one; whether the lexer
// joined them is not worth guessing), a letter, _ or any non-ASCII
// character does not (the lexer would have made them one identifier).
// Unicode escapes (U&"…") can spell a name without its letters: the caller
// treats text containing U& as naming everything.
const ddlNamedBody = `
DECLARE
	v_text  text := pg_catalog.lower(p_text);
	v_name  text;
	v_len   integer;
	v_from  integer;
	v_at    integer;
	v_trunc boolean := pg_catalog.octet_length(p_name) >= 63;
BEGIN
	FOREACH v_name IN ARRAY ARRAY[pg_catalog.lower(p_name), pg_catalog.lower(pg_catalog.replace(p_name, '"', '""'))] LOOP
		v_len := pg_catalog.length(v_name);
		v_from := 1;
		LOOP
			v_at := pg_catalog.strpos(pg_catalog.substr(v_text, v_from), v_name);
			EXIT WHEN v_at = 0;
			v_at := v_from + v_at - 1;
			IF pg_catalog.substr(v_text, v_at - 1, 1) !~ '^[a-z_]$' AND pg_catalog.ascii(pg_catalog.substr(v_text, v_at - 1, 1)) < 128
				AND (v_trunc OR pg_catalog.substr(v_text, v_at + v_len, 1) !~ '^[a-z0-9_$]$'
					AND pg_catalog.ascii(pg_catalog.substr(v_text, v_at + v_len, 1)) < 128) THEN
				RETURN true;
			END IF;
			v_from := v_at + 1;
		END LOOP;
	END LOOP;
	RETURN false;
END
`

// ddlStartBody is the ddl_command_start event trigger (version 5). A
// command that commits in the middle — ALTER TABLE … DETACH PARTITION …
// CONCURRENTLY (the partition's rows leave the parent when its first
// transaction commits), CREATE INDEX CONCURRENTLY (an invalid index stays
// behind), REINDEX … CONCURRENTLY (PostgreSQL 17 and later fire event
// triggers for REINDEX) — has committed before ddl_command_end could refuse
// it, and it cannot run in a transaction block, so no check can come before
// it in its transaction. On a guarded relation it is refused here, before
// anything: the fix is the form without CONCURRENTLY in a checked
// transaction. (DROP INDEX needs no check, concurrently or not: docs/guard.md.)
//
// Here pg_event_trigger_ddl_commands() is not available, only TG_TAG and
// the text. The text is reliable for these commands: they refuse to run
// anywhere but at the top level of a statement of their own, whose text
// current_query() returns; and CONCURRENTLY is a keyword, which has no
// other spelling, so a text without it runs no concurrent command. The
// relations are found by name (fence.ddl_named: a superset; a false match
// only asks for a check that a real concurrent command could not have
// anyway). A transaction that did pass the checks (the word in a comment
// of a non-concurrent command in a checked transaction) goes on.
const ddlStartBody = `
DECLARE
	v_query text := pg_catalog.current_query();
	v_doubt boolean;
	r       record;
BEGIN
	IF TG_TAG NOT IN ('ALTER TABLE', 'CREATE INDEX', 'REINDEX') OR v_query !~* 'concurrently' THEN
		RETURN;
	END IF;
	v_doubt := v_query IS NULL OR v_query ~* 'u&';
	FOR r IN
		SELECT DISTINCT c.oid::pg_catalog.regclass::text AS rel, u.x AS resource
		FROM fence.protected AS p JOIN pg_catalog.pg_class AS c ON c.oid = p.relid
			JOIN pg_catalog.pg_namespace AS s ON s.oid = c.relnamespace,
			pg_catalog.unnest(p.resources) AS u(x)
		WHERE v_doubt OR fence.ddl_named(v_query, c.relname)
			OR TG_TAG = 'REINDEX' AND (v_query ~* E'\\m(database|system)\\M' OR fence.ddl_named(v_query, s.nspname)
				OR EXISTS (SELECT FROM pg_catalog.pg_index AS i JOIN pg_catalog.pg_class AS ic ON ic.oid = i.indexrelid
					WHERE i.indrelid = c.oid AND fence.ddl_named(v_query, ic.relname)))
		ORDER BY 1, 2
	LOOP
		IF NOT fence.passed(r.resource) THEN
			RAISE EXCEPTION USING ERRCODE = '` + CodeTokenRequired + `',
				MESSAGE = pg_catalog.format('fencing token required: %s … CONCURRENTLY on protected table %s cannot be fenced for resource "%s"', TG_TAG, r.rel, r.resource),
				DETAIL = 'A concurrent command commits before it ends and cannot run in a transaction block, so no fence check can cover it.',
				HINT = 'Run it without CONCURRENTLY in a transaction that passed a fence check for the resource: through fenceproxy with a fencing token, or after CALL fence.check(…).';
		END IF;
	END LOOP;
END
`

// guardRoutines are the routines of migration 3 with their signatures
// (migration 3's grants name them: never add to this list).
var guardRoutines = []string{
	"fence.passed(text)", "fence.guard()", "fence.refresh()", "fence.sync(boolean)",
	"fence.ddl_relations(oid, oid)", "fence.ddl_require(oid[], text)", "fence.ddl_guard()", "fence.drop_guard()",
}

// startRoutines are the routines migration 5 adds.
var startRoutines = []string{"fence.ddl_named(text, text)", "fence.ddl_start()"}

// guardRoutinesAt are the guard's routines a store of version v has.
func guardRoutinesAt(v int) []string {
	if v >= 5 {
		return append(guardRoutines[:len(guardRoutines):len(guardRoutines)], startRoutines...)
	}
	return guardRoutines
}
