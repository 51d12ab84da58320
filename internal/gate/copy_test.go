package gate

import "testing"

// TestTranscriptsCopyIn: after some units the gate pipelines a probe of
// lock.fencing_token (DO, CALL, SQL EXECUTE, FETCH, DISCARD ALL, text it
// cannot read in a session without fencing, a probe answered inside a
// transaction block that has since ended). When the unit leaves the server
// in COPY-in mode (COPY … FROM STDIN), the server takes the probe for bad
// copy data, fails the COPY and answers out of order: the session ended
// with 08P01. The probe must wait for the next unit's end instead, and the
// session stays checked until it is answered.
func TestTranscriptsCopyIn(t *testing.T) {
	const (
		check     = "CALL fence.check('', '', '', '', false, true);"
		selectChk = "Q(" + check + " SELECT 1) " + probeMsgs
	)
	// deferred: the client's text goes upstream as up, with no probe
	// behind it; the COPY's replies reach the client; the next Query is
	// checked, and the probe follows it.
	deferred := func(text, up string) []step {
		return []step{
			{send: q(text), up: "Q(" + up + ")"},
			{replies: "CCGCZ", status: 'I', seen: "CGCZ"},
			{send: q("SELECT 1"), up: selectChk},
			{replies: "CCTDCZ312C3Z", status: 'I', seen: "CTDCZ"},
			{send: q("SELECT 2")}, // the probe said: no token
		}
	}
	// probed: the text is followed by the probe as before.
	probed := func(text, up string) []step {
		return []step{{send: q(text), up: "Q(" + up + ") " + probeMsgs}}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"call_then_copy_stdin", deferred("CALL p(); COPY t FROM STDIN", "CALL p();"+check+"  COPY t FROM STDIN")},
		{"do_then_copy_stdin", deferred("DO $$BEGIN NULL; END$$; COPY t FROM STDIN", "DO $$BEGIN NULL; END$$;"+check+"  COPY t FROM STDIN")},
		{"copy_stdin_then_call", []step{
			{send: q("COPY t FROM STDIN; CALL p()")},
		}},
		{"case_comments_spacing", deferred("call p()/* ; */;\n\t--x\ncOpY/**/t(a)FROM\n  StdIn  ", "call p()/* ; */;"+check+" \n\t--x\ncOpY/**/t(a)FROM\n  StdIn  ")},
		{"sql_execute_then_copy", []step{
			{send: q("PREPARE s AS SELECT 1")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("EXECUTE s; COPY t FROM STDIN"), up: "Q(EXECUTE s;" + check + "  COPY t FROM STDIN)"},
			{send: q("SELECT 1"), up: "WAIT"}, // EXECUTE may have changed the lexing settings
			{replies: "CCGCZ", status: 'I', seen: "CGCZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"sql_execute_of_parsed_copy", []step{
			// A COPY … FROM STDIN prepared by Parse runs through SQL EXECUTE.
			{send: parse("cp", "COPY t FROM STDIN")}, {send: syncMsg()},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: q("EXECUTE cp")},
			{replies: "GCZ", status: 'I', seen: "GCZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"unreadable_text_with_copy_stdin", []step{
			// The parser (PostgreSQL 17) rejects it; the server may not.
			{send: q("SET lock.fencing_token = 5; UPDATE t SET system_user = 'x'; COPY t FROM STDIN")},
			{send: q("SELECT 1"), up: "WAIT"}, // it may have changed the lexing settings
			{replies: "CCGCZ", status: 'I', seen: "CCGCZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"unreadable_text_without_copy_probed", probed("SET lock.fencing_token = 5; UPDATE t SET system_user = 'x'", "SET lock.fencing_token = 5; UPDATE t SET system_user = 'x'")},
		{"call_then_copy_to_stdout_probed", probed("CALL p(); COPY t TO STDOUT", "CALL p();"+check+"  COPY t TO STDOUT")},
		{"call_then_copy_from_file_probed", probed("CALL p(); COPY t FROM '/tmp/stdin'", "CALL p();"+check+"  COPY t FROM '/tmp/stdin'")},
		{"call_then_copy_from_program_probed", probed("CALL p(); COPY t FROM PROGRAM 'cat stdin'", "CALL p();"+check+"  COPY t FROM PROGRAM 'cat stdin'")},
		{"copy_stdin_in_a_string_probed", probed("CALL p(); SELECT 'COPY t FROM STDIN'", "CALL p();"+check+"  SELECT 'COPY t FROM STDIN'")},
		{"copy_stdin_alone_after_probe_in_transaction", []step{
			// The probe after CALL is answered inside the block: it is
			// due again once the block ends, behind the next unit.
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("CALL p()"), up: "Q(CALL p()) " + probeMsgs},
			{replies: "CZ312C3Z", status: 'T', seen: "CZ"},
			{send: q("COMMIT")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("COPY t FROM STDIN"), up: "Q(" + check + " COPY t FROM STDIN)"},
			{replies: "CGCZ", status: 'I', seen: "GCZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"extended_call_then_copy_stdin", []step{
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", "COPY t FROM STDIN")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
		}},
		{"extended_copy_stdin_with_token", []step{
			{send: q("CALL p()"), up: "Q(CALL p()) " + probeMsgs},
			{replies: "CZ312DC3Z", status: 'I', seen: "CZ"}, // the probe found a token
			{send: parse("", "CALL p()")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: parse("", "COPY t FROM STDIN")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
		}},
		{"extended_unread_copy_stdin_then_call", []step{
			// Nothing is fenced yet: the COPY's text is not analysed.
			{send: parse("", "COPY t FROM STDIN")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("c", "CALL p()")}, {send: bind("c", "c")}, {send: exec("c")},
			{send: syncMsg(), up: "S"},
		}},
		{"extended_unreadable_copy_stdin_refused_with_token", []step{
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", "COPY t (system_user) FROM STDIN")}, {send: bind("", "")}, {send: exec(""), up: raiseMsgs() + " E()"},
		}},
		{"extended_copy_to_stdout_probed", []step{
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", "COPY t TO STDOUT")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S " + probeMsgs},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { replay(t, nil, false, tt.steps) })
	}
}
