package gate

import (
	"testing"
)

// benchSession is a session past its startup probe, as newWire makes it,
// for benchmarks.
func benchSession(b *testing.B, token bool) *Session {
	b.Helper()
	s := NewSession(&Config{Analyzer: NewAnalyzer(100)}, nil)
	s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "on"})
	s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "UTF8"})
	s.Probe()
	probe := "3123C3Z"
	if token {
		probe = "3123DC3Z"
	}
	feed(s, probe, 'I')
	return s
}

// feed passes server replies (type letters) to s.
func feed(s *Session, types string, status byte) {
	for i := 0; i < len(types); i++ {
		s.Server(Reply{Type: types[i], Status: status})
	}
}

// answered fails a benchmark whose replies left some of the gate's
// messages unanswered: they are not the transcript of what it sent.
func answered(b *testing.B, s *Session) {
	b.Helper()
	if n := len(s.slots.buf) - s.slots.head; n != 0 {
		b.Fatalf("%d of the gate's messages left unanswered: the replies are not its transcript", n)
	}
}

// BenchmarkSessionQuery is the gate's cost for one simple-protocol Query
// and its replies: a plain session (nothing added), a session fenced by its
// startup token (a check injected per autocommit statement), and a
// statement inside a transaction that has passed its check.
func BenchmarkSessionQuery(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = 42"
	b.Run("plain", func(b *testing.B) {
		s := benchSession(b, false)
		for b.Loop() {
			s.Client(q(sel))
			feed(s, "TDCZ", 'I')
		}
		answered(b, s)
	})
	b.Run("fenced", func(b *testing.B) {
		s := benchSession(b, true)
		for b.Loop() {
			s.Client(q(sel))
			feed(s, "CTDCZ", 'I')
		}
		answered(b, s)
	})
	b.Run("checked-transaction", func(b *testing.B) {
		s := benchSession(b, true)
		s.Client(q("BEGIN"))
		feed(s, "CZ", 'T')
		s.Client(q(sel))
		feed(s, "CTDCZ", 'T')
		for b.Loop() {
			s.Client(q(sel))
			feed(s, "TDCZ", 'T')
		}
		answered(b, s)
	})
}

// BenchmarkSessionExtended is the gate's cost for one Bind/Execute/Sync of
// a prepared statement (pgbench -M prepared) and its replies.
func BenchmarkSessionExtended(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	for _, tc := range []struct {
		name    string
		token   bool
		replies string
	}{
		{"plain", false, "2DCZ"},
		{"fenced", true, "3123C3" + "2DCZ"}, // the check's Close+Parse+Bind+Close+Execute+Close replies, then the client's
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchSession(b, tc.token)
			s.Client(parse("p", sel))
			s.Client(syncMsg())
			feed(s, "1Z", 'I')
			for b.Loop() {
				s.Client(bind("", "p"))
				s.Client(exec(""))
				s.Client(syncMsg())
				feed(s, tc.replies, 'I')
			}
			answered(b, s)
		})
	}
}

// BenchmarkSessionUnnamed is the gate's cost for the extended protocol's
// one-shot statement (pgbench -M extended, a driver's query with
// parameters): Parse, Bind, Describe, Execute and Sync of the unnamed
// statement, and their replies.
func BenchmarkSessionUnnamed(b *testing.B) {
	const sel = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	text := func() string { return string([]byte(sel)) } // a new string for each Parse, as decoding one makes
	for _, tc := range []struct {
		name    string
		token   bool
		replies string
	}{
		{"plain", false, "12TDCZ"},
		{"fenced", true, "1" + "3123C3" + "2TDCZ"}, // the check comes before the Bind
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchSession(b, tc.token)
			for b.Loop() {
				s.Client(parse("", text()))
				s.Client(bind("", ""))
				s.Client(Msg{Type: 'D', Object: 'P'})
				s.Client(exec(""))
				s.Client(syncMsg())
				feed(s, tc.replies, 'I')
			}
			answered(b, s)
		})
	}
}
