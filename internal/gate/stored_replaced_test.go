package gate

import "testing"

// TestTranscriptsStoredStatementMayBeReplaced: a function called from a
// plain SELECT can DEALLOCATE a statement the client prepared and PREPARE a
// query or DML statement under its name (EXECUTE 'PREPARE s AS UPDATE …'
// in PL/pgSQL), or CLOSE a portal and DECLARE a cursor in its place. A
// statement that runs by such a name (SQL EXECUTE, FETCH, MOVE; the
// Execute of a portal that has a name or is bound to a named statement) is
// therefore checked where the session may carry a token even when what the
// proxy knows under the name needs no check by itself (SHOW, SET x …): what
// runs may be a write. The unnamed statement and portal cannot be made by
// SQL, and stay as they were. Transaction control (BEGIN, COMMIT, ROLLBACK,
// savepoints, SET TRANSACTION) and what sets the token stay unchecked by
// name: nothing may run before some of them in their transaction, and a
// check under the old token would refuse a new holder's hand-over.
func TestTranscriptsStoredStatementMayBeReplaced(t *testing.T) {
	const check = "CALL fence.check('', '', '', '', false, true);"
	for _, text := range []string{"SHOW work_mem", "SET application_name = 'x'"} {
		t.Run("sql_execute/"+text, func(t *testing.T) {
			replay(t, nil, true, []step{
				{send: parse("s", text)}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
				{send: q("EXECUTE s"), up: "Q(" + check + " EXECUTE s)"},
			})
		})
		t.Run("bind_named_statement/"+text, func(t *testing.T) {
			replay(t, nil, true, []step{
				{send: parse("s", text)}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
				{send: bind("", "s"), up: checkMsgs + " B()"}, {send: exec(""), up: "E()"},
			})
		})
		t.Run("named_portal/"+text, func(t *testing.T) {
			replay(t, nil, true, []step{
				{send: parse("", text)}, {send: bind("p", ""), up: checkMsgs + " B(p)"}, {send: exec("p"), up: "E(p)"},
			})
		})
		t.Run("unnamed_stays_unchecked/"+text, func(t *testing.T) {
			replay(t, nil, true, []step{
				{send: parse("", text)}, {send: bind("", "")}, {send: exec("")},
			})
		})
		t.Run("no_token_nothing_added/"+text, func(t *testing.T) {
			replay(t, nil, false, []step{
				{send: parse("s", text)}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
				{send: bind("", "s")}, {send: exec("")},
			})
		})
	}
	for _, text := range []string{"SET lock.fencing_token = 43", "RESET lock.fencing_token", "SELECT pg_catalog.set_config('lock.fencing_token', '43', false)",
		"SAVEPOINT x", "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "COMMIT", "ROLLBACK"} {
		// See Session.replaceable and Statement.txnControl.
		t.Run("unchecked_by_name/"+text, func(t *testing.T) {
			replay(t, nil, true, []step{
				{send: parse("s", text)}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
				{send: bind("", "s")}, {send: exec("")},
			})
		})
	}
	t.Run("named_vacuum_refused", func(t *testing.T) {
		// No check can go in front of it (the server refuses VACUUM in a
		// pipeline after another Execute): like a token on it, refused.
		replay(t, nil, true, []step{
			{send: parse("s", "VACUUM")}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
			{send: bind("", "s")}, {send: exec(""), up: raiseMsgs() + " E()"},
		})
	})
	t.Run("aborted_transaction_adds_nothing", func(t *testing.T) {
		replay(t, nil, true, []step{
			{send: parse("s", "ROLLBACK")}, {send: syncMsg()}, {replies: "1Z", status: 'I', seen: "1Z"},
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("SELECT 1/0"), up: "Q(" + check + " SELECT 1/0)"}, {replies: "CE{22012}Z", status: 'E', seen: "EZ"},
			{send: bind("", "s")}, {send: exec("")}, {send: syncMsg()},
		})
	})
}
