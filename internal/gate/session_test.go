package gate

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func newTestSession(params map[string]string) *Session {
	return NewSession(&Config{Analyzer: NewAnalyzer(100)}, params)
}

// replies feeds server replies (type letters; 'Z' carries status) and
// returns the letters the client sees.
func replies(s *Session, types string, status byte) string {
	var seen strings.Builder
	for i := 0; i < len(types); i++ {
		typ := types[i]
		switch typ {
		case 'Z':
			if s.ReadyForQuery(status) == Forward {
				seen.WriteByte('Z')
			}
		case 'E':
			if s.Error(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "55Z01"}) != Hide {
				seen.WriteByte('E')
			}
		default:
			if s.Reply(typ) == Forward {
				seen.WriteByte(typ)
			}
		}
	}
	return seen.String()
}

func TestQueryInjection(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		pre     []string // queries run (and answered) first
		query   string
		wantSQL string // "" = unchanged
	}{
		{name: "no token", query: "UPDATE t SET v = 1"},
		{name: "comment token", query: "/* fencing_token=42 resource=r */ UPDATE t SET v = 1",
			wantSQL: "CALL fence.check('42', 'r', '', '', false, true); /* fencing_token=42 resource=r */ UPDATE t SET v = 1"},
		{name: "read is fenced too", query: "SELECT v FROM t /* fencing_token=42 resource=r */",
			wantSQL: "CALL fence.check('42', 'r', '', '', false, true); SELECT v FROM t /* fencing_token=42 resource=r */"},
		{name: "setting statements are not fenced", params: map[string]string{"options": "-c lock.fencing_token=5"},
			query: "SET lock.resource = 'x'"},
		{name: "set_config select is not fenced", params: map[string]string{"options": "-c lock.fencing_token=5"},
			query: "SELECT set_config('lock.fencing_token', '6', false)"},
		{name: "startup token fences every transaction", params: map[string]string{"options": "-c lock.fencing_token=5"},
			query: "DELETE FROM t", wantSQL: "CALL fence.check('', '', '', '', false, true); DELETE FROM t"},
		{name: "SET then write in one query", query: "SET lock.fencing_token = 7; UPDATE t SET v = 2",
			wantSQL: "SET lock.fencing_token = 7;CALL fence.check('', '', '', '', false, true);  UPDATE t SET v = 2"},
		{name: "one check per transaction", query: "BEGIN; UPDATE t SET v = 1; UPDATE t SET v = 2; COMMIT; /* fencing_token=3 resource=r */",
			wantSQL: "BEGIN;CALL fence.check('3', 'r', '', '', false, true);  UPDATE t SET v = 1; UPDATE t SET v = 2; COMMIT; /* fencing_token=3 resource=r */"},
		{name: "VACUUM with a token is refused", query: "VACUUM t /* fencing_token=3 resource=r */",
			wantSQL: "DO $fence$BEGIN RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = 'fenceproxy: VACUUM T cannot run inside a transaction block, so a fencing token cannot be checked atomically with it; run it without a token'; END$fence$; VACUUM t /* fencing_token=3 resource=r */"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSession(tt.params)
			got, changed := s.Query(tt.query)
			if tt.wantSQL == "" {
				if changed {
					t.Fatalf("rewritten to %q, want unchanged", got)
				}
				return
			}
			if !changed || got != tt.wantSQL {
				t.Fatalf("got  %q\nwant %q", got, tt.wantSQL)
			}
		})
	}
}

func TestQueryRepliesHidden(t *testing.T) {
	s := newTestSession(nil)
	if _, changed := s.Query("/* fencing_token=1 resource=r */ SELECT 1; SELECT 2"); !changed {
		t.Fatal("not rewritten")
	}
	// CALL → C (hidden); SELECT 1 → T D C; SELECT 2 → T D C; Z.
	if got := replies(s, "CTDCTDCZ", 'I'); got != "TDCTDCZ" {
		t.Fatalf("client saw %q, want TDCTDCZ", got)
	}
	// A refused check: the client sees the error and ReadyForQuery.
	s.Query("/* fencing_token=1 resource=r */ SELECT 1")
	if got := replies(s, "EZ", 'I'); got != "EZ" {
		t.Fatalf("client saw %q, want EZ", got)
	}
}

func TestTransactionCheckedOnce(t *testing.T) {
	s := newTestSession(map[string]string{"options": "-c lock.fencing_token=9 -c lock.resource=r"})
	s.Query("BEGIN")
	replies(s, "CZ", 'T')
	if _, changed := s.Query("UPDATE t SET v = 1"); !changed {
		t.Fatal("first write of the transaction not checked")
	}
	replies(s, "CCZ", 'T')
	if got, changed := s.Query("UPDATE t SET v = 2"); changed {
		t.Fatalf("second write checked again: %q", got)
	}
	replies(s, "CZ", 'T')
	// A ROLLBACK TO SAVEPOINT may have undone the advance: check again.
	s.Query("ROLLBACK TO SAVEPOINT a")
	replies(s, "CZ", 'T')
	if _, changed := s.Query("UPDATE t SET v = 3"); !changed {
		t.Fatal("write after ROLLBACK TO not checked")
	}
	replies(s, "CCZ", 'T')
	s.Query("COMMIT")
	replies(s, "CZ", 'I')
	if _, changed := s.Query("UPDATE t SET v = 4"); !changed {
		t.Fatal("write in a new transaction not checked")
	}
}

// TestPipelinedUnitsCheckAgain: a unit sent before the previous one was
// answered cannot know whether the transaction is still the same one.
func TestPipelinedUnitsCheckAgain(t *testing.T) {
	s := newTestSession(map[string]string{"options": "-c lock.fencing_token=9 -c lock.resource=r"})
	s.Query("BEGIN")
	replies(s, "CZ", 'T')
	s.Query("UPDATE t SET v = 1") // checked; not answered yet
	if _, changed := s.Query("UPDATE t SET v = 2"); !changed {
		t.Fatal("pipelined unit not checked")
	}
}

func TestExtendedInjection(t *testing.T) {
	s := newTestSession(nil)
	s.Parse("s1", "/* fencing_token=5 resource=r */ UPDATE t SET v = $1")
	s.Bind("", "s1")
	msgs := s.Execute("")
	if len(msgs) != 4 {
		t.Fatalf("injected %d messages, want Parse, Bind, Execute, Close", len(msgs))
	}
	if p, ok := msgs[0].(*pgproto3.Parse); !ok || p.Name != checkName {
		t.Fatalf("first injected message %#v", msgs[0])
	}
	b := msgs[1].(*pgproto3.Bind)
	if string(b.Parameters[0]) != "5" || string(b.Parameters[1]) != "r" || string(b.Parameters[5]) != "true" {
		t.Fatalf("check parameters %q", b.Parameters)
	}
	s.Sync()
	// Client: 1 2; injected: 1 2 C 3 (hidden); client Execute: C; Sync: Z.
	if got := replies(s, "1212C3CZ", 'I'); got != "12CZ" {
		t.Fatalf("client saw %q, want 12CZ", got)
	}
	// Second time: the check statement is already prepared.
	s.Bind("", "s1")
	if msgs := s.Execute(""); len(msgs) != 3 {
		t.Fatalf("injected %d messages, want Bind, Execute, Close", len(msgs))
	}
	s.Sync()
	// The check is refused: the client's Execute gets the error.
	if got := replies(s, "2EZ", 'I'); got != "2EZ" {
		t.Fatalf("client saw %q, want 2EZ", got)
	}
}

func TestInjectedErrorRewritten(t *testing.T) {
	s := newTestSession(nil)
	s.Query("/* fencing_token=5 resource=r */ INSERT INTO t VALUES (1)")
	e := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "3F000", Message: `schema "fence" does not exist`, Where: "x", Position: 6}
	if v := s.Error(e); v != Replace {
		t.Fatalf("verdict %v, want Replace", v)
	}
	if e.Code != "55Z03" || !strings.Contains(e.Message, "fenceproxy migrate") || e.Where != "" || e.Position != 0 {
		t.Fatalf("rewritten error %+v", e)
	}
	// The client's own errors pass untouched.
	s.ReadyForQuery('I')
	s.Query("INSERT INTO t VALUES (1)")
	e = &pgproto3.ErrorResponse{Severity: "ERROR", Code: "42501", Message: "permission denied"}
	if v := s.Error(e); v != Forward || e.Code != "42501" {
		t.Fatalf("client error: verdict %v, %+v", v, e)
	}
}

var benchSink any

// BenchmarkSessionQuery measures the gate's per-statement decision on the
// simple protocol (with the shared analysis cache warm).
func BenchmarkSessionQuery(b *testing.B) {
	cfg := &Config{Analyzer: NewAnalyzer(100)}
	for _, bc := range []struct {
		name, sql string
		params    map[string]string
	}{
		{"unfenced", "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 5", nil},
		{"fenced-setting", "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 5", map[string]string{"options": "-c lock.fencing_token=1"}},
		{"fenced-comment", "/* fencing_token=42 resource=r */ UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 5", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewSession(cfg, bc.params)
			b.ReportAllocs()
			for b.Loop() {
				sql, _ := s.Query(bc.sql)
				benchSink = sql
				s.Reply('C')
				s.Reply('C')
				s.ReadyForQuery('I')
			}
		})
	}
}

// BenchmarkSessionExtended measures Bind/Execute/Sync of a prepared
// statement, as pgbench -M prepared sends them.
func BenchmarkSessionExtended(b *testing.B) {
	cfg := &Config{Analyzer: NewAnalyzer(100)}
	for _, bc := range []struct {
		name   string
		params map[string]string
	}{
		{"unfenced", nil},
		{"fenced-setting", map[string]string{"options": "-c lock.fencing_token=1"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewSession(cfg, bc.params)
			s.Parse("P_1", "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2")
			b.ReportAllocs()
			for b.Loop() {
				s.Bind("", "P_1")
				benchSink = s.Execute("")
				s.Sync()
				if msgs, ok := benchSink.([]pgproto3.FrontendMessage); ok && len(msgs) > 0 {
					replies(s, "22C3CZ", 'I') // client Bind, check Bind/Execute/Close, client Execute
				} else {
					replies(s, "2CZ", 'I')
				}
			}
		})
	}
}

func TestPrecheck(t *testing.T) {
	s := newTestSession(nil)
	if _, ok := s.Precheck("VACUUM t"); ok {
		t.Fatal("pre-check in a session that never set a token")
	}
	s = newTestSession(map[string]string{"options": "-c lock.fencing_token=5"})
	if _, ok := s.Precheck("UPDATE t SET v = 1"); ok {
		t.Fatal("pre-check for a statement that can be fenced in its transaction")
	}
	pre, ok := s.Precheck("VACUUM t")
	if !ok || !strings.Contains(pre, "current_setting('lock.fencing_token', true) <> ''") || !strings.Contains(pre, "'0A000'") {
		t.Fatalf("pre-check %q, %v", pre, ok)
	}
	// Passed: its CommandComplete and ReadyForQuery are hidden; the client's
	// Query follows.
	if got := replies(s, "CZ", 'I'); got != "" {
		t.Fatalf("client saw %q of a passed pre-check", got)
	}
	if r := s.TakePrecheck(); r != PrecheckProceed {
		t.Fatalf("outcome %v, want proceed", r)
	}
	if r := s.TakePrecheck(); r != PrecheckNone {
		t.Fatalf("outcome taken twice: %v", r)
	}
	// Refused: the client sees the error and ReadyForQuery, as the answer to
	// its Query, which is then dropped.
	s.Precheck("VACUUM t")
	if got := replies(s, "EZ", 'I'); got != "EZ" {
		t.Fatalf("client saw %q, want EZ", got)
	}
	if r := s.TakePrecheck(); r != PrecheckRefused {
		t.Fatalf("outcome %v, want refused", r)
	}
}
