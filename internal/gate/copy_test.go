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
			{replies: "CCG", seen: "CG"}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT 1"), up: selectChk},
			{replies: "CCTDCZ3123C3Z", status: 'I', seen: "CTDCZ"},
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
		{"sql_execute_of_unknown_then_copy", []step{
			// s was prepared by code the proxy did not see.
			{send: q("EXECUTE s; COPY t FROM STDIN"), up: "Q(EXECUTE s;" + check + "  COPY t FROM STDIN)"},
			{send: q("SELECT 1"), up: "WAIT"}, // EXECUTE may have changed the lexing settings
			{replies: "CCG", seen: "CG"}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"sql_execute_of_parsed_copy", []step{
			// A COPY … FROM STDIN prepared by Parse runs through SQL
			// EXECUTE: the proxy knows what runs, and probes nothing.
			{send: parse("cp", "COPY t FROM STDIN")}, {send: syncMsg()},
			{replies: "1Z", status: 'I', seen: "1Z"},
			{send: q("EXECUTE cp")},
			{replies: "G", seen: "G"}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT 1")},
		}},
		{"unreadable_text_with_copy_stdin", []step{
			// The parser (PostgreSQL 17) rejects it; the server may not.
			{send: q("SET lock.fencing_token = 5; UPDATE t SET system_user = 'x'; COPY t FROM STDIN")},
			{send: q("SELECT 1"), up: "WAIT"}, // it may have changed the lexing settings
			{replies: "CCG", seen: "CCG"}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
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
			{replies: "CZ3123C3Z", status: 'T', seen: "CZ"},
			{send: q("COMMIT")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("COPY t FROM STDIN"), up: "Q(" + check + " COPY t FROM STDIN)"},
			{replies: "CG", seen: "G"}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT 1"), up: selectChk},
		}},
		{"extended_call_then_copy_stdin", []step{
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", "COPY t FROM STDIN")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
		}},
		{"extended_copy_stdin_with_token", []step{
			{send: q("CALL p()"), up: "Q(CALL p()) " + probeMsgs},
			{replies: "CZ3123DC3Z", status: 'I', seen: "CZ"}, // the probe found a token
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
		{"copy_unit_skipped_after_error", []step{
			// The Query that may start COPY-in mode is skipped after the
			// failed Parse: it started nothing, and the probe CALL needs
			// follows the next unit. It waited for a CopyDone or CopyFail
			// that never came: the session stayed checked for good.
			{send: parse("", "SELEC")},
			{send: q("CALL p(); COPY t FROM STDIN"), up: "Q(CALL p();" + check + "  COPY t FROM STDIN)"},
			{send: syncMsg(), up: "S"},
			{replies: "E{42601}Z", status: 'I', seen: "EZ"},
			{send: q("SELECT 1"), up: selectChk},
			{replies: "CTDCZ3123C3Z", status: 'I', seen: "TDCZ"},
			{send: q("SELECT 2")}, // the probe said: no token
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

func copyDone() Msg { return Msg{Type: 'c'} }
func copyFail() Msg { return Msg{Type: 'f'} }
func flushMsg() Msg { return Msg{Type: 'H'} }

// TestTranscriptsCopyInSync: PostgreSQL ignores a Sync (and a Flush) read
// in COPY-in mode. libpq's PQexecParams sends Parse, Bind, Describe,
// Execute, Sync before it learns the statement is a COPY FROM STDIN, then
// the data, CopyDone (or CopyFail) and another Sync: only the second gets
// ReadyForQuery. The gate expected one per Sync, and the next reply ended
// the session. Rows: how the COPY ends (done, failed by the client, by a
// bad row before or after the client's CopyDone, by an error before the
// server read the first Sync), several COPYs, Syncs inside a simple
// Query's COPY, and what it cannot know (08P01).
func TestTranscriptsCopyInSync(t *testing.T) {
	const cp = "COPY t FROM STDIN"
	// libpq: the COPY's messages, Sync pipelined behind the Execute.
	libpq := []step{
		{send: parse("", cp)}, {send: bind("", "")}, {send: Msg{Type: 'D', Object: 'P'}},
		{send: exec("")}, {send: syncMsg(), up: "S"},
		{replies: "12nG", seen: "12nG"},
		{send: Msg{Type: 'd'}},
	}
	then := func(steps ...[]step) []step {
		var out []step
		for _, s := range steps {
			out = append(out, s...)
		}
		return out
	}
	usable := []step{
		{send: q("SELECT 1")},
		{replies: "TDCZ", status: 'I', seen: "TDCZ"},
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"copy_done", then(libpq, []step{
			{send: copyDone()}, {send: syncMsg()},
			{replies: "CZ", status: 'I', seen: "CZ"}, // one ReadyForQuery, for the second Sync
		}, usable)},
		{"copy_done_flushes_and_syncs_in_data", then(libpq, []step{
			{send: flushMsg()}, {send: syncMsg()}, {send: Msg{Type: 'd'}}, {send: syncMsg()},
			{send: copyDone()}, {send: syncMsg()},
			{replies: "CZ", status: 'I', seen: "CZ"},
		}, usable)},
		{"copy_done_answer_before_sync", then(libpq, []step{
			{send: copyDone()}, {replies: "C", seen: "C"},
			{send: syncMsg()}, {replies: "Z", status: 'I', seen: "Z"},
		}, usable)},
		{"copy_fail", then(libpq, []step{
			{send: copyFail()}, {send: syncMsg()},
			{replies: "E{57014}Z", status: 'I', seen: "EZ"},
		}, usable)},
		{"bad_row_after_copy_done", then(libpq, []step{
			// The server read the first Sync before the row: one answer.
			{send: copyDone()}, {send: syncMsg()},
			{replies: "E{22P02}Z", status: 'I', seen: "EZ"},
		}, usable)},
		{"error_before_first_sync_read", then(libpq, []step{
			// A BEFORE STATEMENT trigger fails before the server reads the
			// first Sync: it answers both.
			{send: copyDone()}, {send: syncMsg()},
			{replies: "E{P0001}ZZ", status: 'I', seen: "EZZ"},
		}, usable)},
		{"bad_row_before_copy_done", then(libpq, []step{
			// The error comes while the client still sends data: what the
			// server skips is known at the client's next Sync.
			{replies: "E{22P02}", seen: "E"},
			{send: Msg{Type: 'd'}}, {send: copyDone()}, {send: syncMsg()},
			{replies: "Z", status: 'I', seen: "Z"},
		}, usable)},
		{"error_before_first_sync_read_before_copy_done", then(libpq, []step{
			{replies: "E{P0001}Z", status: 'I', seen: "EZ"}, // the first Sync's answer
			{send: copyDone()}, {send: syncMsg()},
			{replies: "Z", status: 'I', seen: "Z"},
		}, usable)},
		{"spare_answer_after_next_query_sent", then(libpq, []step{
			{send: copyDone()}, {send: syncMsg()},
			{replies: "E{P0001}Z", status: 'I', seen: "EZ"},
			{send: q("SELECT 1")},
			{replies: "ZTDCZ", status: 'I', seen: "ZTDCZ"},
			{send: q("SELECT 2")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		})},
		{"no_spare_after_another_reply", then(libpq, []step{
			{send: copyDone()}, {send: syncMsg()},
			{replies: "E{22P02}Z", status: 'I', seen: "EZ"},
			{send: q("SELECT 1")},
			{replies: "TDCZZ", status: 'I', seen: "TDCZ!"},
		})},
		{"message_after_failed_copy_before_sync_refused", then(libpq, []step{
			// Whether the server runs or skips the Parse depends on
			// whether it read the first Sync before the error.
			{replies: "E{22P02}", seen: "E"},
			{send: copyDone()},
			{send: parse("", "SELECT 1"), up: "FAIL"},
		})},
		{"message_after_copy_end_queued_when_copy_fails", then(libpq, []step{
			{send: copyDone()}, {send: parse("", "SELECT 1")}, {send: syncMsg()},
			{replies: "E{22P02}", seen: "!"},
		})},
		{"query_during_copy_refused", then(libpq, []step{
			{send: q("SELECT 1"), up: "FAIL"},
		})},
		{"parse_during_copy_refused", then(libpq, []step{
			{send: parse("", "SELECT 1"), up: "FAIL"},
		})},
		{"copy_complete_before_copy_done_fails", then(libpq, []step{
			{replies: "C", seen: "!"},
		})},
		{"message_in_copy_before_copy_in_response", []step{
			// Sent before the server said COPY: it reads the Parse as bad
			// copy data and ends the session; so does the gate.
			{send: parse("", cp)}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{send: parse("", "SELECT 1")},
			{replies: "12G", seen: "12G"},
			{replies: "E{08P01}", seen: "!"},
		}},
		{"execute_fails_no_copy", []step{
			{send: parse("", "COPY missing FROM STDIN")}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{replies: "12E{42P01}Z", status: 'I', seen: "12EZ"},
			// Outside COPY-in mode the server ignores copy messages.
			{send: Msg{Type: 'd'}}, {send: copyDone()}, {send: syncMsg()},
			{replies: "Z", status: 'I', seen: "Z"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"stray_copy_done_behind_a_query", []step{
			// No COPY runs: the server ignores it; so does the gate.
			{send: q("SELECT 1")}, {send: copyDone()}, {send: copyFail()},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
			{send: copyDone()}, // nothing in flight
			{send: q("SELECT 2")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"two_copies_in_sequence", then(libpq, []step{
			{send: copyDone()}, {send: syncMsg()},
			{replies: "CZ", status: 'I', seen: "CZ"},
		}, libpq, []step{
			{send: copyDone()}, {send: syncMsg()},
			{replies: "CZ", status: 'I', seen: "CZ"},
		}, usable)},
		{"two_copies_pipelined", []step{
			{send: parse("", cp)}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{send: copyDone()}, {send: syncMsg()},
			{send: parse("", cp)}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{send: copyDone()}, {send: syncMsg()},
			{replies: "12GCZ12GCZ", status: 'I', seen: "12GCZ12GCZ"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"simple_query_two_copies_with_syncs", []step{
			{send: q("COPY a FROM STDIN; COPY b FROM STDIN")},
			{replies: "G", seen: "G"},
			{send: syncMsg()}, {send: copyDone()},
			{replies: "CG", seen: "CG"},
			{send: syncMsg()}, {send: copyDone()},
			{replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"simple_query_copy_error_with_sync", []step{
			// The Query's ReadyForQuery, then the Sync's if the server
			// read it after the error.
			{send: q(cp)},
			{replies: "G", seen: "G"},
			{send: syncMsg()}, {send: Msg{Type: 'd'}}, {send: copyDone()},
			{replies: "E{22P02}ZZ", status: 'I', seen: "EZZ"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"probe_waits_for_copy_end", []step{
			// CALL may set a token: the probe goes behind the Sync after
			// CopyDone, not the one the server ignores in COPY-in mode.
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", cp)}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
			{send: syncMsg(), up: "S"}, // a second one, still no probe
			{replies: "12C1" + checkReply + "2G", seen: "12C12G"},
			{send: copyDone()},
			{send: syncMsg(), up: "S " + probeMsgs},
			{replies: "CZ3123C3Z", status: 'I', seen: "CZ"},
			{send: q("SELECT 1")}, // the probe said: no token
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"probe_after_copy_failed_without_copy_done", []step{
			// The server left COPY-in mode at the error: the probe may go
			// behind the client's next Sync, CopyDone or not.
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", cp)}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
			{replies: "12C1" + checkReply + "2G", seen: "12C12G"},
			{replies: "E{22P02}", seen: "E"},
			{send: syncMsg(), up: "S " + probeMsgs},
			{replies: "Z3123C3Z", status: 'I', seen: "Z"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
		{"probe_after_failed_copy_with_spare", []step{
			{send: parse("", "CALL p()")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", cp)}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec("")},
			{send: syncMsg(), up: "S"},
			{replies: "12C1" + checkReply + "2G", seen: "12C12G"},
			{send: copyFail()},
			{send: syncMsg(), up: "S " + probeMsgs},
			// A cancel before the server read the first Sync: two answers,
			// then the probe's, hidden.
			{replies: "E{57014}ZZ3123C3Z", status: 'I', seen: "EZZ"},
			{send: q("SELECT 1")},
			{replies: "TDCZ", status: 'I', seen: "TDCZ"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { replay(t, nil, false, tt.steps) })
	}
}
