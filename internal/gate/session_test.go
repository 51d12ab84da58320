package gate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// wire drives a Session as pgwire does and records, in a compact notation,
// what goes upstream and what the client sees.
//
// Upstream: Q(text) P(name) B(portal) E(portal) C(S name) D(P name) S F H,
// with the proxy's reserved prefix shown as "~". Client messages are given
// the same way; replies are type letters, 'Z' taking the status given.
type wire struct {
	t *testing.T
	s *Session
}

// newWire starts a session, answering its startup probe: token says
// whether the server reports a fencing token (startup options, role
// defaults…).
func newWire(t *testing.T, cfg *Config, token bool) *wire {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.Analyzer == nil {
		cfg.Analyzer = NewAnalyzer(100)
	}
	w := &wire{t: t, s: NewSession(cfg, nil)}
	w.s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "on"})
	w.s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "UTF8"})
	if got := show(w.s.Probe()); got != "C(S ~probe) P(~probe) B(~probe) C(S ~probe) E(~probe) C(P ~probe) S" {
		t.Fatalf("startup probe %s", got)
	}
	probe := "3123C3Z"
	if token {
		probe = "3123DC3Z"
	}
	if seen := w.replies(probe, 'I'); seen != "" {
		t.Fatalf("client saw the probe's replies: %q", seen)
	}
	return w
}

// show renders messages sent upstream.
func show(msgs []pgproto3.FrontendMessage) string {
	var out []string
	for _, m := range msgs {
		out = append(out, showOne(m))
	}
	return strings.Join(out, " ")
}

func showOne(m pgproto3.FrontendMessage) string {
	r := strings.NewReplacer(reservedPrefix, "~")
	switch m := m.(type) {
	case *pgproto3.Query:
		return "Q(" + r.Replace(m.String) + ")"
	case *pgproto3.Parse:
		return "P(" + r.Replace(m.Name) + ")"
	case *pgproto3.Bind:
		return "B(" + r.Replace(m.DestinationPortal) + ")"
	case *pgproto3.Execute:
		return "E(" + r.Replace(m.Portal) + ")"
	case *pgproto3.Close:
		return fmt.Sprintf("C(%c %s)", m.ObjectType, r.Replace(m.Name))
	case *pgproto3.Describe:
		return fmt.Sprintf("D(%c %s)", m.ObjectType, r.Replace(m.Name))
	case *pgproto3.Sync:
		return "S"
	}
	return fmt.Sprintf("%T", m)
}

// send passes one client message and returns what goes upstream; "WAIT"
// when gate holds it back.
func (w *wire) send(m Msg) string {
	d := w.s.Client(m)
	if d.Fail != "" {
		return "FAIL"
	}
	if d.Wait {
		if len(d.Before) > 0 {
			return "WAIT " + show(d.Before)
		}
		return "WAIT"
	}
	var out []string
	if len(d.Before) > 0 {
		out = append(out, show(d.Before))
	}
	switch {
	case d.Replace != nil:
		out = append(out, showOne(d.Replace))
	case !d.Drop:
		out = append(out, clientShow(m))
	}
	if len(d.After) > 0 {
		out = append(out, show(d.After))
	}
	return strings.Join(out, " ")
}

func clientShow(m Msg) string {
	switch m.Type {
	case 'Q':
		return "Q(" + m.Text + ")"
	case 'P':
		return "P(" + m.Name + ")"
	case 'B':
		return "B(" + m.Portal + ")"
	case 'E':
		return "E(" + m.Portal + ")"
	case 'C':
		return fmt.Sprintf("C(%c %s)", m.Object, m.Name)
	case 'D':
		return fmt.Sprintf("D(%c %s)", m.Object, m.Name)
	}
	return string(m.Type)
}

// replies feeds server replies and returns what the client sees: the
// letters forwarded, 'E' followed by the SQLSTATE when an error is
// replaced, and "!" when gate fails the session. 'E' replies carry code
// 55Z01 unless given as E<code> in braces, e.g. "E{42P05}".
func (w *wire) replies(types string, status byte) string {
	var seen strings.Builder
	for i := 0; i < len(types); i++ {
		r := Reply{Type: types[i]}
		switch types[i] {
		case 'Z':
			r.Status = status
		case 'E':
			code := "55Z01"
			if i+1 < len(types) && types[i+1] == '{' {
				end := strings.IndexByte(types[i:], '}')
				code, i = types[i+2:i+end], i+end
			}
			r.Error = &pgproto3.ErrorResponse{Severity: "ERROR", Code: code, Message: "m"}
		}
		v := w.s.Server(r)
		switch v.Act {
		case Forward:
			seen.WriteByte(r.Type)
		case Replace:
			seen.WriteString("E" + v.Error.Code)
		case Fail:
			seen.WriteString("!")
		}
	}
	return seen.String()
}

// Shorthands for client messages.
func q(text string) Msg            { return Msg{Type: 'Q', Text: text} }
func parse(name, text string) Msg  { return Msg{Type: 'P', Name: name, Text: text} }
func bind(portal, stmt string) Msg { return Msg{Type: 'B', Portal: portal, Name: stmt} }
func exec(portal string) Msg       { return Msg{Type: 'E', Portal: portal} }
func syncMsg() Msg                 { return Msg{Type: 'S'} }

// refusalText is the statement the gate injects to refuse with r.
func refusalText(r refusal) string {
	return strings.ReplaceAll(string(r.sql()), reservedPrefix, "~")
}

func TestQueryInjection(t *testing.T) {
	tests := []struct {
		name  string
		token bool // the startup probe finds a token
		pre   []string
		query string
		want  string
	}{
		{name: "no token", query: "UPDATE t SET v = 1", want: "Q(UPDATE t SET v = 1)"},
		{name: "comment token", query: "/* fencing_token=42 resource=r */ UPDATE t SET v = 1",
			want: "Q(CALL fence.check('42', 'r', '', '', false, true); /* fencing_token=42 resource=r */ UPDATE t SET v = 1)"},
		{name: "read is fenced too", query: "SELECT v FROM t /* fencing_token=42 resource=r */",
			want: "Q(CALL fence.check('42', 'r', '', '', false, true); SELECT v FROM t /* fencing_token=42 resource=r */)"},
		{name: "setting statements are not fenced", token: true, query: "SET lock.resource = 'x'", want: "Q(SET lock.resource = 'x')"},
		{name: "set_config select is not fenced", token: true,
			query: "SELECT pg_catalog.set_config('lock.fencing_token', '6', false)", want: "Q(SELECT pg_catalog.set_config('lock.fencing_token', '6', false))"},
		{name: "unqualified set_config is checked (a user's overload may run)", token: true,
			query: "SELECT set_config('lock.fencing_token', '6', false)", want: "Q(CALL fence.check('', '', '', '', false, true); SELECT set_config('lock.fencing_token', '6', false))"},
		{name: "cast set_config arguments are checked (a domain may run code)", token: true,
			query: "SELECT pg_catalog.set_config('lock.fencing_token', '6'::tok, false)", want: "Q(CALL fence.check('', '', '', '', false, true); SELECT pg_catalog.set_config('lock.fencing_token', '6'::tok, false))"},
		{name: "set_config with more than the hand-over is checked", token: true,
			query: "SELECT set_config('lock.fencing_token', '6', false), f()",
			want:  "Q(CALL fence.check('', '', '', '', false, true); SELECT set_config('lock.fencing_token', '6', false), f())"},
		{name: "set_config from a table is checked", token: true,
			query: "SELECT set_config('lock.fencing_token', v, false) FROM t",
			want:  "Q(CALL fence.check('', '', '', '', false, true); SELECT set_config('lock.fencing_token', v, false) FROM t)"},
		{name: "FETCH of a cursor opened by unseen code is checked with the session's token", token: true, query: "FETCH ALL FROM c",
			want: "Q(CALL fence.check('', '', '', '', false, true); FETCH ALL FROM c)"},
		{name: "startup token fences every transaction", token: true, query: "DELETE FROM t",
			want: "Q(CALL fence.check('', '', '', '', false, true); DELETE FROM t)"},
		{name: "SET then write in one query", query: "SET lock.fencing_token = 7; UPDATE t SET v = 2",
			want: "Q(SET lock.fencing_token = 7;CALL fence.check('', '', '', '', false, true);  UPDATE t SET v = 2)"},
		{name: "spaced setting name", query: "SET lock . fencing_token = 7; UPDATE t SET v = 2",
			want: "Q(SET lock . fencing_token = 7;CALL fence.check('', '', '', '', false, true);  UPDATE t SET v = 2)"},
		{name: "unicode-escaped setting name", query: `SET lock.U&"\0066encing_token" = 7; UPDATE t SET v = 2`,
			want: `Q(SET lock.U&"\0066encing_token" = 7;CALL fence.check('', '', '', '', false, true);  UPDATE t SET v = 2)`},
		{name: "one check per transaction", query: "BEGIN; UPDATE t SET v = 1; UPDATE t SET v = 2; COMMIT; /* fencing_token=3 resource=r */",
			want: "Q(BEGIN;CALL fence.check('3', 'r', '', '', false, true);  UPDATE t SET v = 1; UPDATE t SET v = 2; COMMIT; /* fencing_token=3 resource=r */)"},
		{name: "set_config in a data-modifying CTE is refused",
			query: "WITH x AS (SELECT set_config('lock.fencing_token', '41', true)) UPDATE t SET v = 1 FROM x",
			want:  "Q(" + refusalText(refSetAndWrite) + "; WITH x AS (SELECT set_config('lock.fencing_token', '41', true)) UPDATE t SET v = 1 FROM x)"},
		{name: "reserved name in SQL", query: `DEALLOCATE "fenceproxy` + "\x1f" + `check"`,
			want: "Q(" + refusalText(refReserved) + "; DEALLOCATE \"~check\")"},
		{name: "DO block checked and probed after", token: true, query: "DO $$BEGIN PERFORM 1; END$$",
			want: "Q(CALL fence.check('', '', '', '', false, true); DO $$BEGIN PERFORM 1; END$$) C(S ~probe) P(~probe) B(~probe) C(S ~probe) E(~probe) C(P ~probe) S"},
		{name: "DO block in a plain session is probed after", query: "DO $$BEGIN PERFORM set_config('lock.fencing_token', '5', false); END$$",
			want: "Q(DO $$BEGIN PERFORM set_config('lock.fencing_token', '5', false); END$$) C(S ~probe) P(~probe) B(~probe) C(S ~probe) E(~probe) C(P ~probe) S"},
		{name: "EXECUTE of an unknown statement is refused when fenced", token: true, query: "EXECUTE p",
			want: "Q(" + refusalText(refUnknown("prepared statement", "p")) + "; EXECUTE p)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWire(t, nil, tt.token)
			if got := w.send(q(tt.query)); got != tt.want {
				t.Fatalf("upstream\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
