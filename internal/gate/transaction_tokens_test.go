package gate

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Under token_scope: transaction (Config.TransactionTokens) a check reads
// lock.fencing_token and lock.resource only where its own transaction set
// them; elsewhere it is guarded: it refuses when the server connection
// carries a value (a transaction pooler may have lent it from another
// client). These transcripts pin down where trust starts and ends.

// guarded is what a guarded check's argument starts with: it refuses a
// setting its transaction did not set (fencestore.AppendGuardedCall).
const guarded = "CASE WHEN pg_catalog.current_setting("

// lastCheck returns the form of the last check in upstream: "guarded" when
// one of its arguments is a guard.
func lastCheck(upstream string) string {
	i := strings.LastIndex(upstream, "fence.check(")
	if i < 0 {
		return "none"
	}
	args := upstream[i:]
	if end := strings.Index(args, ", false, true)"); end >= 0 {
		args = args[:end]
	}
	if strings.Contains(args, guarded) {
		return "guarded"
	}
	return "plain"
}

func txnTokensWire(t *testing.T, token bool) *wire {
	return newWire(t, &Config{TransactionTokens: true}, token)
}

func TestTransactionTokensTrustOnlyWhatTheTransactionSet(t *testing.T) {
	tests := []struct {
		name, query, want string
	}{
		// Both set in the transaction: the check reads them as they are.
		{"SET LOCAL of both", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; UPDATE t SET v = 1", "plain"},
		{"set_config with is_local true", "BEGIN; SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', 'on'); UPDATE t SET v = 1", "plain"},
		// The resource would come from the connection: guarded.
		{"SET LOCAL of the token only", "BEGIN; SET LOCAL lock.fencing_token = 4; UPDATE t SET v = 1", "guarded"},
		{"a comment token without resource", "/* fencing_token=4 */ UPDATE t SET v = 1", "guarded"},
		// A comment naming both reads neither setting.
		{"a comment with token and resource", "/* fencing_token=4 resource=r */ UPDATE t SET v = 1", "plain"},
		// What ends the transaction, or may undo what it set, ends trust.
		{"after COMMIT", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; COMMIT; BEGIN; UPDATE t SET v = 1", "guarded"},
		{"after ROLLBACK TO SAVEPOINT", "BEGIN; SAVEPOINT a; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; ROLLBACK TO a; UPDATE t SET v = 1", "guarded"},
		{"after RESET", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; RESET lock.resource; UPDATE t SET v = 1", "guarded"},
		{"after code the proxy cannot see", "BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; DO $$BEGIN END$$; UPDATE t SET v = 1", "guarded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := txnTokensWire(t, false)
			got := w.send(q(tt.query))
			// The last check before the client's UPDATE decides.
			last := lastCheck(got[:strings.LastIndex(got, "UPDATE t")])
			if f := last; f != tt.want {
				t.Fatalf("check before the UPDATE is %s, want %s\nupstream %s", f, tt.want, got)
			}
		})
	}
}

// A session-level SET or set_config of lock.* is refused with 55Z05 before
// it runs; one for the transaction, and a RESET, run as sent.
func TestTransactionTokensRefuseSessionLevelSettings(t *testing.T) {
	refused := []string{
		"SET lock.fencing_token = 4",
		"SET SESSION lock.resource = 'r'",
		"SELECT pg_catalog.set_config('lock.fencing_token', '4', false)",
		"SELECT set_config('lock.resource', 'r', $1)",
		"SELECT set_config(name, 'r', true) FROM settings",
		"SET lock.fencing_token FROM CURRENT",
	}
	for _, sql := range refused {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); !strings.Contains(got, "ERRCODE = '55Z05'") {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	allowed := []string{
		"SET LOCAL lock.fencing_token = 4",
		"RESET lock.fencing_token",
		"RESET ALL",
		"SET lock.resource TO DEFAULT",
		"SELECT pg_catalog.set_config('lock.fencing_token', '4', true)",
	}
	for _, sql := range allowed {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); strings.Contains(got, "55Z05") {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
	// In the default scope the same statements run.
	w := newWire(t, nil, false)
	if got := w.send(q("SET lock.fencing_token = 4")); got != "Q(SET lock.fencing_token = 4)" {
		t.Errorf("session scope: %s", got)
	}
}

// A unit sent before the server answered one that set the settings for its
// transaction waits for that answer: whether the transaction is still open
// (and the settings still its own) is the server's to say. Once it said so,
// the check reads them.
func TestTransactionTokensWaitForTheBlockToBeConfirmed(t *testing.T) {
	w := txnTokensWire(t, false)
	w.send(q("BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'"))
	if got := w.send(q("UPDATE t SET v = 1")); got != "WAIT" {
		t.Fatalf("pipelined unit: %s, want WAIT", got)
	}
	w.replies("CCCZ", 'T')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "plain" {
		t.Fatalf("inside the confirmed block: %s", got)
	}
	w.replies("CCZ", 'T')
	w.send(q("COMMIT"))
	w.replies("CZ", 'I')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) != "guarded" && lastCheck(got) != "none" {
		t.Fatalf("after the block ended: %s", got)
	}
	// A block the server reports aborted keeps nothing.
	w = txnTokensWire(t, false)
	w.send(q("BEGIN; SET LOCAL lock.fencing_token = 4; SET LOCAL lock.resource = 'r'; SELECT 1/0"))
	w.replies("CCCEZ", 'E')
	w.send(q("ROLLBACK"))
	w.replies("CZ", 'I')
	w.send(q("BEGIN"))
	w.replies("CZ", 'T')
	if got := w.send(q("UPDATE t SET v = 1")); lastCheck(got) == "plain" {
		t.Fatalf("after an aborted block: %s", got)
	}
}

func TestCheckStartupRefusesSessionTokensUnderTransactionScope(t *testing.T) {
	cfg := &Config{TransactionTokens: true}
	for _, p := range []map[string]string{
		{"options": "-c lock.fencing_token=4"},
		{"options": "--lock.resource=r"},
		{"lock.fencing_token": "4"},
		{"LOCK.RESOURCE": "r"},
	} {
		if err := CheckStartup(cfg, p); err == nil {
			t.Errorf("%v: accepted", p)
		}
	}
	if err := CheckStartup(cfg, map[string]string{"options": "-c search_path=app", "application_name": "lock.x"}); err != nil {
		t.Errorf("unrelated parameters refused: %v", err)
	}
	if err := CheckStartup(&Config{}, map[string]string{"options": "-c lock.fencing_token=4"}); err != nil {
		t.Errorf("session scope refused a startup token: %v", err)
	}
}

// What the server sets is what counts: a statement the proxy takes for a
// SET LOCAL or set_config of lock.fencing_token or lock.resource grants no
// trust unless the server sets that very setting, for this transaction, to
// a value the statement gives.
func TestTransactionTokensTrustOnlyWhatTheServerSets(t *testing.T) {
	tests := []struct{ name, set string }{
		// PostgreSQL folds only ASCII letters in setting names: the Kelvin
		// sign and the long s name other (placeholder) settings.
		{"Kelvin sign in the token's name", `SET LOCAL "loc` + "\u212A" + `.fencing_token" = 4; SET LOCAL lock.resource = 'r'`},
		{"long s in the resource's name", "SET LOCAL lock.fencing_token = 4; SELECT set_config('lock.re\u017Fource', 'r', true)"},
		// LIMIT 0 and OFFSET evaluate no target list: nothing is set.
		{"set_config under LIMIT 0", "SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', true) LIMIT 0"},
		{"set_config under OFFSET", "SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', true) OFFSET 1"},
		{"set_config under FETCH FIRST 0 ROWS", "SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', true) FETCH FIRST 0 ROWS ONLY"},
		// A NULL value is a reset request: the setting takes its session
		// default (a role or database default, a startup option).
		{"set_config to NULL", "SET LOCAL lock.fencing_token = 4; SELECT set_config('lock.resource', NULL, true)"},
		// Another schema's set_config is not PostgreSQL's.
		{"set_config of another schema", "SELECT app.set_config('lock.fencing_token', '4', true), app.set_config('lock.resource', 'r', true)"},
		// A cursor's FETCH may evaluate none of its rows (FETCH 0, MOVE,
		// a second FETCH once the row is read).
		{"set_config in a cursor fetched with FETCH 0", "DECLARE c CURSOR FOR SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', true); FETCH 0 FROM c"},
		{"set_config in a cursor read twice around a RESET", "DECLARE c CURSOR FOR SELECT set_config('lock.fencing_token', '4', true), set_config('lock.resource', 'r', true); FETCH c; RESET lock.resource; FETCH c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := txnTokensWire(t, false)
			got := w.send(q("BEGIN; " + tt.set + "; UPDATE t SET v = 1"))
			if i := strings.LastIndex(got, "UPDATE t"); i < 0 || refusedSessionSet(got[:i]) {
				return // refused before the UPDATE runs: fail closed
			} else if last := lastCheck(got[:i]); last != "guarded" {
				t.Fatalf("check before the UPDATE is %s, want guarded\nupstream %s", last, got)
			}
		})
	}
}

// A set_config for the transaction whose value is itself computed by code
// (another set_config, for the session) must not carry a session-level
// setting past the refusal.
func TestTransactionTokensRefuseSessionLevelSettingsInsideValues(t *testing.T) {
	for _, sql := range []string{
		"SELECT set_config('lock.fencing_token', set_config('lock.fencing_token', '41', false), true)",
		"SELECT set_config('lock.fencing_token', (SELECT set_config('lock.resource', 'r', false)), true)",
		"SELECT set_config('lock.fencing_token', app.f()::text, true)",
		"SELECT set_config('lock.fencing_token', '4'::app.t, true)",
		"SELECT set_config('lock.resource', 'r', true) ORDER BY set_config('lock.fencing_token', '41', false)",
		"SELECT DISTINCT ON (set_config('lock.fencing_token', '41', false)) set_config('lock.resource', 'r', true)",
		"SELECT set_config('lock.resource', 'r', true) WINDOW w AS (ORDER BY set_config('lock.fencing_token', '41', false))",
	} {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); !refusedSessionSet(got) {
			t.Errorf("%s: not refused: %s", sql, got)
		}
	}
	// A literal or a parameter, as drivers send, runs.
	for _, sql := range []string{
		"SELECT set_config('lock.fencing_token', '4', true)",
		"SELECT set_config('lock.fencing_token', $1, true)",
		"SELECT set_config('lock.fencing_token', $1::text, true), pg_catalog.set_config('lock.resource', $2, true)",
	} {
		w := txnTokensWire(t, false)
		if got := w.send(q(sql)); refusedSessionSet(got) {
			t.Errorf("%s: refused: %s", sql, got)
		}
	}
}

// refusedSessionSet reports whether upstream holds the refusal of a
// session-level setting (not the guard of a check, which names 55Z05 too).
func refusedSessionSet(upstream string) bool {
	return strings.Contains(upstream, "$fence$BEGIN RAISE EXCEPTION USING ERRCODE = '55Z05'")
}

// A named statement the proxy knew with a comment token, run after code
// the proxy could not see, is checked with that token and with the
// session's (it may have been replaced by one without the comment): the
// second check reads the settings, so it is guarded too.
func TestTransactionTokensGuardTheRecalledStatementsSessionCheck(t *testing.T) {
	w := txnTokensWire(t, false)
	w.send(q("PREPARE p AS /* fencing_token=4 resource=r */ UPDATE t SET v = 1"))
	w.replies("CZ", 'I')
	w.send(q("DO $$BEGIN END$$"))
	w.replies("CZ", 'I')
	got := w.send(q("EXECUTE p"))
	if strings.Count(got, "fence.check(") != 2 {
		t.Fatalf("want the comment's check and the session's: %s", got)
	}
	if !strings.Contains(got, guarded) || !strings.Contains(got, "current_setting('lock.fencing_token'") || !strings.Contains(got, "current_setting('lock.resource'") {
		t.Fatalf("the session's check reads both settings unguarded: %s", got)
	}
}

// A statement that cannot run in a transaction block commits the
// transaction it runs in where the server lets it run (in an
// extended-protocol pipeline, on servers without PostgreSQL's pipeline
// check): what the transaction set is gone after it.
func TestTransactionTokensTrustEndsAtAStatementThatCommits(t *testing.T) {
	w := txnTokensWire(t, false)
	for _, sql := range []string{"SET LOCAL lock.fencing_token = 4", "SET LOCAL lock.resource = 'r'", "VACUUM"} {
		w.send(parse("", sql))
		w.send(bind("", ""))
		w.send(exec(""))
	}
	w.send(parse("", "UPDATE t SET v = 1"))
	// The check goes in front of the Bind (or the Execute).
	var before []pgproto3.FrontendMessage
	for _, m := range []Msg{bind("", ""), exec("")} {
		before = append(before, w.s.Client(m).Before...)
	}
	if got := extendedText(before); !strings.Contains(got, "fence.check(") || !strings.Contains(got, guarded) {
		t.Fatalf("check after VACUUM is not guarded: %q", got)
	}
}

// extendedText returns the texts of the Parse and Query messages in msgs.
func extendedText(msgs []pgproto3.FrontendMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m := m.(type) {
		case *pgproto3.Parse:
			b.WriteString(m.Query + "\n")
		case *pgproto3.Query:
			b.WriteString(m.String + "\n")
		}
	}
	return b.String()
}

// Startup options are split by the server with backslash escapes
// (pg_split_opts): "-c l\ock.fencing_token=4" sets lock.fencing_token.
func TestCheckStartupRefusesEscapedOptions(t *testing.T) {
	cfg := &Config{TransactionTokens: true}
	for _, opt := range []string{`-c l\ock.fencing_token=4`, `-c lock\.resource=r`, `--lo\c\k.resource=r`} {
		if err := CheckStartup(cfg, map[string]string{"options": opt}); err == nil {
			t.Errorf("%s: accepted", opt)
		}
	}
}

// A rollback to a savepoint brings back what the transaction had set when
// the savepoint was taken, as PostgreSQL restores settings: a Django
// atomic block or SQLAlchemy begin_nested() that fails inside a
// transaction which set its token keeps it, while what was set after the
// savepoint is undone. Whatever the proxy cannot follow (a savepoint
// statement in a unit that failed, a name it never saw) trusts nothing.
func TestTransactionTokensRollbackToSavepointRestoresTrust(t *testing.T) {
	// step sends a Query and answers it with replies, ending in status.
	type step struct {
		query, replies string
		status         byte
	}
	run := func(t *testing.T, steps []step) string {
		t.Helper()
		w := txnTokensWire(t, false)
		var got string
		for _, st := range steps {
			got = w.send(q(st.query))
			if st.replies != "" {
				w.replies(st.replies, st.status)
			}
		}
		return lastCheck(got)
	}
	prelude := []step{
		{"BEGIN", "CZ", 'T'},
		{"SET LOCAL lock.fencing_token = 4", "CZ", 'T'},
		{"SET LOCAL lock.resource = 'r'", "CZ", 'T'},
		{"UPDATE t SET v = 1", "CCZ", 'T'},
	}
	tests := []struct {
		name  string
		steps []step
		want  string
	}{
		{"set before the savepoint, statement fails, rolled back", []step{
			{`SAVEPOINT "s1_x1"`, "CZ", 'T'},
			{"SELECT 1/0", "EZ", 'E'},
			{`ROLLBACK TO SAVEPOINT "s1_x1"`, "CZ", 'T'},
			{`RELEASE SAVEPOINT "s1_x1"`, "CZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "plain"},
		{"nested savepoints, rolled back to the outer", []step{
			{"SAVEPOINT a", "CZ", 'T'},
			{"SAVEPOINT b", "CZ", 'T'},
			{"RESET lock.resource", "CZ", 'T'},
			{"ROLLBACK TO a", "CZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "plain"},
		{"reset after the savepoint, rolled back in the same Query", []step{
			{"SAVEPOINT a; RESET lock.resource; ROLLBACK TO a", "CCCZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "plain"},
		{"reset before the savepoint", []step{
			{"RESET lock.resource; SAVEPOINT a; SET LOCAL lock.resource = 'r'; ROLLBACK TO a", "CCCCZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "guarded"},
		{"a name used twice: the newest counts", []step{
			{"SAVEPOINT a; RESET lock.resource; SAVEPOINT a; SET LOCAL lock.resource = 'r'; ROLLBACK TO a", "CCCCCZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "guarded"},
		{"released, then rolled back to an older one of the name", []step{
			{"SAVEPOINT a; RESET lock.resource; SAVEPOINT a; RELEASE a; ROLLBACK TO a", "CCCCCZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "plain"},
		{"a name used twice, each in a Query of its own", []step{
			{"SAVEPOINT a", "CZ", 'T'},
			{"RESET lock.resource", "CZ", 'T'},
			{"SAVEPOINT a", "CZ", 'T'},
			{"SET LOCAL lock.resource = 'r'", "CZ", 'T'},
			{"ROLLBACK TO a", "CZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "guarded"},
		{"a savepoint statement in a unit that failed", []step{
			{"RESET lock.resource; RELEASE x; SAVEPOINT a; SELECT 1/0", "CCCEZ", 'E'},
			{"ROLLBACK TO a", "CZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "guarded"},
		{"a savepoint the proxy never saw", []step{
			{"ROLLBACK TO nowhere", "CZ", 'T'},
			{"UPDATE t SET v = 1", "", 0},
		}, "guarded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, append(append([]step{}, prelude...), tt.steps...)); got != tt.want {
				t.Fatalf("check before the last UPDATE is %s, want %s", got, tt.want)
			}
		})
	}
}

// A portal runs its statement once: executed again it returns no more rows
// and sets nothing. A set_config there counts only at the first Execute
// after its Bind in the same unit (where the server runs them in order);
// a portal bound in an earlier unit, executed again, or run by SQL FETCH or
// MOVE (which may evaluate no row of it) grants no trust.
func TestTransactionTokensPortalSetsOnlyAtItsFirstExecute(t *testing.T) {
	setUp := func(t *testing.T) *wire {
		w := txnTokensWire(t, false)
		for _, st := range []struct{ query, replies string }{
			{"BEGIN", "CZ"},
			{"SET LOCAL lock.fencing_token = 4", "CZ"},
		} {
			w.send(q(st.query))
			w.replies(st.replies, 'T')
		}
		return w
	}
	checkBefore := func(t *testing.T, w *wire) string {
		w.send(parse("", "UPDATE t SET v = 1"))
		var before []pgproto3.FrontendMessage
		for _, m := range []Msg{bind("", ""), exec("")} {
			before = append(before, w.s.Client(m).Before...)
		}
		text := extendedText(before)
		switch {
		case strings.Contains(text, guarded):
			return "guarded"
		case strings.Contains(text, "fence.check("):
			return "plain"
		}
		return "none"
	}
	t.Run("bound and executed in one unit", func(t *testing.T) {
		w := setUp(t)
		w.send(parse("s", "SELECT set_config('lock.resource', 'r', true)"))
		w.send(bind("p", "s"))
		w.send(exec("p"))
		if got := checkBefore(t, w); got != "plain" {
			t.Fatalf("check before the UPDATE is %s, want plain", got)
		}
	})
	t.Run("executed again after a RESET", func(t *testing.T) {
		w := setUp(t)
		w.send(parse("s", "SELECT set_config('lock.resource', 'r', true)"))
		w.send(bind("p", "s"))
		w.send(exec("p"))
		w.send(syncMsg())
		w.replies("13123C32DCZ", 'T') // the set_config, a check before its Bind
		w.send(q("RESET lock.resource"))
		w.replies("CZ", 'T')
		w.send(exec("p"))
		if got := checkBefore(t, w); got != "guarded" {
			t.Fatalf("check before the UPDATE is %s, want guarded", got)
		}
	})
	// SQL FETCH and MOVE may evaluate no row of it (FETCH 0, MOVE 0, a
	// portal at its end).
	for _, fetch := range []string{"FETCH 0 FROM p", "MOVE 0 IN p", "FETCH ALL FROM p"} {
		t.Run(fetch, func(t *testing.T) {
			w := setUp(t)
			w.send(q("RESET lock.resource"))
			w.replies("CZ", 'T')
			up := w.send(parse("s", "SELECT set_config('lock.resource', 'r', true)"))
			up += " " + w.send(bind("p", "s")) + " " + w.send(syncMsg())
			w.replies(successFor(up, false), 'T')
			checks := strings.Count(w.send(q(fetch)), "fence.check(")
			w.replies(strings.Repeat("C", checks+1)+"Z", 'T')
			if got := checkBefore(t, w); got != "guarded" {
				t.Fatalf("check before the UPDATE is %s, want guarded", got)
			}
		})
	}
}

// Where the server lets a statement that cannot run in a transaction block
// run in an extended-protocol pipeline (servers without PostgreSQL's
// pipeline check), it commits the
// implicit transaction the pipeline's earlier statements ran in: a check
// before them does not cover a write after it, in either token scope.
func TestCheckDoesNotOutliveAStatementThatCommits(t *testing.T) {
	for _, cfg := range []*Config{{}, {TransactionTokens: true}} {
		w := newWire(t, cfg, true)
		var before []pgproto3.FrontendMessage
		for i, sql := range []string{"UPDATE t SET v = 1", "VACUUM", "UPDATE t SET v = 2"} {
			w.send(parse("", sql))
			for _, m := range []Msg{bind("", ""), exec("")} {
				if d := w.s.Client(m); i == 2 {
					before = append(before, d.Before...)
				}
			}
		}
		if !strings.Contains(extendedText(before), "fence.check(") {
			t.Errorf("TransactionTokens %v: the UPDATE after VACUUM runs unchecked", cfg.TransactionTokens)
		}
	}
}
