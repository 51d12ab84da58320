package gate

import "testing"

// TestTranscriptsUnreadableParse: a statement prepared by Parse that the
// server may have lexed under settings the proxy has not seen (code sent
// earlier in the same pipeline may have changed client_encoding) is one
// statement: where it carries nothing the proxy reads from text (no
// directive, reserved name or schema fence) it runs as opaque code, checked
// with the session's token, instead of being refused. One that may carry a
// directive is still refused (0A000): the proxy cannot tell whether the
// server reads it as a comment.
func TestTranscriptsUnreadableParse(t *testing.T) {
	pipeline := func(last string) []step {
		var steps []step
		for _, text := range []string{"select 1", "select 'move é'"} {
			steps = append(steps, step{send: parse("", text)}, step{send: bind("", "")}, step{send: exec("")})
		}
		return append(steps, step{send: parse("", last)})
	}
	for name, text := range map[string]string{
		"no_directive_runs_checked":     "select 'é'",
		"control_byte_in_a_literal":     "select 'é\x1f'", // random data, as psycopg's tests insert
		"comment_without_a_directive":   "select 'é' /* a note */",
		"directive_key_without_comment": "select 'é resource'",
	} {
		t.Run(name, func(t *testing.T) {
			steps := append(pipeline(text),
				step{send: bind("", ""), up: checkMsgs + " B()"},
				step{send: exec(""), up: "E()"})
			replay(t, nil, false, steps)
		})
	}
	for name, text := range map[string]string{
		"directive_refused":     "/* fencing_token=5 resource=r */ select 'é'",
		"escaped_fence_refused": `select 'é' from U&"\0066ence".hwm`,
		"fence_word_refused":    "select 'é' from fence.hwm",
		"reserved_name_refused": "select 'é' from \"fenceproxy\x1fcheck\"",
	} {
		t.Run(name, func(t *testing.T) {
			steps := append(pipeline(text),
				step{send: bind("", "")},
				step{send: exec(""), up: raiseMsgs() + " E()"})
			replay(t, nil, false, steps)
		})
	}
}
