package gate

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Under transaction pool mode (Config.Pooled) the session's fencing
// settings live in the gate, never on the shared server connection, and
// what a pool cannot keep per client is refused.

func pooledWire(t *testing.T, params map[string]string) *wire {
	t.Helper()
	cfg := &Config{Pooled: true, Analyzer: NewAnalyzer(100)}
	if err := CheckStartup(cfg, params); err != nil {
		t.Fatalf("startup refused: %v", err)
	}
	w := &wire{t: t, s: NewSession(cfg, params)}
	w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "on"})
	w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "UTF8"})
	w.s.Probe()
	w.replies("3123C3Z", 'I')
	return w
}

const literal42 = "CALL fence.check('42', "

func TestPooledSessionSetIsKeptByTheGateNotTheServer(t *testing.T) {
	for _, sql := range []string{
		"SET lock.fencing_token = 42",
		"set LOCK.FENCING_TOKEN to '42'",
		`SET "lock"."fencing_token" = 42`,
		"/* c */ SET  SESSION lock.fencing_token\n= 42 -- x",
	} {
		w := pooledWire(t, nil)
		got := w.send(q(sql))
		if strings.Contains(got, "42") || !strings.Contains(got, "TO DEFAULT") {
			t.Fatalf("%s: upstream %s, want a SET … TO DEFAULT without the value", sql, got)
		}
		if seen := w.replies("CZ", 'I'); seen != "CZ" {
			t.Fatalf("client saw %q", seen)
		}
		if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, literal42) {
			t.Fatalf("%s: check after it does not carry the tracked token: %s", sql, got)
		}
	}
}

func TestPooledSessionSetThatFailsKeepsTheOldValue(t *testing.T) {
	w := pooledWire(t, map[string]string{"options": "-c lock.fencing_token=42"})
	w.send(q("SET lock.fencing_token = 7"))
	w.replies("E{42501}Z", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, literal42) {
		t.Fatalf("after a failed SET: %s", got)
	}
}

func TestPooledStartupTokenIsTrackedAndStripped(t *testing.T) {
	tr, rest, err := PooledStartup(map[string]string{
		"options": `-c lock.fencing_token=42 --lock.resource=r -c search_path=a\ b`, "user": "u"})
	if err != nil || tr != (Tracked{Token: 42, Resource: "r"}) {
		t.Fatalf("tracked %+v, %v", tr, err)
	}
	if rest["options"] != `-c search_path=a\ b` || rest["user"] != "u" {
		t.Fatalf("rest %q", rest)
	}
	for _, p := range []map[string]string{
		{"options": "-c lock.fencing_token=abc"},
		{"lock.fencing_token": "-1"},
		{"options": "-c l\\ock.x=1"},
	} {
		if _, _, err := PooledStartup(p); err == nil {
			t.Errorf("%v accepted", p)
		}
	}
	w := pooledWire(t, map[string]string{"lock.fencing_token": "42", "lock.resource": "r"})
	if got := w.send(q("DELETE FROM t")); !strings.Contains(got, "CALL fence.check('42', 'r'") {
		t.Fatalf("startup token not passed as a literal: %s", got)
	}
}

func TestPooledResetClearsTheTrackedToken(t *testing.T) {
	for _, sql := range []string{"RESET lock.fencing_token", "SET lock.fencing_token TO DEFAULT", "RESET ALL"} {
		w := pooledWire(t, nil)
		w.send(q("SET lock.fencing_token = 42"))
		w.replies("CZ", 'I')
		if got := w.send(q(sql)); got != "Q("+sql+")" {
			t.Fatalf("%s: upstream %s", sql, got)
		}
		w.replies("CZ", 'I')
		if got := w.send(q("UPDATE t SET v = 1")); strings.Contains(got, "'42'") {
			t.Fatalf("%s: token still used: %s", sql, got)
		}
	}
}

// A RESET that ends a Query (a pool's reset query: asyncpg's) is kept
// once the Query is answered without an error, which undoes all of it.
func TestPooledResetEndingAQueryIsKeptOnlyWhenTheQuerySucceeds(t *testing.T) {
	const reset = "SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL"
	for _, tc := range []struct {
		replies string
		kept    bool
	}{
		// The check the token brings first, then the Query's replies.
		{"C" + "TDCCCCZ", true},
		{"C" + "TDCCCE{XX000}Z", false}, // the RESET failed
		{"C" + "E{XX000}Z", false},      // nothing after the first statement ran
	} {
		w := pooledWire(t, nil)
		w.send(q("SET lock.fencing_token = 42"))
		w.replies("CZ", 'I')
		if got := w.send(q(reset)); !strings.HasSuffix(got, "; "+reset+")") || !strings.Contains(got, literal42) {
			t.Fatalf("upstream %s", got)
		}
		w.replies(tc.replies, 'I')
		got := w.send(q("UPDATE t SET v = 1"))
		if still := strings.Contains(got, literal42); still == tc.kept {
			t.Errorf("replies %s: token 42 still used %v: %s", tc.replies, still, got)
		}
	}
}

func TestPooledSessionSetElsewhereIsRefused(t *testing.T) {
	for _, sql := range []string{
		"SET lock.fencing_token = 42; SELECT 1",
		"SELECT 1; SET lock.fencing_token = 42", // a value is taken from a SET alone
		"RESET lock.fencing_token; SELECT 1",    // a RESET only ends a Query
		"BEGIN; RESET ALL",                      // then in a block
		"COMMIT; RESET ALL",
		"SELECT 1; ROLLBACK; RESET ALL",
		"DO $$BEGIN NULL; END$$; RESET ALL", // code the proxy cannot see may end the transaction
		"CALL p(); RESET ALL",
		"RESET ALL; RESET lock.fencing_token",
		"SELECT set_config('lock.fencing_token', '42', false)",
		"SET lock.fencing_token FROM CURRENT",
		"SELECT set_config(current_user, 'x', true)", // a name that is not a constant may be ours
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "55Z05") || strings.Contains(got, "42'") && !strings.Contains(sql, "set_config") {
			t.Errorf("%s: %s", sql, got)
		}
	}
	// In a transaction block the server confirmed.
	w := pooledWire(t, nil)
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	if got := w.send(q("SET lock.fencing_token = 42")); !strings.Contains(got, "55Z05") || strings.Contains(got, "42") {
		t.Fatalf("in a block: %s", got)
	}
	// A token that is not one.
	w = pooledWire(t, nil)
	if got := w.send(q("SET lock.fencing_token = 'x'")); !strings.Contains(got, "22023") {
		t.Fatalf("invalid token: %s", got)
	}
}

func TestPooledUnitAfterASessionSetWaitsForItsAnswer(t *testing.T) {
	w := pooledWire(t, nil)
	w.send(q("SET lock.fencing_token = 42"))
	if got := w.send(q("UPDATE t SET v = 1")); got != "WAIT" {
		t.Fatalf("pipelined: %s", got)
	}
	w.replies("CZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, literal42) {
		t.Fatalf("after the answer: %s", got)
	}
}

func TestPooledSetLocalIsReadInsteadOfTheTrackedToken(t *testing.T) {
	w := pooledWire(t, map[string]string{"lock.fencing_token": "42", "lock.resource": "r"})
	got := w.send(q("BEGIN; SET LOCAL lock.fencing_token = 5; UPDATE t SET v = 1"))
	got = got[:strings.LastIndex(got, "UPDATE t")]
	if !strings.Contains(got, "CALL fence.check('', 'r'") {
		t.Fatalf("SET LOCAL not read: %s", got)
	}
}

func TestPooledNoTrackedTokenKeepsTheGuardedRead(t *testing.T) {
	w := &wire{t: t, s: NewSession(&Config{Pooled: true, Analyzer: NewAnalyzer(10)}, nil)}
	w.s.Probe()
	w.replies("3123DC3Z", 'I') // a foreign value on the connection
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "guarded" {
		t.Fatalf("%s", got)
	}
}

func TestPooledExtendedSessionSetKeepsTheValueOffTheServer(t *testing.T) {
	w := pooledWire(t, nil)
	d := w.s.Client(parse("s1", "SET lock.fencing_token = 42"))
	if d.Replace == nil || strings.Contains(show(nil)+showOne(d.Replace), "42") {
		t.Fatalf("Parse not replaced: %+v", d)
	}
	w.send(bind("", "s1"))
	if got := w.send(exec("")); strings.Contains(got, "55Z05") {
		t.Fatalf("one-statement unit refused: %s", got)
	}
	w.send(syncMsg())
	w.replies("12CZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, literal42) {
		t.Fatalf("after the unit: %s", got)
	}
	// Re-executed inside a block, or second in its unit: refused.
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	w.send(bind("", "s1"))
	if got := w.send(exec("")); !strings.Contains(got, "~raise") {
		t.Fatalf("in a block: %s", got)
	}
}

// statementsAre fails t unless the gate no longer knows the statements
// gone and still knows those kept, after what.
func statementsAre(t *testing.T, w *wire, what string, gone, kept []string) {
	t.Helper()
	for _, name := range gone {
		if _, ok := w.s.PooledStatement(name); ok {
			t.Errorf("%s: %s still known", what, name)
		}
	}
	for _, name := range kept {
		if _, ok := w.s.PooledStatement(name); !ok {
			t.Errorf("%s: %s dropped", what, name)
		}
	}
}

// A client's SQL DEALLOCATE (psycopg 3.1 sends DEALLOCATE ALL after a
// rollback, and DEALLOCATE name to evict) drops its own protocol-level
// statements from the gate, and never reaches another client's on the
// shared connection: it goes upstream as a statement that does nothing.
func TestPooledDeallocateDropsOnlyTheClientsStatements(t *testing.T) {
	prepare := func(w *wire, name string) {
		t.Helper()
		w.s.Client(Msg{Type: 'P', Name: name, Text: "SELECT 1", Server: "fenceproxy_s" + name})
		w.send(syncMsg())
		w.replies("1Z", 'I')
		if server, ok := w.s.PooledStatement(name); !ok || server != "fenceproxy_s"+name {
			t.Fatalf("%s not prepared: %q %v", name, server, ok)
		}
	}
	for _, tc := range []struct {
		sql, upstream string
		gone, kept    []string
	}{
		{"DEALLOCATE s1", "Q(" + poolNoop + ")", []string{"s1"}, []string{"s2"}},
		{"deallocate prepare s1", "Q(" + poolNoop + ")", []string{"s1"}, []string{"s2"}},
		{"DEALLOCATE ALL", "Q(" + poolNoop + ")", []string{"s1", "s2"}, nil},
		{"SELECT 1; DEALLOCATE ALL", "Q(SELECT 1;" + poolNoop + ")", []string{"s1", "s2"}, nil},
		// Not the client's: as written, for the server's 26000.
		{"DEALLOCATE nosuch", "Q(DEALLOCATE nosuch)", nil, []string{"s1", "s2"}},
	} {
		w := pooledWire(t, nil)
		prepare(w, "s1")
		prepare(w, "s2")
		if got := w.send(q(tc.sql)); got != tc.upstream {
			t.Fatalf("%s: upstream %s, want %s", tc.sql, got, tc.upstream)
		}
		replies := strings.Repeat("C", strings.Count(tc.sql, ";")+1) + "Z"
		if strings.HasPrefix(tc.sql, "SELECT") {
			replies = "TDC" + replies[1:]
		}
		w.replies(replies, 'I')
		statementsAre(t, w, tc.sql, tc.gone, tc.kept)
	}
	// A failed Query drops nothing.
	w := pooledWire(t, nil)
	prepare(w, "s1")
	w.send(q("DEALLOCATE ALL"))
	w.replies("E{XX000}Z", 'I')
	if _, ok := w.s.PooledStatement("s1"); !ok {
		t.Error("s1 dropped by a DEALLOCATE ALL that failed")
	}
	// In the extended protocol (psycopg's): the Parse's text is replaced
	// as it is sent, and the Execute drops the statements.
	for _, tc := range []struct {
		sql, upstream string
		gone, kept    []string
	}{
		{"DEALLOCATE ALL", poolNoop, []string{"s1", "s2"}, nil},
		{"DEALLOCATE s1", poolNoop, []string{"s1"}, []string{"s2"}},
		{"DEALLOCATE nosuch", "", nil, []string{"s1", "s2"}}, // as written
	} {
		w = pooledWire(t, nil)
		prepare(w, "s1")
		prepare(w, "s2")
		d := w.s.Client(parse("", tc.sql))
		got := ""
		if p, ok := d.Replace.(*pgproto3.Parse); ok {
			got = p.Query
		}
		if got != tc.upstream || d.Fail != "" || d.Drop {
			t.Fatalf("extended %s: Parse sent as %q (%+v), want %q", tc.sql, got, d, tc.upstream)
		}
		w.send(bind("", ""))
		if got := w.send(exec("")); strings.Contains(got, "~raise") {
			t.Fatalf("extended %s: refused: %s", tc.sql, got)
		}
		w.send(syncMsg())
		w.replies("12CZ", 'I')
		statementsAre(t, w, "extended "+tc.sql, tc.gone, tc.kept)
	}
}

func TestPooledRefusesSessionStateThePoolCannotKeep(t *testing.T) {
	refused := []string{
		"LISTEN ch", "listen \"Ch\"",
		"PREPARE p AS SELECT 1", "EXECUTE p", "DISCARD ALL", "DISCARD PLANS",
		"DECLARE c CURSOR WITH HOLD FOR SELECT 1",
		"CREATE TEMP TABLE x (a int)", "CREATE TEMPORARY TABLE x AS SELECT 1", "CREATE TABLE pg_temp.x (a int)",
		"SELECT 1 INTO TEMP x", "CREATE TEMP SEQUENCE s", "CREATE TEMP VIEW v AS SELECT 1",
		"CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"EXPLAIN ANALYZE CREATE TEMP TABLE x AS SELECT 1",
		"SET SESSION AUTHORIZATION u", "SET ROLE r", "LOAD 'x'",
		"SET search_path = a", "SET work_mem = '1MB'", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
		"SELECT set_config('work_mem', '1MB', false)",
		"SELECT 1; LISTEN ch", "UPDATE pg_settings SET setting = 'x' WHERE name = 'work_mem'",
		"CREATE TABLE AS_x AS EXECUTE p",
	}
	for _, sql := range refused {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") || !strings.Contains(got, "not supported in transaction pool mode") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	allowed := []string{
		"SET LOCAL work_mem = '1MB'", "SET application_name = 'a'", "SET TIME ZONE 'UTC'", "SET NAMES 'UTF8'",
		"SET DateStyle = ISO", "RESET work_mem", "UNLISTEN *", "SELECT set_config('work_mem', '1MB', true)",
		"BEGIN; CREATE TEMP TABLE x (a int) ON COMMIT DROP; COMMIT", "DECLARE c CURSOR FOR SELECT 1", "SET TRANSACTION READ ONLY",
		"BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '00000003-0000001B-1'",
	}
	for _, sql := range allowed {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); strings.Contains(got, "0A000") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	// Extended protocol, named statement: refused at its Execute.
	w := pooledWire(t, nil)
	w.send(parse("n", "LISTEN ch"))
	w.send(bind("", "n"))
	if got := w.send(exec("")); !strings.Contains(got, "~raise") {
		t.Fatalf("extended LISTEN: %s", got)
	}
	// Without Pooled, unchanged.
	w = newWire(t, nil, false)
	if got := w.send(q("LISTEN ch")); got != "Q(LISTEN ch)" {
		t.Fatalf("session mode: %s", got)
	}
}

// Hostile clients: what a client may try to get a stale or foreign token
// used, a session-level value onto the shared connection, or session state
// past the pool.

func TestPooledStartupTokenFollowsTheServersOrder(t *testing.T) {
	// The server reads options first, then the parameters of their own.
	for _, c := range []struct {
		params map[string]string
		want   Tracked
	}{
		{map[string]string{"lock.fencing_token": "1", "options": "-c lock.fencing_token=2"}, Tracked{Token: 1}},
		{map[string]string{"lock.fencing_token": "5", "options": "-c lock.fencing_token="}, Tracked{Token: 5}},
		{map[string]string{"lock.resource": "a", "options": "--lock.resource=b -c lock.fencing_token=3"}, Tracked{Token: 3, Resource: "a"}},
		{map[string]string{"options": "-clock.fencing_token=3 -c lock.fencing_token=4"}, Tracked{Token: 4}},
		{map[string]string{"options": "-c LOCK.Fencing-Token=3"}, Tracked{Token: 3}},
		{map[string]string{"options": `-c lock.resource=a\ b`}, Tracked{Resource: "a b"}},
	} {
		for i := 0; i < 20; i++ { // map order varies between runs
			tr, rest, err := PooledStartup(c.params)
			if err != nil || tr != c.want || strings.Contains(rest["options"], "lock") {
				t.Fatalf("%q: tracked %+v rest %q %v, want %+v", c.params, tr, rest, err, c.want)
			}
		}
	}
}

func TestPooledStartupRefusesHiddenOrAmbiguousFencingSettings(t *testing.T) {
	for _, p := range []map[string]string{
		{"lock.fencing_token": "1", "LOCK.FENCING_TOKEN": "2"}, // which one the server reads last is the packet's order
		{"lock.resource": "a", "Lock.Resource": "b"},
		{"options": "-c lock.fencing_token"},                     // no value
		{"options": "-ec lock.fencing_token=3"},                  // getopt's grouped switches
		{"options": "--lock.resource"},                           // no value
		{"options": "---lock.fencing_token=3"},                   // not the setting's name
		{"options": "-c lock.fencing_token=0"},                   // not a token
		{"options": "-c lock.fencing_token=-1"},                  // not a token
		{"options": "-c lock.fencing_token=9223372036854775808"}, // overflow
		{"lock.fencing_token": "1.5"},
	} {
		if _, _, err := PooledStartup(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestPooledSessionSetOfAnyValueFormNeverReachesTheServer(t *testing.T) {
	for _, sql := range []string{
		`SET "LOCK"."FENCING_TOKEN" = 42`,
		`SET "lock.fencing_token" = 42`,
		`SET U&"lock".U&"fencing\005ftoken" = 42`,
		`SET lock.fencing_token = U&'\0034\0032'`,
		`SET SESSION lock.fencing_token = '42'`,
		`SET lock.fencing_token = 42;`,
		`;SET lock.fencing_token = 42`,
		`SET lock.fencing_token = 42 /* x */ ;; `,
		`SET lock.resource = 'a''); SELECT 42; --'`,
	} {
		w := pooledWire(t, nil)
		got := w.send(q(sql))
		if strings.Contains(got, "42") || !strings.Contains(got, "TO DEFAULT") {
			t.Errorf("%s: upstream %s", sql, got)
		}
	}
}

func TestPooledSessionSetOfABadValueIsRefusedAndKeepsNothing(t *testing.T) {
	for _, c := range []struct{ sql, code string }{
		{"SET lock.fencing_token = 0", "22023"},
		{"SET lock.fencing_token = -3", "22023"},
		{"SET lock.fencing_token = 99999999999999999999", "22023"},
		{"SET lock.fencing_token = 1.5", "22023"},
		{"SET lock.fencing_token = on", "22023"},
		{"SET lock.fencing_token = 42, 43", "55Z05"}, // a list
		{"SET lock.fencing_token FROM CURRENT", "55Z05"},
		{"SET lock.fencing_token = 42; SET lock.fencing_token = 43", "55Z05"},
		{"BEGIN; SET lock.fencing_token = 42; COMMIT", "55Z05"},
		{"SET lock.fencing_token = 42; ROLLBACK", "55Z05"},
		{`SET U&"lock"."fencing\005ftoken" = 42`, "0A000"},
	} {
		w := pooledWire(t, map[string]string{"lock.fencing_token": "7"})
		if got := w.send(q(c.sql)); !strings.Contains(got, c.code) {
			t.Errorf("%s: %s, want %s", c.sql, got, c.code)
		}
		w.replies("EZ", 'I')
		if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('7', ") {
			t.Errorf("%s: the tracked token changed: %s", c.sql, got)
		}
	}
}

func TestPooledExtendedSessionSetSkippedAfterAnErrorKeepsTheOldToken(t *testing.T) {
	// The Bind fails and the client flushes: the server skips the Execute.
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	w.send(parse("s1", "SET lock.fencing_token = 42"))
	w.send(bind("", "s1"))
	w.send(Msg{Type: 'H'})
	w.replies("1E", 'I')
	w.send(exec(""))
	w.send(syncMsg())
	w.replies("Z", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('5', ") {
		t.Fatalf("skipped SET kept: %s", got)
	}
	// The SET ran, a later message of its unit failed: rolled back.
	w = pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	w.send(parse("", "SET lock.fencing_token = 42"))
	w.send(bind("", ""))
	w.send(exec(""))
	w.send(parse("", "SELEC 1"))
	w.send(syncMsg())
	w.replies("12CEZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('5', ") {
		t.Fatalf("rolled-back SET kept: %s", got)
	}
}

func TestPooledNamedSessionSetRunsAgainAndIsReprepared(t *testing.T) {
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	if got := w.send(parse("s1", "SET lock.fencing_token = 42")); strings.Contains(got, "42") {
		t.Fatalf("Parse upstream %s", got)
	}
	for _, replies := range []string{"12CZ", "2CZ"} {
		w.send(bind("", "s1"))
		w.send(exec(""))
		w.send(syncMsg())
		w.replies(replies, 'I')
	}
	w.send(Msg{Type: 'C', Object: 'S', Name: "s1"})
	if got := w.send(parse("s1", "SET lock.fencing_token = 43")); strings.Contains(got, "43") {
		t.Fatalf("re-Parse upstream %s", got)
	}
	w.send(syncMsg())
	w.replies("31Z", 'I')
	w.send(bind("", "s1"))
	w.send(exec(""))
	w.send(syncMsg())
	w.replies("2CZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('43', ") {
		t.Fatalf("re-prepared SET: %s", got)
	}
}

func TestPooledUnitsPipelinedBehindASessionResetWait(t *testing.T) {
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	w.send(q("RESET lock.fencing_token"))
	for _, m := range []Msg{q("UPDATE t SET v = 1"), parse("", "UPDATE t SET v = 1"), bind("", ""), exec(""), {Type: 'F'}} {
		if got := w.send(m); got != "WAIT" {
			t.Fatalf("%c behind an unanswered RESET: %s", m.Type, got)
		}
	}
}

func TestPooledTransactionLocalSettingsNeverReadTheConnections(t *testing.T) {
	// What the transaction left or undid itself is the connection's
	// value, maybe another client's: read only guarded.
	for _, sql := range []string{
		"BEGIN; SET LOCAL lock.fencing_token TO DEFAULT; UPDATE t SET v = 1",
		"BEGIN; SAVEPOINT a; SET LOCAL lock.fencing_token = 5; ROLLBACK TO a; UPDATE t SET v = 1",
		"BEGIN; SET LOCAL lock.fencing_token = 5; COMMIT; UPDATE t SET v = 1",
	} {
		w := pooledWire(t, map[string]string{"lock.resource": "r"})
		if got := w.send(q(sql)); lastCheck(got) != "guarded" {
			t.Errorf("%s: %s", sql, got)
		}
	}
	// Once COMMIT is answered the SET LOCAL is gone, and the write goes
	// unchecked (TestTokenSetForATransactionEndsWithIt): nothing is read.
}

func TestPooledRefusesEveryMemberOfThePoolUnsafeClass(t *testing.T) {
	for _, sql := range []string{
		"EXPLAIN EXECUTE p", "EXPLAIN (COSTS OFF) EXECUTE p(1)", "EXPLAIN ANALYZE EXECUTE p",
		"EXPLAIN ANALYZE SELECT set_config('work_mem', '1', false)", "EXPLAIN ANALYZE SELECT 1 INTO TEMP x",
		"EXPLAIN (ANALYZE) DECLARE c CURSOR WITH HOLD FOR SELECT 1",
		"CREATE TYPE pg_temp.e AS ENUM ('a')", "CREATE TYPE pg_temp.c AS (a int)", "CREATE TYPE pg_temp.r AS RANGE (subtype = int4)",
		"CREATE DOMAIN pg_temp.d AS int", "CREATE TYPE pg_temp.b", "CREATE OPERATOR pg_temp.=== (function = f, leftarg = int, rightarg = int)",
		"CREATE AGGREGATE pg_temp.a (int) (sfunc = int4pl, stype = int)", "CREATE COLLATION pg_temp.c (locale = 'C')",
		"CREATE CONVERSION pg_temp.c FOR 'LATIN1' TO 'UTF8' FROM iso8859_1_to_utf8",
		"CREATE OPERATOR FAMILY pg_temp.f USING btree", "CREATE OPERATOR CLASS pg_temp.c FOR TYPE int USING btree AS OPERATOR 1 <",
		"CREATE TEXT SEARCH CONFIGURATION pg_temp.c (COPY = simple)", "CREATE STATISTICS pg_temp.s ON a, b FROM t",
		"CREATE TABLE pg_temp_3.x (a int)", "CREATE TEMP TABLE x (a int) ON COMMIT DELETE ROWS",
		"CREATE PROCEDURE pg_temp.p() LANGUAGE sql AS 'SELECT 1'", "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
		"CREATE FUNCTION db.pg_temp.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"SELECT set_config('work_mem', is_local => false, new_value => 'true')",
		"SELECT * FROM set_config('work_mem', '1', false)", `SELECT "set_config"('work_mem', '1', false)`,
		"SELECT set_config(VARIADIC ARRAY['work_mem', '1'])",
		"SELECT set_config(setting_name => 'work_mem', new_value => '1', is_local => false)",
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	for _, sql := range []string{"EXPLAIN SELECT 1", "CREATE TYPE e AS ENUM ('a')", "CREATE DOMAIN public.d AS int", `CREATE TYPE "PG_TEMP".e AS ENUM ('a')`} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); strings.Contains(got, "0A000") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	w := newWire(t, nil, false)
	if got := w.send(q("EXPLAIN EXECUTE p")); got != "Q(EXPLAIN EXECUTE p)" {
		t.Fatalf("session mode: %s", got)
	}
}

func TestPooledRefusesTemporaryObjectsByAnyRoute(t *testing.T) {
	for _, sql := range []string{
		"SELECT 1 INTO TEMP x UNION SELECT 2", // the leftmost SELECT's INTO
		"SELECT 1 INTO TEMP x UNION ALL SELECT 2 EXCEPT SELECT 3",
		"(SELECT 1 INTO TEMP x)", "WITH a AS (SELECT 1) SELECT * INTO TEMP x FROM a",
		// pg_temp first in search_path: an unqualified CREATE makes a temporary object.
		"BEGIN; SET LOCAL search_path = pg_temp; CREATE TABLE x (a int); COMMIT",
		"SET LOCAL search_path = public, pg_temp_3",
		"BEGIN; SELECT set_config('search_path', 'pg_temp', true); CREATE TABLE x (a int); COMMIT",
		"SELECT set_config('search_path', current_user, true)", // a value that is not a constant
		"SELECT set_config('SEARCH_PATH', 'x, PG_TEMP', true)",
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") || !strings.Contains(got, "transaction pool mode") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	for _, sql := range []string{
		"SELECT 1 UNION SELECT 2", "SET LOCAL search_path = public, \"$user\"", "SET LOCAL search_path TO DEFAULT",
		"SELECT set_config('search_path', 'public', true)",
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); strings.Contains(got, "0A000") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	w := newWire(t, nil, false)
	if got := w.send(q("SET LOCAL search_path = pg_temp")); got != "Q(SET LOCAL search_path = pg_temp)" {
		t.Fatalf("session mode: %s", got)
	}
}

func TestPooledResetGoesBackToTheStartupValueAsTheServersDoes(t *testing.T) {
	// PostgreSQL's RESET (and SET … TO DEFAULT) returns a setting the
	// startup packet gave to that value: dropping the token instead would
	// let the client's writes run unfenced.
	for _, sql := range []string{"RESET lock.fencing_token", "SET lock.fencing_token TO DEFAULT", "RESET ALL"} {
		w := pooledWire(t, map[string]string{"options": "-c lock.fencing_token=42 -c lock.resource=r"})
		w.send(q("SET lock.fencing_token = 50"))
		w.replies("CZ", 'I')
		w.send(q("SET lock.resource = s"))
		w.replies("CZ", 'I')
		w.send(q(sql))
		w.replies("CZ", 'I')
		want := "CALL fence.check('42', 's'"
		if sql == "RESET ALL" {
			want = "CALL fence.check('42', 'r'"
		}
		if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %s", sql, got, want)
		}
	}
}

func TestPooledRefusesSessionLevelAdvisoryLocks(t *testing.T) {
	for _, sql := range []string{
		"SELECT pg_advisory_lock(1)", "SELECT pg_catalog.PG_TRY_ADVISORY_LOCK(1, 2)", "SELECT pg_advisory_lock_shared(1)",
		"SELECT * FROM t WHERE pg_try_advisory_lock_shared(id)",
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	// Transaction locks, and unlocks: no lock of the session's can be taken
	// through the proxy, so an unlock finds none (a pool's reset query).
	for _, sql := range []string{"SELECT pg_advisory_xact_lock(1)", "SELECT pg_try_advisory_xact_lock_shared(1)",
		"SELECT pg_advisory_unlock(1)", "SELECT pg_advisory_unlock_shared(1)", "SELECT pg_advisory_unlock_all()",
		"CREATE FUNCTION f() RETURNS void LANGUAGE sql AS 'SELECT pg_advisory_lock(1)'"} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); strings.Contains(got, "0A000") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	w := newWire(t, nil, false)
	if got := w.send(q("SELECT pg_advisory_lock(1)")); got != "Q(SELECT pg_advisory_lock(1))" {
		t.Fatalf("session mode: %s", got)
	}
}

func TestPooledLongLiteralInALargeTextIsNeverTrackedOrTrusted(t *testing.T) {
	// A text over 16 KiB is parsed with long literals shortened (reduce.go):
	// the shortened stand-in must not become the tracked resource, nor pass
	// for a search_path without pg_temp.
	long := strings.Repeat("r", 300)
	pad := " /* " + strings.Repeat("p", 17000) + " */"
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5", "lock.resource": "r"})
	if got := w.send(q("SET lock.resource = '" + long + "'" + pad)); !strings.Contains(got, "55Z05") {
		t.Fatalf("long resource: %.200s", got)
	}
	w.replies("EZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('5', 'r'") {
		t.Fatalf("after: %.200s", got)
	}
	for _, sql := range []string{
		"SET LOCAL search_path = '" + long + ", pg_temp'" + pad,
		"SELECT set_config('search_path', '" + long + ", pg_temp', true)" + pad,
	} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") {
			t.Errorf("%.60s: not refused: %.200s", sql, got)
		}
	}
}

func TestPooledErrorBetweenMessagesUndoesTheOpenUnitsSessionSet(t *testing.T) {
	// An error the server sends on its own (statement_timeout between
	// messages) aborts the open implicit transaction, the SET in it too.
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	w.send(parse("", "SET lock.fencing_token = 42"))
	w.send(bind("", ""))
	w.send(exec(""))
	w.send(Msg{Type: 'H'})
	w.replies("12C", 'I')
	w.replies("E{57014}", 'I')
	w.send(syncMsg())
	w.replies("Z", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('5', ") {
		t.Fatalf("rolled-back SET kept: %s", got)
	}
}

func TestPooledSessionSetUnderRiskyLexingIsRefusedOrReplacedWhole(t *testing.T) {
	// standard_conforming_strings off: the server may end a string where
	// the parser did not, and run a SET the gate did not see.
	for _, sql := range []string{
		`SELECT 'a\' , ' ; SET lock.fencing_token = 42; --'`,
		`SET lock.resource = 'a\' , ' ; SET lock.fencing_token = 42; --'`,
		`SET lock.fencing_token = E'4\062'`,
	} {
		w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
		w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") || strings.Contains(got, "TO DEFAULT") {
			t.Errorf("%s: %s", sql, got)
		}
		w.replies("EZ", 'I')
		if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "CALL fence.check('5', ") {
			t.Errorf("%s: tracked changed: %s", sql, got)
		}
	}
	w := pooledWire(t, nil)
	w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
	if got := w.send(q("SET lock.fencing_token = 42")); got != `Q(SET "lock"."fencing_token" TO DEFAULT)` {
		t.Fatalf("plain SET under standard_conforming_strings off: %s", got)
	}
	// A multibyte encoding whose characters may hold a quote's or a
	// backslash's byte.
	w = pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "SJIS"})
	if got := w.send(q("SET lock.resource = '\x95\x5c'")); !strings.Contains(got, "0A000") {
		t.Fatalf("SJIS: %s", got)
	}
	// A resource with a backslash, later read under standard_conforming_strings off.
	w = pooledWire(t, map[string]string{"lock.resource": `a\' || pg_sleep(1) || '`, "lock.fencing_token": "5"})
	w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, `CALL fence.check('5', $q$a\' || pg_sleep(1) || '$q$`) {
		t.Fatalf("resource literal: %s", got)
	}
}

func TestPooledFastPathCallIsOpaqueCode(t *testing.T) {
	// A FunctionCall names its function by OID, which the gate does not
	// see (set_config's among them): with a tracked token it is refused
	// outside a checked transaction; without one it runs as opaque code,
	// probed after, and what it left on the connection is never read.
	w := pooledWire(t, map[string]string{"lock.fencing_token": "5"})
	if got := w.send(Msg{Type: 'F'}); !strings.Contains(got, "0A000") {
		t.Fatalf("with a tracked token: %s", got)
	}
	w = pooledWire(t, nil)
	if got := w.send(Msg{Type: 'F'}); !strings.Contains(got, "~probe") {
		t.Fatalf("without: %s", got)
	}
	w.replies("VZ", 'I')
	w.replies("3123DC3Z", 'I') // the probe: a value on the connection
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "guarded" {
		t.Fatalf("after: %s", got)
	}
}

func TestPooledNamedSessionSetAfterOpaqueCodeIsRefused(t *testing.T) {
	// After opaque code the proxy no longer trusts what a name runs; run
	// as opaque code, the server's SET … TO DEFAULT would answer "SET"
	// while the tracked token stays unset: the client's writes unfenced.
	w := pooledWire(t, nil)
	w.send(parse("s1", "SET lock.fencing_token = 42"))
	w.send(syncMsg())
	w.replies("1Z", 'I')
	w.send(Msg{Type: 'F'})
	w.replies("VZ", 'I')
	w.replies("3123C3Z", 'I') // the probe after it
	w.send(bind("", "s1"))
	if got := w.send(exec("")); !strings.Contains(got, "~raise") {
		t.Fatalf("opaque re-run of a session SET: %s", got)
	}
}

func TestPooledSessionSetOfExtraFloatDigitsToAShortestExactValuePasses(t *testing.T) {
	// pgjdbc sends SET extra_float_digits = 3 after every connect.
	for _, sql := range []string{"SET extra_float_digits = 3", "SET extra_float_digits TO '2'", "set EXTRA_FLOAT_DIGITS = 1", "SET SESSION extra_float_digits = 3"} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); got != "Q("+sql+")" {
			t.Errorf("%s: %s", sql, got)
		}
	}
	// Other values print floats differently (0 and below round them), or
	// are not known until run.
	for _, sql := range []string{"SET extra_float_digits = 0", "SET extra_float_digits = -15", "SET extra_float_digits = 4", "SET extra_float_digits FROM CURRENT"} {
		w := pooledWire(t, nil)
		if got := w.send(q(sql)); !strings.Contains(got, "0A000") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
}

// set_config('lock.…', $1, true) sets the setting for the transaction from
// a parameter. Bound to NULL, the server would reset it to the shared
// connection's default, not to the client's startup value: the proxy reads
// the parameters of the Bind sent with the Execute (before the same Sync)
// and lets it set the token only when each such parameter has a value and
// was given no type but text by the Parse (another type would make the
// server call another set_config, a user's, or a user's cast to text); a
// NULL one, a portal bound in an earlier unit, a Bind pgwire did not hold
// whole, or SQL EXECUTE are refused (55Z05, hint: a literal).
func TestPooledSetConfigOfAParameterNeedsItsValueInTheBind(t *testing.T) {
	val := []byte{0, 0, 0, 2, 0, 0, 0, 2, '4', '2', 0, 0, 0, 1, 'r', 0, 0}          // $1 '42', $2 'r'
	null2 := []byte{0, 0, 0, 2, 0, 0, 0, 2, '4', '2', 0xff, 0xff, 0xff, 0xff, 0, 0} // $1 '42', $2 NULL
	null1 := []byte{0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'r', 0, 0}      // $1 NULL, $2 'r'
	for _, c := range []struct {
		name, sql string
		args      []byte
		later     bool // Execute in a unit after the Bind's
		refused   bool
		types     []uint32 // the Parse's parameter types
	}{
		{"typed text and none", "SELECT set_config('lock.fencing_token', $1, true), set_config('lock.resource', $2, true)", val, false, false, []uint32{25, 0}},
		{"typed int4", "SELECT set_config('lock.fencing_token', $1, true), set_config('lock.resource', $2, true)", val, false, true, []uint32{23, 25}},
		{"typed varchar", "SELECT set_config('lock.fencing_token', $1::text, true)", val, false, true, []uint32{1043}},
		{"both values", "SELECT set_config('lock.fencing_token', $1, true), pg_catalog.set_config('lock.resource', $2::text, true)", val, false, false, nil},
		{"the token NULL", "SELECT set_config('lock.fencing_token', $1, true), set_config('lock.resource', $2, true)", null1, false, true, nil},
		{"the resource NULL", "SELECT set_config('lock.fencing_token', $1, true), set_config('lock.resource', $2, true)", null2, false, true, nil},
		{"a NULL parameter of another setting", "SELECT set_config('application_name', $2, true), set_config('lock.fencing_token', $1, true)", null2, false, false, nil},
		{"parameters not seen", "SELECT set_config('lock.fencing_token', $1, true)", nil, false, true, nil},
		{"bound in an earlier unit", "SELECT set_config('lock.fencing_token', $1, true)", val, true, true, nil},
		{"malformed", "SELECT set_config('lock.fencing_token', $1, true)", []byte{0, 0, 0, 1, 0, 0, 0, 9, '4'}, false, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := pooledBlock(t)
			pm := parse("p", c.sql)
			pm.ParamTypes = c.types
			got := w.send(pm)
			b := bind("", "p")
			b.Args = c.args
			got += " " + w.send(b)
			if c.later {
				got += " " + w.send(syncMsg())
				w.replies(successFor(got, false), 'T')
			}
			got = w.send(exec(""))
			if refused := strings.Contains(got, "~raise"); refused != c.refused {
				t.Errorf("refused %v, want %v: %s", refused, c.refused, got)
			}
		})
	}
	// SQL EXECUTE of such a statement: its arguments are text the proxy
	// does not evaluate.
	w := pooledWire(t, nil)
	w.send(q("PREPARE s AS SELECT set_config('lock.fencing_token', $1, true)"))
	w.replies("CZ", 'I')
	if got := w.send(q("BEGIN; EXECUTE s('42')")); !strings.Contains(got, "RAISE") {
		t.Errorf("SQL EXECUTE not refused: %s", got)
	}
	// A parameter for another setting's value is no concern of the gate.
	w = pooledWire(t, nil)
	w.send(parse("", "SELECT set_config('application_name', $1, true)"))
	if got := w.send(bind("", "")) + " " + w.send(exec("")); strings.Contains(got, "~raise") {
		t.Errorf("set_config of application_name refused: %s", got)
	}
}

// The tracked resource goes to each check as text, which the server reads
// in the client_encoding in force: a name with non-ASCII bytes written
// under another encoding (a SET before SET client_encoding; startup
// options, which PostgreSQL keeps as sent) would be checked as another
// resource. Such a check is refused; under UTF8 throughout it runs.
func TestPooledTrackedResourceIsCheckedOnlyInTheEncodingItWasWritten(t *testing.T) {
	latin1 := func(w *wire) {
		w.send(q("SET client_encoding = 'LATIN1'"))
		w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "LATIN1"})
		w.replies("CZ", 'I')
	}
	setResource := func(w *wire) {
		w.send(q("SET lock.resource = 'é'"))
		w.replies("CZ", 'I')
	}
	for _, c := range []struct {
		name, options string
		steps         []func(*wire)
		write, want   string // want: a refusal's SQLSTATE, or the check
	}{
		{"set under UTF8, checked under LATIN1", "", []func(*wire){setResource, latin1}, "UPDATE t SET v = 1", "0A000"},
		{"startup options, checked under LATIN1", "-c lock.resource=é", []func(*wire){latin1}, "UPDATE t SET v = 1", "0A000"},
		{"UTF8 throughout", "", []func(*wire){setResource}, "UPDATE t SET v = 1", "fence.check('42', 'é'"},
		{"the transaction's own resource", "", []func(*wire){setResource, latin1}, "/* resource=r */ UPDATE t SET v = 1", "fence.check('42', 'r'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := pooledWire(t, map[string]string{"options": "-c lock.fencing_token=42 " + c.options})
			for _, step := range c.steps {
				step(w)
			}
			if got := w.send(q(c.write)); !strings.Contains(got, c.want) {
				t.Errorf("want %s: %s", c.want, got)
			}
		})
	}
}

// SET LOCAL lock.… TO DEFAULT goes back, on the client's own server, to
// its startup value for the rest of the transaction; on a shared connection
// to the connection's default. The proxy refuses it rather than check
// under either.
func TestPooledSetLocalToDefaultIsRefused(t *testing.T) {
	for _, sql := range []string{"SET LOCAL lock.fencing_token TO DEFAULT", "SET LOCAL lock.resource = DEFAULT"} {
		w := pooledWire(t, map[string]string{"lock.fencing_token": "7", "lock.resource": "r"})
		w.send(q("SET lock.fencing_token = 42"))
		w.replies("CZ", 'I')
		if got := w.send(q("BEGIN; " + sql + "; UPDATE t SET v = 1")); !strings.Contains(got, "55Z05") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
}

// pooledBlock returns a session in transaction pool mode whose startup
// options carry token 41 and resource r, inside a transaction block.
func pooledBlock(t *testing.T) *wire {
	w := pooledWire(t, map[string]string{"options": "-c lock.fencing_token=41 -c lock.resource=r"})
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	return w
}

// In transaction pool mode too, an Execute of the unnamed portal a failed
// Query left in a failed block never reaches the server connection (see
// failed_block_portals.txt): the proxy answers 25P02.
func TestPooledExecuteOfAFailedBlocksPortalIsAnsweredByTheProxy(t *testing.T) {
	w := pooledBlock(t)
	w.send(q("DEALLOCATE nosuch"))
	w.replies("E{26000}Z", 'E')
	if got := w.send(exec("")); !strings.Contains(got, "E(~raise)") || strings.Contains(got, "E()") {
		t.Fatalf("Execute of the failed portal: %s", got)
	}
	w.send(syncMsg())
	if seen := w.replies("3E{25P02}Z", 'E'); seen != "E25P02Z" {
		t.Errorf("the client saw %q, want E25P02Z", seen)
	}
}

// A set_config of a fencing setting sets it for the transaction only when
// it is PostgreSQL's own and its name and value are constants or parameters
// of PostgreSQL's own text: a cast to a text type of the user's
// ('…'::alice.text, a quoted "TEXT") runs the user's cast, or makes the
// server call another set_config, and a quoted "SET_CONFIG" is a function
// of the user's. Such a statement is refused, and the write after it is
// checked under the session's token, never the server's setting.
func TestPooledSetConfigThroughAUsersTextTypeIsNotTrusted(t *testing.T) {
	for _, sql := range []string{
		"SELECT set_config('lock.fencing_token'::alice.text, '99', true)",
		"SELECT set_config('lock.fencing_token', '99'::\"TEXT\", true)",
		"SELECT set_config('lock.fencing_token', $1::alice.text, true)",
		"SELECT \"SET_CONFIG\"('lock.fencing_token', '99', true)",
		"SELECT pg_catalog.\"Set_Config\"('lock.fencing_token', $1, true)",
	} {
		w := pooledBlock(t)
		w.send(parse("", sql))
		b := bind("", "")
		b.Args = []byte{0, 0, 0, 1, 0, 0, 0, 2, '9', '9', 0, 0}
		if got := w.send(b) + " " + w.send(exec("")); !strings.Contains(got, "~raise") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	w := pooledBlock(t)
	w.send(q("SELECT set_config('lock.fencing_token', '99'::pg_catalog.text, true)"))
	w.replies("CCZ", 'T')
	if got := w.send(q("UPDATE t SET v = 1")); !strings.Contains(got, "fence.check('', 'r'") {
		t.Errorf("pg_catalog.text: the write does not read the transaction's setting: %s", got)
	}
}

// In transaction pool mode pgwire prepares a client's statement again on
// each server connection that lacks it, under the client's lexing settings
// of that lending: a text whose reading depends on them (a backslash, a
// non-ASCII byte) is refused once they have changed since its Parse, even
// when they are back to its Parse's values by the time it runs (SET LOCAL
// in the lending's transaction). A text they cannot change runs as before.
func TestPooledStatementReadUnderChangedLexingIsRefused(t *testing.T) {
	// Under standard_conforming_strings on: three set_config calls, a
	// hand-over. Under off: set_config('x.a', …), then public.w(), which
	// writes.
	const risky = `SELECT pg_catalog.set_config('lock.fencing_token', '41', true), pg_catalog.set_config('x.a', 'v\', true), pg_catalog.set_config(', true) AS a, public.w() AS b --', 'w', true)`
	for _, tc := range []struct {
		name, text string
		refused    bool
	}{
		{"backslash", risky, true},
		{"non-ASCII", "UPDATE t SET v = 'é'", true},
		{"plain", "UPDATE t SET v = 1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := pooledWire(t, map[string]string{"lock.fencing_token": "41", "lock.resource": "r"})
			w.s.Client(Msg{Type: 'P', Name: "s", Text: tc.text, Server: "fenceproxy_s1"})
			w.send(syncMsg())
			w.replies("1Z", 'I')
			for _, v := range []string{"off", "on"} { // a session SET, then a SET LOCAL in the next transaction
				w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: v})
			}
			got := w.send(bind("", "s")) + " " + w.send(exec(""))
			if refused := strings.Contains(got, "~raise"); refused != tc.refused {
				t.Fatalf("Execute after standard_conforming_strings went off and back on: upstream %s, refused %v, want %v", got, refused, tc.refused)
			}
			if !tc.refused && !strings.Contains(got, "~check") {
				t.Fatalf("Execute not checked: %s", got)
			}
		})
	}
}
