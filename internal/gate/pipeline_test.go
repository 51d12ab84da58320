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
