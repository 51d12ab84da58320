package gate

import (
	"strings"
	"testing"
)

// Every text after the first of a pipeline may be read under settings that
// code before it changed unseen (lexUnseen). A risky text (a backslash, a
// non-ASCII byte) holding a word that may matter is analysed under the
// settings the proxy knows, and the statement after it checked again, in
// a session with or without a token and in transaction pool mode: a batch
// of data such as 'Reset Café' runs, however long, whatever words its data
// holds. In a session without a token, a probe after the batch asks
// whether one was set, and the session goes back to running unchecked.
func TestPipelinedRiskyDataIsAnalysedNotRefused(t *testing.T) {
	data := []string{
		"Reset Café",
		`no reset \ here`,
		"fence café",
		"U&Café reset",
		"é\x1f close",
		"-- resource é",
		"/* fencing_token=5 é */",
	}
	modes := []struct {
		name  string
		start func(t *testing.T) *wire
		probe bool
		token bool // the server has a token: its probes find one
	}{
		{"session without a token", func(t *testing.T) *wire { return newWire(t, nil, false) }, true, false},
		{"session with a token", func(t *testing.T) *wire { return newWire(t, nil, true) }, false, true},
		{"transaction pool", func(t *testing.T) *wire { return pooledWire(t, nil) }, false, false},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			w := m.start(t)
			var upstream []string
			for i, text := range append([]string{"first"}, data...) {
				sql := "INSERT INTO t VALUES ('" + strings.ReplaceAll(text, "'", "''") + "')"
				upstream = append(upstream, w.send(parse("", sql)), w.send(bind("", "")))
				got := w.send(exec(""))
				if strings.Contains(got, "~raise") {
					t.Errorf("%q, pipelined as text %d: refused: %s", text, i+1, got)
				}
				upstream = append(upstream, got)
			}
			got := w.send(syncMsg())
			if probed := strings.Contains(got, "~probe"); probed != m.probe {
				t.Errorf("a probe after the batch: %v, want %v (%s)", probed, m.probe, got)
			}
			upstream = append(upstream, got)
			if seen := w.replies(successFor(strings.Join(upstream, " "), m.token), 'I'); strings.ContainsAny(seen, "E!") {
				t.Fatalf("the client saw %q", seen)
			}
			// The statement after the batch is checked only where the
			// session may hold a token: a session without one, after its
			// probe, runs unchecked again.
			checked := strings.Contains(w.send(q("UPDATE t SET v = 1")), "fence.check(")
			if want := m.name != "session without a token"; checked != want {
				t.Errorf("the statement after the batch checked: %v, want %v", checked, want)
			}
		})
	}
}

// successFor returns the replies of a server that runs every message of
// upstream (as wire.send shows them) without an error; token says whether
// its probes find a token.
func successFor(upstream string, token bool) string {
	var b strings.Builder
	for _, m := range strings.Fields(upstream) {
		switch {
		case strings.HasPrefix(m, "C("):
			b.WriteByte('3')
		case strings.HasPrefix(m, "P("):
			b.WriteByte('1')
		case strings.HasPrefix(m, "B("):
			b.WriteByte('2')
		case m == "E(~probe)" && token:
			b.WriteString("DC")
		case strings.HasPrefix(m, "E("):
			b.WriteByte('C')
		case m == "S":
			b.WriteByte('Z')
		}
	}
	return b.String()
}

// A pipeline of whole transactions (psycopg's pipeline mode with a
// transaction block per batch, JDBC batches with autocommit off): the end
// of a transaction may revert a change of the lexing settings made in it,
// but only when one may have been made (lexTouched); otherwise the texts
// after a COMMIT are read as any pipelined text is, and data holding
// "fence", "u&" or a directive's words runs, with or without a token.
func TestPipelinedTransactionsOfRiskyDataAreNotRefused(t *testing.T) {
	batch := []string{
		"BEGIN", "INSERT INTO t VALUES ('first')", "COMMIT",
		"BEGIN", "INSERT INTO t VALUES ('Reset Café')", "INSERT INTO t VALUES ('garden fence é')",
		"INSERT INTO t VALUES ('U&Café')", "/* fencing_token=5 resource=r */ INSERT INTO t VALUES ('é')", "ROLLBACK",
		"BEGIN", "INSERT INTO t VALUES ('fence é')", "COMMIT",
	}
	for name, start := range map[string]func(t *testing.T) *wire{
		"session without a token": func(t *testing.T) *wire { return newWire(t, nil, false) },
		"session with a token":    func(t *testing.T) *wire { return newWire(t, nil, true) },
		"transaction pool":        func(t *testing.T) *wire { return pooledWire(t, nil) },
	} {
		w := start(t)
		for _, text := range batch {
			w.send(parse("", text))
			got := w.send(bind("", "")) + w.send(exec(""))
			if strings.Contains(got, "~raise") {
				t.Errorf("%s: %q refused: %s", name, text, got)
			}
		}
	}
}

// The same pipeline after a change of standard_conforming_strings in the
// transaction: the COMMIT may revert it, so a risky text after it that may
// carry what the proxy reads from text (a directive) is refused where the
// session may hold a token.
func TestRiskyTextPipelinedAfterARevertedLexingChangeIsRefused(t *testing.T) {
	for _, end := range []string{"COMMIT", "ROLLBACK", "ROLLBACK TO sp"} {
		w := newWire(t, nil, true)
		for _, text := range []string{"BEGIN", "SAVEPOINT sp", "SET LOCAL standard_conforming_strings = off", end} {
			w.send(parse("", text))
			w.send(bind("", ""))
			w.send(exec(""))
		}
		w.send(parse("", "/* fencing_token=5 resource=r */ INSERT INTO t VALUES ('é')"))
		got := w.send(bind("", "")) + w.send(exec(""))
		if !strings.Contains(got, "~raise") {
			t.Errorf("after %s: not refused: %s", end, got)
		}
	}
}

// Parsed behind a call whose code may have turned
// standard_conforming_strings off, a text holding a directive past its
// first backslash could read as a literal to the proxy and as a comment to
// the server: it is refused in every mode. The same directive before the
// first risky byte reads the same either way, and is read.
func TestADirectivePastARiskyByteInAPipelineIsRefused(t *testing.T) {
	hidden := `UPDATE t SET v = length('a\'' /* fencing_token=5 resource=r */ || ' -- '` + "\n) WHERE id = 1"
	leading := `/* fencing_token=5 resource=r */ UPDATE t SET v = length('a\b') WHERE id = 1`
	for name, start := range map[string]func(t *testing.T) *wire{
		"session without a token": func(t *testing.T) *wire { return newWire(t, nil, false) },
		"session with a token":    func(t *testing.T) *wire { return newWire(t, nil, true) },
		"transaction pool":        func(t *testing.T) *wire { return pooledWire(t, nil) },
	} {
		for text, refused := range map[string]bool{hidden: true, leading: false} {
			w := start(t)
			w.send(parse("", "SELECT f()"))
			w.send(bind("", ""))
			w.send(exec(""))
			w.send(parse("", text))
			got := w.send(bind("", "")) + " " + w.send(exec(""))
			if strings.Contains(got, "~raise") != refused {
				t.Errorf("%s: %.40q: refused %v, want %v: %s", name, text, !refused, refused, got)
			}
			if !refused && !strings.Contains(got, "~check") {
				t.Errorf("%s: the leading directive was not checked: %s", name, got)
			}
		}
	}
}
