package gate

import "testing"

// TestTranscriptsCursors: SQL cursors live as long as the server keeps
// them, and the gate follows the server: every DECLARE is read, in any
// session, so that a FETCH or MOVE is never refused for a cursor the
// server has; a WITH HOLD cursor outlives its transaction; a FETCH of a
// cursor the session knows runs that cursor's query, nothing opaque (no
// probe, no check in a session without a token).
func TestTranscriptsCursors(t *testing.T) {
	const check = "CALL fence.check('', '', '', '', false, true);"
	tests := []struct {
		name  string
		token bool
		steps []step
	}{
		{name: "fetch_twice_without_token", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE k SCROLL CURSOR FOR SELECT 1")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("FETCH 2 FROM k")}, {replies: "TDCZ", status: 'T', seen: "TDCZ"},
			{send: q("FETCH 2 FROM k")}, {replies: "TDCZ", status: 'T', seen: "TDCZ"},
			{send: q("MOVE BACKWARD ALL IN k")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("FETCH LAST FROM k")}, {replies: "TDCZ", status: 'T', seen: "TDCZ"},
		}},
		{name: "with_hold_outlives_commit", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE h CURSOR WITH HOLD FOR SELECT 1")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("COMMIT")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("FETCH h")}, {replies: "TDCZ", status: 'I', seen: "TDCZ"},
			{send: q("FETCH h")}, {replies: "TDCZ", status: 'I', seen: "TDCZ"},
			{send: q("CLOSE h")}, {replies: "CZ", status: 'I', seen: "CZ"},
		}},
		{name: "with_hold_outside_a_transaction", steps: []step{
			{send: q("DECLARE h CURSOR WITH HOLD FOR SELECT 1")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("FETCH h")}, {replies: "TDCZ", status: 'I', seen: "TDCZ"},
			{send: q("FETCH h")},
		}},
		{name: "cursor_by_extended_protocol", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: parse("", `DECLARE "stream" CURSOR FOR SELECT 1`)}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{replies: "12CZ", status: 'T', seen: "12CZ"},
			{send: parse("", `FETCH FORWARD 3 FROM "stream"`)}, {send: bind("", "")}, {send: exec("")}, {send: syncMsg()},
			{replies: "12DCZ", status: 'T', seen: "12DCZ"},
			{send: parse("", `FETCH FORWARD 3 FROM "stream"`)}, {send: bind("", "")}, {send: exec("")},
		}},
		{name: "fenced_fetch_checked_once_per_transaction", token: true, steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE k CURSOR FOR SELECT 1"), up: "Q(" + check + " DECLARE k CURSOR FOR SELECT 1)"},
			{replies: "CCZ", status: 'T', seen: "CZ"},
			{send: q("FETCH k")}, {replies: "TDCZ", status: 'T', seen: "TDCZ"},
		}},
		{name: "fenced_with_hold_fetch_checked_in_a_later_transaction", token: true, steps: []step{
			{send: q("DECLARE h CURSOR WITH HOLD FOR SELECT 1"), up: "Q(" + check + " DECLARE h CURSOR WITH HOLD FOR SELECT 1)"},
			{replies: "CCZ", status: 'I', seen: "CZ"},
			{send: q("FETCH h"), up: "Q(" + check + " FETCH h)"},
		}},
		{name: "close_all_forgets_held_cursors", token: true, steps: []step{
			{send: q("DECLARE h CURSOR WITH HOLD FOR SELECT 1"), up: "Q(" + check + " DECLARE h CURSOR WITH HOLD FOR SELECT 1)"},
			{replies: "CCZ", status: 'I', seen: "CZ"},
			{send: q("CLOSE ALL")}, {replies: "CZ", status: 'I', seen: "CZ"},
			{send: q("FETCH h"), up: "Q(" + check + " FETCH h) " + probeMsgs}, // unknown now: opaque, checked
		}},
		{name: "comment_token_of_declare_fixed_for_fetch", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("/* fencing_token=7 resource=r */ DECLARE k CURSOR FOR SELECT 1"),
				up: "Q(CALL fence.check('7', 'r', '', '', false, true); /* fencing_token=7 resource=r */ DECLARE k CURSOR FOR SELECT 1)"},
			{replies: "CCZ", status: 'T', seen: "CZ"},
			{send: q("FETCH k")}, // the transaction passed the check of token 7
		}},
		{name: "execute_of_parsed_declare_distrusts_cursors", steps: []step{
			{send: q("BEGIN")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: q("DECLARE k CURSOR FOR SELECT 1")}, {replies: "CZ", status: 'T', seen: "CZ"},
			{send: parse("d", "DECLARE k2 CURSOR FOR SELECT 2")}, {send: syncMsg()}, {replies: "1Z", status: 'T', seen: "1Z"},
			{send: q("EXECUTE d")}, {replies: "CZ", status: 'T', seen: "CZ"},
			// k may have been closed and declared again by what ran: it
			// runs as opaque code, and a probe follows.
			{send: q("FETCH k"), up: "Q(FETCH k) " + probeMsgs},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { replay(t, nil, tt.token, tt.steps) })
	}
}

// TestTranscriptsUnknownCursorWithGuardedTables: where the config guards
// tables, a cursor the proxy never saw declared (a function's refcursor)
// is refused where fencing is possible: the text guard cannot see what its
// query writes.
func TestTranscriptsUnknownCursorWithGuardedTables(t *testing.T) {
	replay(t, twoResources(), false, []step{
		{send: q("FETCH ALL FROM c"), up: "Q(" + raiseText(codeUnknownStmt, unknownMsg("cursor", "c")) + "; FETCH ALL FROM c) " + probeMsgs},
	})
}
