package gate

import (
	"strings"
	"testing"
)

// step is one exchange of a transcript: a client message and what goes
// upstream, or server replies and what the client sees.
type step struct {
	send Msg
	up   string // what goes upstream ("" = the message unchanged)

	replies string // server replies ('Z' with status)
	status  byte
	seen    string // what the client sees
}

func (st step) isReply() bool { return st.replies != "" }

const (
	probeMsgs  = "C(S ~probe) P(~probe) B(~probe) C(S ~probe) E(~probe) C(P ~probe) S"
	checkMsgs  = "C(S ~check) P(~check) B(~check) C(S ~check) E(~check) C(P ~check)"
	checkReply = "3123C3" // replies to checkMsgs
)

func raiseMsgs() string { return "C(S ~raise) P(~raise) B(~raise) C(S ~raise) E(~raise)" }

// TestTranscripts replays what a hostile or merely unusual client would
// send, with the server's replies, and asserts what goes upstream and what
// the client sees. Each name says the attack.
func TestTranscripts(t *testing.T) {
	tests := []struct {
		name  string
		cfg   func() *Config
		token bool
		steps []step
	}{
		{name: "parse_refused_then_bind", token: true, steps: []step{
			// s1 is COMMIT on the server; a second Parse of s1 fails (42P05)
			// and must not make the gate believe s1 is a read.
			{send: parse("s1", "COMMIT")}, {send: syncMsg()},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: parse("s1", "SELECT 1")}, {send: syncMsg()},
			{replies: "E{42P05}Z", status: 'I', seen: "EZ"},
			{send: bind("", "s1")}, {send: exec(""), up: "E()"}, {send: syncMsg()},
		}},
		{name: "pipelined_redefinition_waits", token: true, steps: []step{
			{send: parse("s1", "SELECT 1")}, {send: syncMsg()},
			{send: bind("", "s1"), up: "WAIT"},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: bind("", "s1"), up: checkMsgs + " B()"},
			{send: exec(""), up: "E()"},
		}},
		{name: "close_skipped_after_error_keeps_statement", token: true, steps: []step{
			{send: parse("w", "UPDATE t SET v = 1")}, {send: syncMsg()},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: parse("bad", "SELEC")}, {send: closeMsg('S', "w")}, {send: syncMsg()},
			{replies: "E{42601}Z", status: 'I', seen: "EZ"},
			{send: bind("", "w"), up: checkMsgs + " B()"},
			{send: exec(""), up: "E()"},
		}},
		{name: "hijack_check_by_close", token: true, steps: []step{
			{send: closeMsg('S', checkName), up: raiseMsgs()},
		}},
		{name: "hijack_check_by_parse", token: true, steps: []step{
			{send: parse(checkName, "SELECT 1"), up: raiseMsgs()},
		}},
		{name: "hijack_check_by_bind_portal", token: true, steps: []step{
			{send: parse("", "SELECT 1")},
			{send: bind(checkName, ""), up: raiseMsgs()},
		}},
		{name: "check_prepared_every_time_after_deallocate_all", token: true, steps: []step{
			{send: q("DEALLOCATE ALL")},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: parse("", "UPDATE t SET v = 1")}, {send: bind("", ""), up: checkMsgs + " B()"},
			{send: exec(""), up: "E()"},
		}},
		{name: "bad_parse_then_query_skipped", token: true, steps: []step{
			// The server skips the Query after the failed Parse: no
			// ReadyForQuery for it. Replies must not shift.
			{send: parse("", "SELEC")},
			{send: q("SELECT 1"), up: "Q(CALL fence.check('', '', '', '', false, true); SELECT 1)"},
			{send: syncMsg()},
			{replies: "E{42601}Z", status: 'I', seen: "EZ"},
			{send: q("SELECT 2"), up: "Q(CALL fence.check('', '', '', '', false, true); SELECT 2)"},
			{replies: "CTDCZ", status: 'I', seen: "TDCZ"},
		}},
		{name: "unmatched_reply_fails_session", steps: []step{
			{replies: "Z", status: 'I', seen: "!"},
		}},
		{name: "unexpected_reply_type_fails_session", steps: []step{
			{send: parse("", "SELECT 1")},
			{replies: "2", seen: "!"},
		}},
		{name: "select_snapshot_after_check", token: true, steps: []step{
			// A SELECT's portal takes its snapshot at Bind: the check runs
			// before the Bind, or the read could predate an older holder's
			// commit that the check waited for.
			{send: parse("r", "SELECT v FROM t")}, {send: syncMsg()},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: bind("", "r"), up: checkMsgs + " B()"},
			{send: exec(""), up: "E()"}, {send: syncMsg()},
			{replies: checkReply + "2DCZ", status: 'I', seen: "2DCZ"},
		}},
		{name: "error_before_sync_skips_later_messages", token: true, steps: []step{
			// A pipeline ended by Flush: the server skips every message up
			// to the client's Sync, which it answers with ReadyForQuery alone.
			{send: parse("", "SELECT 1")}, {send: Msg{Type: 'H'}},
			{replies: "E{42601}", seen: "E"},
			{send: parse("", "SELECT 2"), up: "P()"}, {send: bind("", ""), up: "B()"}, {send: exec(""), up: "E()"},
			{send: syncMsg()},
			{replies: "Z", status: 'I', seen: "Z"},
			{send: q("SELECT 3"), up: "Q(CALL fence.check('', '', '', '', false, true); SELECT 3)"},
		}},
		{name: "unsolicited_error_mid_sequence", steps: []step{
			// statement_timeout fires between Parse and Describe.
			{send: parse("", "SELECT 1")}, {send: Msg{Type: 'H'}},
			{replies: "1", seen: "1"},
			{replies: "E{57014}", seen: "E"},
			{send: Msg{Type: 'D', Object: 'S'}}, {send: syncMsg()},
			{replies: "Z", status: 'I', seen: "Z"},
		}},
		{name: "bind_to_sql_prepared_unknown", token: true, steps: []step{
			{send: bind("", "made_by_sql"), up: raiseMsgs()},
		}},
		{name: "sql_prepare_then_bind_known", token: true, steps: []step{
			{send: q("PREPARE p AS UPDATE t SET v = 1")},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: bind("", "p"), up: checkMsgs + " B()"},
			{send: exec(""), up: "E()"},
		}},
		{name: "sql_prepare_commit_execute_is_not_a_read", token: true, steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: parse("c", "COMMIT")}, {send: syncMsg()}, {replies: "1Z", status: 'T', seen: "1Z"},
			{send: q("SELECT 1; EXECUTE c; UPDATE t SET v = 1"),
				up: "Q(CALL fence.check('', '', '', '', false, true); SELECT 1; EXECUTE c;CALL fence.check('', '', '', '', false, true);  UPDATE t SET v = 1)"},
		}},
		{name: "sql_prepare_failed_is_not_known", token: true, steps: []step{
			{send: q("PREPARE p AS UPDATE t SET v = 1")},
			{replies: "E{42P05}Z", status: 'I', seen: "EZ"},
			{send: bind("", "p"), up: raiseMsgs()},
		}},
		{name: "function_call_refused_outside_checked_txn", token: true, steps: []step{
			{send: Msg{Type: 'F'}, up: "Q(" + raiseText(codeCannotFence, msgFunctionCall) + ")"},
			{replies: "E{0A000}Z", status: 'I', seen: "E0A000Z"},
		}},
		{name: "function_call_in_plain_session_probed", steps: []step{
			{send: Msg{Type: 'F'}, up: "F " + probeMsgs},
			{replies: "VZ", status: 'I', seen: "VZ"},
			{replies: "3123DC3Z", status: 'I', seen: ""},
			{send: q("UPDATE t SET v = 1"), up: "Q(CALL fence.check('', '', '', '', false, true); UPDATE t SET v = 1)"},
		}},
		{name: "probe_clears_token_maybe", steps: []step{
			{send: q("DO $$BEGIN NULL; END$$"), up: "Q(DO $$BEGIN NULL; END$$) " + probeMsgs},
			{replies: "CZ3123C3Z", status: 'I', seen: "CZ"},
			{send: q("UPDATE t SET v = 1")},
		}},
		{name: "scs_off_backslash_refused", token: true, steps: []step{
			{replies: "S", seen: "S"},
			{send: q(`SELECT 'a\'; UPDATE t SET v = 1; --'`), up: "Q(" + raiseText(codeCannotFence, "fenceproxy: cannot fence this text, because "+(&settings{scsOff: true}).unsafe(`\`)) + ")"},
		}},
		{name: "sjis_high_bytes_refused", token: true, steps: []step{
			{send: q("SET client_encoding = 'SJIS'")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT '\x95\\'; UPDATE t SET v = 1"), up: "Q(" + raiseText(codeCannotFence, "fenceproxy: cannot fence this text, because "+(&settings{encoding: "SJIS"}).unsafe("\x80")) + ")"},
		}},
		{name: "pipelined_encoding_change_waits", token: true, steps: []step{
			{send: q("SET client_encoding = 'SJIS'")},
			{send: q("UPDATE t SET v = 1"), up: "WAIT"},
		}},
		{name: "hidden_lexing_change_pipelined_probes_in_plain_session", steps: []step{
			// knob_off() may turn standard_conforming_strings off (a function
			// calling set_config); its ParameterStatus has not arrived when the
			// next text, which the server would then read as set_config calls,
			// comes: it passes, and a probe follows it.
			{send: q("SELECT knob_off()")},
			{send: q(`SELECT 'a\' , ' , set_config($$lock.fencing_token$$, $$5$$, false) , ' -- '`),
				up: `Q(SELECT 'a\' , ' , set_config($$lock.fencing_token$$, $$5$$, false) , ' -- ') ` + probeMsgs},
		}},
		{name: "hidden_lexing_change_pipelined_waits_when_fenced", token: true, steps: []step{
			// The same with a token: the text waits for the answer before it.
			{send: q("SELECT knob_off()"), up: "Q(CALL fence.check('', '', '', '', false, true); SELECT knob_off())"},
			{send: q(`SELECT 'a\' , '; COMMIT; UPDATE t SET v = 1; -- '`), up: "WAIT"},
		}},
		{name: "lexing_risky_text_after_answers_analysed_in_plain_session", steps: []step{
			{send: q("SELECT knob_off()")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
			{send: q(`SELECT 'a\' , ' , set_config($$lock.fencing_token$$, $$5$$, false) , ' -- '`)},
		}},
		{name: "pg15_keyword_refused_when_fenced", token: true, steps: []step{
			{send: q("UPDATE t SET system_user = 'x'"), up: "Q(" + raiseText(codeCannotParse, `fenceproxy: cannot fence the statement: the proxy's parser (PostgreSQL 17 grammar) rejects it: syntax error at or near "system_user"; if the server accepts it, quote the identifier that newer PostgreSQL reserves`) + ")"},
		}},
		{name: "pg15_keyword_passes_in_plain_session", steps: []step{
			{send: q("UPDATE t SET system_user = 'x'")},
		}},
		{name: "pg15_keyword_with_set_probes_in_plain_session", steps: []step{
			{send: q("SET lock.fencing_token = 5; UPDATE t SET system_user = 'x'"), up: "Q(SET lock.fencing_token = 5; UPDATE t SET system_user = 'x') " + probeMsgs},
			{send: q("UPDATE t SET v = 1"), up: "WAIT"}, // the text may have changed the lexing settings
			{replies: "CCZ3123DC3Z", status: 'I', seen: "CCZ"},
			{send: q("UPDATE t SET v = 1"), up: "Q(CALL fence.check('', '', '', '', false, true); UPDATE t SET v = 1)"},
		}},
		{name: "guard_refuses_unparsable", cfg: func() *Config {
			return &Config{Tables: map[TableRef]Protection{{Schema: "public", Name: "t"}: {Resource: "r", RequireToken: true}}}
		}, steps: []step{
			{send: q("UPDATE t SET system_user = 'x'"), up: "Q(" + raiseText(codeCannotParse, `fenceproxy: cannot fence the statement: the proxy's parser (PostgreSQL 17 grammar) rejects it: syntax error at or near "system_user"; if the server accepts it, quote the identifier that newer PostgreSQL reserves`) + ")"},
		}},
		{name: "each_table_resource_checked", token: true, cfg: twoResources, steps: []step{
			{send: q("WITH x AS (INSERT INTO a VALUES (1) RETURNING 1) INSERT INTO s.b SELECT 1 FROM x"),
				up: "Q(CALL fence.check('', '', 'ra', '', true, true); CALL fence.check('', 'ra', 'ra', '', true, true); CALL fence.check('', 'rb', 'rb', '', true, true); WITH x AS (INSERT INTO a VALUES (1) RETURNING 1) INSERT INTO s.b SELECT 1 FROM x)"},
			{replies: "CCCCZ", status: 'I', seen: "CZ"},
			{send: q("/* resource=rb */ TRUNCATE b, a"),
				up: "Q(CALL fence.check('', 'rb', 'ra', '', true, true); CALL fence.check('', 'ra', 'ra', '', true, true); /* resource=rb */ TRUNCATE b, a)"},
		}},
		{name: "every_table_counts_without_token", cfg: twoResources, steps: []step{
			{send: q("TRUNCATE a, b"), up: "Q(CALL fence.check('', '', 'ra', '', true, true); CALL fence.check('', 'ra', 'ra', '', true, true); CALL fence.check('', 'rb', 'rb', '', true, true); TRUNCATE a, b)"},
		}},
		{name: "comment_changes_resource_in_checked_txn", token: true, steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("UPDATE t SET v = 1"), up: "Q(CALL fence.check('', '', '', '', false, true); UPDATE t SET v = 1)"},
			{replies: "CCZ", status: 'T', seen: "CZ"},
			{send: q("UPDATE t SET v = 2")},
			{replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("/* resource=other */ UPDATE t SET v = 3"), up: "Q(CALL fence.check('', 'other', '', '', false, true); /* resource=other */ UPDATE t SET v = 3)"},
		}},
		{name: "portal_of_unknown_statement_in_plain_session_refused_once_fenced", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: bind("p1", "sqlmade")}, {send: syncMsg()}, {replies: "2Z", status: 'T', seen: "2Z"},
			{send: q("SET lock.fencing_token = 5")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: exec("p1"), up: raiseMsgs()},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg *Config
			if tt.cfg != nil {
				cfg = tt.cfg()
			}
			replay(t, cfg, tt.token, tt.steps)
		})
	}
}

// replay runs steps against a new session and fails at the first step
// whose upstream messages or client-visible replies differ.
func replay(t *testing.T, cfg *Config, token bool, steps []step) {
	t.Helper()
	w := newWire(t, cfg, token)
	for i, st := range steps {
		if st.isReply() {
			if st.replies == "S" {
				w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "off"})
				continue
			}
			if got := w.replies(st.replies, st.status); got != st.seen {
				t.Fatalf("step %d: replies %q: client saw %q, want %q", i, st.replies, got, st.seen)
			}
			if st.replies == "CZ" && i > 0 && steps[i-1].send.Text == "SET client_encoding = 'SJIS'" {
				w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "SJIS"})
			}
			continue
		}
		want := st.up
		if want == "" {
			want = clientShow(st.send)
		}
		if got := w.send(st.send); got != want {
			t.Fatalf("step %d: sent %s:\n got %s\nwant %s", i, clientShow(st.send), got, want)
		}
	}
}

// twoResources protects a (resource ra, no token required) in any schema and
// s.b (rb, token required).
func twoResources() *Config {
	return &Config{Tables: map[TableRef]Protection{
		{Name: "a"}:              {Resource: "ra"},
		{Schema: "s", Name: "b"}: {Resource: "rb", RequireToken: true},
	}}
}

// TestProtectionDeterministic: an unqualified name listed in two schemas
// requires a token if either entry does, whatever the map order.
func TestProtectionDeterministic(t *testing.T) {
	cfg := &Config{Tables: map[TableRef]Protection{
		{Schema: "s1", Name: "t"}: {Resource: "r1"},
		{Schema: "s2", Name: "t"}: {Resource: "r2", RequireToken: true},
		{Schema: "s3", Name: "t"}: {Resource: "r1"},
	}}
	for i := 0; i < 1000; i++ {
		m := cfg.protection([]TableRef{{Name: "t"}})
		if !m.found || !m.require || strings.Join(m.resources, ",") != "r1,r2" {
			t.Fatalf("run %d: %+v", i, m)
		}
	}
	if m := cfg.protection([]TableRef{{Schema: "s1", Name: "t"}}); m.require || strings.Join(m.resources, ",") != "r1" {
		t.Fatalf("qualified s1.t: %+v", m)
	}
}
