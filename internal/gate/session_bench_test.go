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
	})
	b.Run("fenced", func(b *testing.B) {
		s := benchSession(b, true)
		for b.Loop() {
			s.Client(q(sel))
			feed(s, "CTDCZ", 'I')
		}
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
		{"fenced", true, "32C3" + "2DCZ"}, // the check's Close+Parse+Bind+Execute+Close replies, then the client's
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
		})
	}
}
