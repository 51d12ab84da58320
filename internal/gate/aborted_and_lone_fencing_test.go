package gate

import "testing"

// TestTranscriptsLeavingAnAbortedTransactionChecksAgain: no check goes in
// front of what runs in a transaction the server reported aborted (it runs
// nothing but ROLLBACK, COMMIT, ROLLBACK TO), but every way out of it,
// also later in the same unit or through a statement prepared by Parse, makes
// the next read or write checked; and a unit begun before the server's
// answer does not take the aborted state once something of it ran.
func TestTranscriptsLeavingAnAbortedTransactionChecksAgain(t *testing.T) {
	const check = "CALL fence.check('', '', '', '', false, true);"
	abort := []step{
		{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
		{send: q("SAVEPOINT sp")}, {replies: "CZ", status: 'T', seen: "CZ"},
		{send: q("SELECT 1/0"), up: "Q(" + check + " SELECT 1/0)"}, {replies: "CE{22012}Z", status: 'E', seen: "EZ"},
	}
	cases := map[string][]step{
		"rollback_to_then_write_in_one_query": {
			{send: q("ROLLBACK TO sp; UPDATE t SET v = 1"), up: "Q(ROLLBACK TO sp;" + check + "  UPDATE t SET v = 1)"},
		},
		"commit_and_chain_then_write": {
			{send: q("COMMIT AND CHAIN; UPDATE t SET v = 1"), up: "Q(COMMIT AND CHAIN;" + check + "  UPDATE t SET v = 1)"},
		},
		"rollback_and_chain_then_write": {
			{send: q("ROLLBACK AND CHAIN; UPDATE t SET v = 1"), up: "Q(ROLLBACK AND CHAIN;" + check + "  UPDATE t SET v = 1)"},
		},
		"rollback_to_by_parse_then_write_in_one_unit": {
			{send: parse("", "ROLLBACK TO sp")}, {send: bind("", "")}, {send: exec("")},
			{send: parse("", "UPDATE t SET v = 1")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec(""), up: "E()"},
		},
		"rollback_to_then_write_pipelined_as_two_queries": {
			{send: q("ROLLBACK TO sp")},
			{send: q("UPDATE t SET v = 1"), up: "WAIT"},
			{replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("UPDATE t SET v = 1"), up: "Q(" + check + " UPDATE t SET v = 1)"},
		},
		"rollback_to_through_sql_execute_then_write": {
			{send: q("ROLLBACK TO sp")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: parse("r", "ROLLBACK TO sp")}, {send: syncMsg()}, {replies: "1Z", status: 'T', seen: "1Z"},
			{send: q("SELECT 1/0"), up: "Q(" + check + " SELECT 1/0)"}, {replies: "CE{22012}Z", status: 'E', seen: "EZ"},
			// The server refuses EXECUTE in an aborted transaction; were it
			// to run, the check would be undone: the write is checked after it.
			{send: q("EXECUTE r; UPDATE t SET v = 1"), up: "Q(EXECUTE r;" + check + "  UPDATE t SET v = 1)"},
		},
		"unit_begun_before_the_abort_was_known": {
			{send: q("ROLLBACK TO sp")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("SELECT 1/0"), up: "Q(" + check + " SELECT 1/0)"},
			// Pipelined: the server has not answered yet.
			{send: parse("", "ROLLBACK TO sp")}, {send: bind("", "")}, {send: exec("")},
			{replies: "CE{22012}Z", status: 'E', seen: "EZ"},
			{send: parse("", "UPDATE t SET v = 1")}, {send: bind("", ""), up: checkMsgs + " B()"}, {send: exec(""), up: "E()"},
		},
	}
	for name, tail := range cases {
		t.Run(name, func(t *testing.T) {
			replay(t, nil, true, append(append([]step{}, abort...), tail...))
		})
	}
}

// TestTranscriptsLoneDeclareOutsideABlockOnly: a DECLARE without HOLD (or a
// LOCK) gets no check only when it is alone in a Query the server runs
// outside a transaction block (it refuses it and runs nothing); where a
// block may be open (an earlier unit not yet answered, an Execute earlier
// in the open extended sequence) it waits or is checked.
func TestTranscriptsLoneDeclareOutsideABlockOnly(t *testing.T) {
	const check = "CALL fence.check('', '', '', '', false, true);"
	t.Run("alone_outside", func(t *testing.T) {
		replay(t, nil, true, []step{{send: q("DECLARE c CURSOR FOR SELECT f()")}})
	})
	t.Run("behind_a_pipelined_begin", func(t *testing.T) {
		replay(t, nil, true, []step{
			{send: q("BEGIN")},
			{send: q("DECLARE c CURSOR FOR SELECT f()"), up: "WAIT"},
			{replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE c CURSOR FOR SELECT f()"), up: "Q(" + check + " DECLARE c CURSOR FOR SELECT f())"},
		})
	})
	t.Run("after_begin_by_execute_in_the_open_sequence", func(t *testing.T) {
		replay(t, nil, true, []step{
			{send: parse("", "BEGIN")}, {send: bind("", "")}, {send: exec("")},
			{send: q("LOCK t"), up: "Q(" + check + " LOCK t)"},
		})
	})
	t.Run("second_statement_of_a_query", func(t *testing.T) {
		replay(t, nil, true, []step{
			{send: q("SELECT 1; DECLARE c CURSOR FOR SELECT f()"), up: "Q(" + check + " SELECT 1; DECLARE c CURSOR FOR SELECT f())"},
		})
	})
	t.Run("held_cursor_kept_after_rollback_is_checked", func(t *testing.T) {
		replay(t, nil, true, []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE h CURSOR WITH HOLD FOR SELECT 1"), up: "Q(" + check + " DECLARE h CURSOR WITH HOLD FOR SELECT 1)"},
			{replies: "CCZ", status: 'T', seen: "CZ"},
			{send: q("ROLLBACK")}, {replies: "CZ", status: 'I', seen: "CZ"},
			// A function may have declared another h since: what runs is
			// checked like any read.
			{send: q("FETCH h"), up: "Q(" + check + " FETCH h)"},
		})
	})
}
