package fencestore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// State describes the fence store of one database, as Status found it.
type State struct {
	Version  int      // installed schema version; 0: not installed
	Latest   int      // LatestVersion of this binary
	Problems []string // what is missing or unsafe, one sentence each; empty when OK
}

// OK reports whether the store is installed at Latest with nothing amiss.
func (s State) OK() bool { return len(s.Problems) == 0 }

// String is one line for a log: "fence schema version 1: ok" or the problems
// joined by "; ".
func (s State) String() string {
	if s.OK() {
		return "fence schema version " + strconv.Itoa(s.Version) + ": ok"
	}
	return "fence schema version " + strconv.Itoa(s.Version) + ": " + strings.Join(s.Problems, "; ")
}

// Status inspects the fence store through q without changing anything: the
// installed version against LatestVersion, the presence of schema, table and
// procedure, fence.check's SECURITY DEFINER and search_path and body, and
// roles other than the owner that could write fence.hwm or create in schema
// fence (the owner and superusers always can), and whether the connected
// role may execute fence.check. The proxy's admin_dsn
// start-up check logs State.String. An error means q could not be asked.
func Status(ctx context.Context, q Querier) (State, error) {
	st, err := readState(ctx, q, "status")
	if err != nil {
		return State{}, err
	}
	s := State{Version: st.version, Latest: LatestVersion}
	add := func(format string, args ...any) { s.Problems = append(s.Problems, fmt.Sprintf(format, args...)) }
	switch {
	case st.version == 0 && !st.schema:
		add("not installed: run fenceproxy migrate")
		return s, nil
	case st.version == 0:
		add("schema fence exists but has no fence.schema_version: not made by fenceproxy migrate")
	case st.version < LatestVersion:
		add("version %d is older than %d: run fenceproxy migrate", st.version, LatestVersion)
	case st.version > LatestVersion:
		add("version %d is newer than this fenceproxy (%d)", st.version, LatestVersion)
	}
	if !st.table {
		add("table fence.hwm is missing")
	}
	switch {
	case !st.proc:
		add("procedure %s is missing", checkSignature)
	case !st.procSafe:
		add("procedure fence.check is not SECURITY DEFINER with search_path = pg_catalog, pg_temp")
	case st.version == LatestVersion && st.procBody != checkBody:
		add("procedure fence.check differs from version %d's: run fenceproxy migrate on a fresh schema or restore it", st.version)
	}
	if want := wantTriggers(st.version); want != nil && st.triggers != strings.Join(want, "\n") {
		add("fence.hwm lacks its triggers as version %d installs them (%s, enabled ALWAYS, calling fence.refuse_lowering): marks could be lowered", st.version, triggerNames(want))
	}
	if st.version >= 3 {
		if err := guardProblems(ctx, q, st.version, add); err != nil {
			return State{}, err
		}
	}
	if st.proc && !st.canExecute {
		add("role %s may not execute fence.check", st.user)
	}
	if st.writers != "" {
		add("roles other than the owner may write fence.hwm: %s", st.writers)
	}
	if st.creators != "" {
		add("roles other than the owner may create objects in schema fence: %s", st.creators)
	}
	return s, nil
}

// rawState is what the catalogs say about the fence store.
type rawState struct {
	version    int
	schema     bool   // schema fence exists
	table      bool   // fence.hwm exists
	proc       bool   // fence.check(…) exists
	procSafe   bool   // … SECURITY DEFINER with the pinned search_path
	procBody   string // its source
	user       string // the connected role
	canExecute bool   // … which may execute fence.check
	writers    string // non-owner roles with more than SELECT on fence.hwm
	creators   string // non-owner roles with CREATE on schema fence
	triggers   string // fence.hwm's hwm_never_* triggers enabled ALWAYS that call fence.refuse_lowering as installed, one per line
}

const stateQuery = `SELECT
	pg_catalog.to_regnamespace('fence') IS NOT NULL,
	pg_catalog.to_regclass('fence.schema_version') IS NOT NULL,
	pg_catalog.to_regclass('fence.hwm') IS NOT NULL,
	p.oid IS NOT NULL,
	COALESCE(p.prosecdef AND p.proconfig = ARRAY['search_path=pg_catalog, pg_temp'], false),
	COALESCE(p.prosrc, ''),
	CURRENT_USER::text,
	COALESCE(pg_catalog.has_function_privilege(p.oid, 'EXECUTE'), false),
	COALESCE((SELECT pg_catalog.string_agg(g.who, ', ' ORDER BY g.who) FROM (
		SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END AS who
		FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
		WHERE c.oid = pg_catalog.to_regclass('fence.hwm') AND a.grantee <> c.relowner AND a.privilege_type <> 'SELECT') AS g), ''),
	COALESCE((SELECT pg_catalog.string_agg(g.who, ', ' ORDER BY g.who) FROM (
		SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END AS who
		FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS a
		WHERE n.nspname = 'fence' AND a.grantee <> n.nspowner AND a.privilege_type = 'CREATE') AS g), ''),
	COALESCE((SELECT pg_catalog.string_agg(pg_catalog.pg_get_triggerdef(t.oid), E'\n' ORDER BY t.tgname)
		FROM pg_catalog.pg_trigger AS t JOIN pg_catalog.pg_proc AS f ON f.oid = t.tgfoid
		WHERE t.tgrelid = pg_catalog.to_regclass('fence.hwm') AND t.tgenabled = 'A' AND t.tgname LIKE 'hwm\_never\_%'
		AND f.oid = pg_catalog.to_regprocedure('fence.refuse_lowering()') AND f.prosrc = $1), '')
FROM (SELECT) AS one
LEFT JOIN pg_catalog.pg_proc AS p ON p.oid = pg_catalog.to_regprocedure('` + checkSignature + `')`

// readState reads rawState through q; op names the caller in errors.
func readState(ctx context.Context, q Querier, op string) (rawState, error) {
	var st rawState
	var hasVersions bool
	err := q.QueryRow(ctx, stateQuery, refuseLoweringBody).Scan(&st.schema, &hasVersions, &st.table, &st.proc,
		&st.procSafe, &st.procBody, &st.user, &st.canExecute, &st.writers, &st.creators, &st.triggers)
	if err != nil {
		// E.g. 42501 when the role lacks USAGE on schema fence: to_regclass
		// checks it even though it is told not to fail on missing names.
		return rawState{}, wrapErr(op+": read catalogs", err)
	}
	if !hasVersions {
		return st, nil
	}
	if st.version, err = Version(ctx, q); err != nil {
		return rawState{}, wrapErr(op+": read fence.schema_version", err)
	}
	return st, nil
}

// Version returns the installed fence store's version: 0 when there is
// none.
func Version(ctx context.Context, q Querier) (int, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT CASE WHEN pg_catalog.to_regclass('fence.schema_version') IS NULL THEN 0
		ELSE (SELECT COALESCE(pg_catalog.max(version), 0)::int8 FROM fence.schema_version) END`).Scan(&v)
	return int(v), err
}

// guardStateQuery reads what migration 3 installed: the registry, each
// routine with the body this binary installs, fence_client, and who may
// execute fence.check.
const guardStateQuery = `SELECT
	pg_catalog.to_regclass('fence.protected') IS NOT NULL,
	COALESCE((SELECT pg_catalog.string_agg(x, ', ' ORDER BY x) FROM pg_catalog.unnest($1::text[]) AS x
		WHERE pg_catalog.to_regprocedure(x) IS NULL), ''),
	COALESCE((SELECT p.prosrc = $2 AND p.prosecdef FROM pg_catalog.pg_proc AS p WHERE p.oid = pg_catalog.to_regprocedure('fence.passed(text)')), false),
	COALESCE((SELECT ` + guardImplCase + ` <> 'other' FROM pg_catalog.pg_proc AS p WHERE p.oid = pg_catalog.to_regprocedure('fence.guard()')), false),
	EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '` + ClientRole + `'),
	COALESCE((SELECT pg_catalog.bool_or(a.grantee = 0) FROM pg_catalog.pg_proc AS p,
		pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
		WHERE p.oid = pg_catalog.to_regprocedure('` + checkSignature + `') AND a.privilege_type = 'EXECUTE'), false)`

// guardProblems adds what is amiss with the guard's objects of a store at
// version (3 or later).
func guardProblems(ctx context.Context, q Querier, version int, add func(string, ...any)) error {
	var table, passedOK, guardOK, role, public bool
	var missing string
	err := q.QueryRow(ctx, guardStateQuery, guardRoutinesAt(version), passedBody).Scan(&table, &missing, &passedOK, &guardOK, &role, &public)
	if err != nil {
		return wrapErr("status: read the guard's catalogs", err)
	}
	switch {
	case !table:
		add("table fence.protected is missing")
	case missing != "":
		add("guard routines missing: %s", missing)
	case !passedOK || !guardOK:
		add("fence.passed or fence.guard differs from version %d's (fence.passed must be SECURITY DEFINER; fence.guard this version's PL/pgSQL body or the C guard): the database guard cannot be trusted", LatestVersion)
	}
	if !role {
		add("role %s is missing: run CREATE ROLE %s NOLOGIN", ClientRole, ClientRole)
	}
	if public {
		add("PUBLIC may execute fence.check: any role can raise a mark; REVOKE EXECUTE ON PROCEDURE %s FROM PUBLIC and GRANT %s to the application roles", checkSignature, ClientRole)
	}
	return nil
}

// wantTriggers returns fence.hwm's triggers at version v (hwmTriggers):
// nil before version 2, which had none.
func wantTriggers(v int) []string {
	from := 0
	for f := range hwmTriggers {
		if f <= v && f > from {
			from = f
		}
	}
	return hwmTriggers[from]
}

// triggerNames lists the names of the triggers defs define, for a sentence.
func triggerNames(defs []string) string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i], _, _ = strings.Cut(strings.TrimPrefix(d, "CREATE TRIGGER "), " ")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
