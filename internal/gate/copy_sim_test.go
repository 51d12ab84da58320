package gate

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// simMsg is a message as the simulated server reads it.
type simMsg struct {
	typ                byte
	text, name, portal string
	object             byte
	injected           bool
}

// simPG is a small model of PostgreSQL's reading of a message stream:
// simple and extended protocol, skip to Sync after an extended error,
// transaction status, COPY … FROM STDIN (Sync and Flush ignored, CopyDone
// completes, CopyFail fails, another message is a FATAL protocol
// violation), with the COPY failing before its failAt-th message read in
// COPY-in mode when failAt >= 0.
type simPG struct {
	out      []Reply
	copying  byte
	copyRead int
	rest     []string
	failAt   []int // per COPY started, in order
	copies   int
	curFail  int
	skip     bool
	block    bool // explicit transaction block
	aborted  bool
	stmts    map[string]string
	portals  map[string]string
	dead     bool
	token    bool
	pending  bool     // set by CALL settok() in the open transaction
	checked  bool     // a check ran in the current transaction
	unfenced []string // client writes that ran with a token and no check
}

func newSimPG(failAt []int) *simPG {
	return &simPG{failAt: failAt, stmts: map[string]string{}, portals: map[string]string{}}
}

func (pg *simPG) status() byte {
	switch {
	case pg.block && pg.aborted:
		return 'E'
	case pg.block:
		return 'T'
	}
	return 'I'
}

func (pg *simPG) emit(t byte) { pg.out = append(pg.out, Reply{Type: t}) }
func (pg *simPG) ready()      { pg.out = append(pg.out, Reply{Type: 'Z', Status: pg.status()}) }
func (pg *simPG) fail(code string) {
	pg.out = append(pg.out, Reply{Type: 'E', Error: &pgproto3.ErrorResponse{Severity: "ERROR", Code: code}})
	if pg.block {
		pg.aborted = true
	} else {
		pg.pending = false
	}
}

// splitSQL splits on ';' outside quotes and $tag$ bodies.
func splitSQL(s string) []string {
	var out []string
	start, i := 0, 0
	for i < len(s) {
		switch {
		case s[i] == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				i = len(s)
				continue
			}
			i += j + 2
			continue
		case s[i] == '$':
			j := strings.IndexByte(s[i+1:], '$')
			if j >= 0 {
				tag := s[i : i+j+2]
				k := strings.Index(s[i+len(tag):], tag)
				if k >= 0 {
					i += len(tag) + k + len(tag)
					continue
				}
			}
		case s[i] == ';':
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
		i++
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// run runs one statement: ok false on error; copy true when it started
// COPY-in mode.
func (pg *simPG) run(st string, rows bool) (ok, copy bool) {
	if pg.block && pg.aborted && !strings.HasPrefix(st, "ROLLBACK") && !strings.HasPrefix(st, "COMMIT") {
		pg.fail("25P02")
		return false, false
	}
	switch {
	case strings.HasPrefix(st, "DO $fence$BEGIN IF"):
		if pg.token {
			pg.fail("0A000")
			return false, false
		}
	case strings.HasPrefix(st, "DO "):
		code := "P0001"
		if i := strings.Index(st, "ERRCODE = '"); i >= 0 {
			code = st[i+11 : i+16]
		}
		pg.fail(code)
		return false, false
	case st == "SELEC":
		pg.fail("42601")
		return false, false
	case st == "SELECT 1/0":
		pg.fail("22012")
		return false, false
	case strings.HasPrefix(st, "CALL settok"):
		pg.pending = true
	case strings.HasPrefix(st, "CALL fence.check"):
		pg.checked = true
	case strings.HasPrefix(st, "INSERT"):
		if (pg.token || pg.pending) && !pg.checked {
			pg.unfenced = append(pg.unfenced, st)
		}
	case strings.HasPrefix(st, "ROLLBACK TO"):
		if !pg.block {
			pg.fail("25P01")
			return false, false
		}
		pg.aborted, pg.checked = false, false
	case st == fencestore.ProbeStatement:
		if pg.token || pg.pending {
			pg.emit('D')
		}
	case strings.HasPrefix(st, "SELECT"):
		if rows {
			pg.emit('T')
		}
		pg.emit('D')
	case st == "BEGIN":
		pg.block = true
	case st == "COMMIT", st == "ROLLBACK":
		if st == "COMMIT" && !pg.aborted && pg.pending {
			pg.token = true
		}
		pg.pending = false
		pg.block, pg.aborted, pg.checked = false, false, false
		pg.portals = map[string]string{}
	case strings.HasPrefix(st, "COPY"):
		if (pg.token || pg.pending) && !pg.checked {
			pg.unfenced = append(pg.unfenced, st)
		}
		pg.emit('G')
		pg.copies++
		pg.curFail = -1
		if pg.copies <= len(pg.failAt) {
			pg.curFail = pg.failAt[pg.copies-1]
		}
		pg.copyRead = 0
		return true, true
	}
	pg.emit('C')
	return true, false
}

// query runs a simple Query's statements from i on.
func (pg *simPG) query(sts []string) {
	for i, st := range sts {
		ok, copy := pg.run(st, true)
		if !ok {
			break
		}
		if copy {
			pg.copying = 'Q'
			pg.rest = sts[i+1:]
			return
		}
	}
	pg.endImplicit()
	pg.ready()
}

func (pg *simPG) endImplicit() {
	if !pg.block {
		pg.checked = false
		pg.portals = map[string]string{}
		if pg.pending {
			pg.token = true
		}
		pg.pending = false
	}
}

func (pg *simPG) read(m simMsg) {
	if pg.dead {
		return
	}
	if pg.copying != 0 && m.typ == 'H' {
		return // ignored; not counted, so that an injected Flush does not move the failure
	}
	if pg.copying != 0 {
		if pg.curFail == pg.copyRead {
			pg.copyFailed("P0001")
		} else {
			pg.copyRead++
			switch m.typ {
			case 'd', 'S', 'H':
				return
			case 'c':
				if pg.curFail == 99 { // an error at the end of the copy
					pg.copyFailed("23505")
					return
				}
				from := pg.copying
				pg.copying = 0
				pg.emit('C')
				if from == 'Q' {
					pg.query(pg.rest)
				}
				return
			case 'f':
				pg.copyFailed("57014")
				return
			default:
				pg.fail("08P01")
				pg.out = append(pg.out, Reply{Type: 'E', Error: &pgproto3.ErrorResponse{Severity: "FATAL", Code: "08P01"}})
				pg.dead = true
				return
			}
		}
	}
	if pg.skip {
		if m.typ == 'S' {
			pg.skip = false
			pg.sync()
		}
		return
	}
	switch m.typ {
	case 'Q':
		delete(pg.stmts, "")
		delete(pg.portals, "")
		pg.query(splitSQL(m.text))
	case 'P', 'B', 'E':
		t := m.text
		if m.typ == 'B' {
			t = pg.stmts[m.name]
		} else if m.typ == 'E' {
			t = pg.portals[m.portal]
		}
		if pg.block && pg.aborted && !strings.HasPrefix(t, "ROLLBACK") && !strings.HasPrefix(t, "COMMIT") {
			pg.extFail("25P02")
			return
		}
	}
	switch m.typ {
	case 'P':
		if m.text == "SELEC" {
			pg.extFail("42601")
			return
		}
		pg.stmts[m.name] = m.text
		pg.emit('1')
	case 'B':
		t, ok := pg.stmts[m.name]
		if !ok {
			pg.extFail("26000")
			return
		}
		pg.portals[m.portal] = t
		pg.emit('2')
	case 'D':
		t, ok := pg.portals[m.name]
		if m.object == 'S' {
			t, ok = pg.stmts[m.name]
		}
		if !ok {
			pg.extFail("34000")
			return
		}
		if m.object == 'S' {
			pg.emit('t')
		}
		if strings.HasPrefix(t, "SELECT") {
			pg.emit('T')
		} else {
			pg.emit('n')
		}
	case 'E':
		t, ok := pg.portals[m.portal]
		if !ok {
			pg.extFail("34000")
			return
		}
		ok, copy := pg.run(t, false)
		if !ok {
			pg.skip = true
			return
		}
		if copy {
			pg.copying = 'E'
		}
	case 'C':
		if m.object == 'S' {
			delete(pg.stmts, m.name)
		} else {
			delete(pg.portals, m.name)
		}
		pg.emit('3')
	case 'S':
		pg.sync()
	}
}

func (pg *simPG) extFail(code string) {
	pg.fail(code)
	pg.skip = true
}

func (pg *simPG) sync() {
	pg.endImplicit()
	pg.ready()
}

func (pg *simPG) copyFailed(code string) {
	from := pg.copying
	pg.copying = 0
	pg.fail(code)
	if from == 'Q' {
		pg.endImplicit()
		pg.ready()
	} else {
		pg.skip = true
	}
}

var simAlphabet = []Msg{
	{Type: 'Q', Text: "SELECT 1"},
	{Type: 'Q', Text: "COPY t FROM STDIN"},
	{Type: 'Q', Text: "CALL p()"},
	{Type: 'Q', Text: "CALL settok()"},
	{Type: 'Q', Text: "CALL settok(); COPY t FROM STDIN"},
	{Type: 'Q', Text: "CALL p(); COPY t FROM STDIN"},
	{Type: 'Q', Text: "COPY t FROM STDIN; COPY t FROM STDIN"},
	{Type: 'Q', Text: "COPY t FROM STDIN; SELECT 1"},
	{Type: 'Q', Text: "BEGIN"},
	{Type: 'Q', Text: "COMMIT"},
	{Type: 'Q', Text: "SELECT 1/0"},
	{Type: 'Q', Text: "INSERT INTO t VALUES (1)"},
	{Type: 'Q', Text: "SET lock.fencing_token = 5"},
	{Type: 'Q', Text: "DISCARD ALL"},
	{Type: 'Q', Text: "SAVEPOINT a"},
	{Type: 'Q', Text: "ROLLBACK TO a"},
	{Type: 'Q', Text: "ROLLBACK"},
	{Type: 'Q', Text: "COPY t FROM STDIN; INSERT INTO t VALUES (1)"},
	{Type: 'P', Text: "INSERT INTO t VALUES (1)"},
	{Type: 'P', Text: "SELECT 1"},
	{Type: 'P', Text: "COPY t FROM STDIN"},
	{Type: 'P', Text: "CALL p()"},
	{Type: 'P', Text: "SELEC"},
	{Type: 'B'},
	{Type: 'E'},
	{Type: 'D', Object: 'P'},
	{Type: 'S'}, {Type: 'S'}, {Type: 'S'},
	{Type: 'H'},
	{Type: 'd'}, {Type: 'd'},
	{Type: 'c'}, {Type: 'c'},
	{Type: 'f'},
}

func simExt(text string, sync bool) []Msg {
	out := []Msg{{Type: 'P', Text: text}, {Type: 'B'}, {Type: 'E'}}
	if sync {
		out = append(out, Msg{Type: 'S'})
	}
	return out
}

// simChunks are sequences clients send: libpq's COPY (a Sync behind the
// Execute), copy data and ends, extended units.
var simChunks = [][]Msg{
	simExt("COPY t FROM STDIN", true),
	simExt("COPY t FROM STDIN", false),
	append(simExt("CALL p()", false), simExt("COPY t FROM STDIN", true)...),
	{{Type: 'd'}, {Type: 'c'}, {Type: 'S'}},
	{{Type: 'd'}, {Type: 'f'}, {Type: 'S'}},
	{{Type: 'c'}, {Type: 'S'}},
	{{Type: 'c'}},
	{{Type: 'S'}, {Type: 'S'}},
	simExt("SELECT 1", true),
	simExt("INSERT INTO t VALUES (1)", true),
	simExt("INSERT INTO t VALUES (1)", false),
	simExt("CALL p()", true),
	{{Type: 'Q', Text: "BEGIN"}, {Type: 'Q', Text: "INSERT INTO t VALUES (1)"}},
}

func toSim(m pgproto3.FrontendMessage) simMsg {
	sm := toSim1(m)
	if strings.Contains(sm.text, "BEGIN RAISE") {
		simRefused = true
	}
	return sm
}

var simRefused bool

// simSeeds is how many random streams TestCopySimulated plays.
var simSeeds = int64(5000)

func toSim1(m pgproto3.FrontendMessage) simMsg {
	switch m := m.(type) {
	case *pgproto3.Query:
		return simMsg{typ: 'Q', text: m.String, injected: true}
	case *pgproto3.Parse:
		return simMsg{typ: 'P', name: m.Name, text: m.Query, injected: true}
	case *pgproto3.Bind:
		return simMsg{typ: 'B', portal: m.DestinationPortal, name: m.PreparedStatement, injected: true}
	case *pgproto3.Execute:
		return simMsg{typ: 'E', portal: m.Portal, injected: true}
	case *pgproto3.Close:
		return simMsg{typ: 'C', object: m.ObjectType, name: m.Name, injected: true}
	case *pgproto3.Describe:
		return simMsg{typ: 'D', object: m.ObjectType, name: m.Name, injected: true}
	case *pgproto3.Sync:
		return simMsg{typ: 'S', injected: true}
	case *pgproto3.Flush:
		return simMsg{typ: 'H', injected: true}
	}
	panic(fmt.Sprintf("%T", m))
}

func clientSim(m Msg) simMsg {
	return simMsg{typ: m.Type, text: m.Text, name: m.Name, portal: m.Portal, object: m.Object}
}

func showReplies(rs []Reply) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteByte(r.Type)
		if r.Type == 'Z' {
			b.WriteByte(r.Status + 32)
		}
	}
	return b.String()
}

// TestCopySimulated: random client streams over COPY, Syncs, errors and
// probes, with random interleavings of client messages and server
// replies: what the client sees through the gate must be what the
// simulated server sends for the client's messages alone, unless the
// gate ended the session; the gate must not panic or wait with nothing in
// flight.
func TestCopySimulated(t *testing.T) {
	fails, runs := 0, 0
	for seed := int64(0); seed < simSeeds; seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 2 + rng.Intn(8)
		var msgs []Msg
		for i := 0; i < n; i++ {
			if rng.Intn(2) == 0 {
				msgs = append(msgs, simAlphabet[rng.Intn(len(simAlphabet))])
				continue
			}
			msgs = append(msgs, simChunks[rng.Intn(len(simChunks))]...)
		}
		failAt := make([]int, 4)
		for i := range failAt {
			failAt[i] = rng.Intn(6) - 2 // -2, -1: never; 3: at CopyDone
			if failAt[i] == 3 {
				failAt[i] = 99
			}
		}
		simRefused = false
		direct := newSimPG(failAt)
		for _, m := range msgs {
			direct.read(clientSim(m))
		}
		want := showReplies(direct.out)

		cfg := &Config{Analyzer: NewAnalyzer(100)}
		s := NewSession(cfg, nil)
		s.Server(Reply{Type: 'S', Param: "standard_conforming_strings", Value: "on"})
		s.Server(Reply{Type: 'S', Param: "client_encoding", Value: "UTF8"})
		pg := newSimPG(failAt)
		pg.token = seed%2 == 1
		var upq []simMsg
		for _, m := range s.Probe() {
			upq = append(upq, toSim(m))
		}
		var seen []Reply
		failed := ""
		var pending []Reply
		step := func() bool { // the server reads one message; false if none
			if len(upq) == 0 {
				return false
			}
			m := upq[0]
			upq = upq[1:]
			pg.read(m)
			pending = append(pending, pg.out...)
			pg.out = nil
			return true
		}
		deliver := func() {
			for len(pending) > 0 && failed == "" {
				r := pending[0]
				pending = pending[1:]
				v := s.Server(r)
				switch v.Act {
				case Forward:
					seen = append(seen, r)
				case Replace:
					seen = append(seen, Reply{Type: 'E', Error: v.Error})
				case Fail:
					failed = "server reply: " + v.Reason
				}
			}
		}
		// the startup probe is answered first
		for step() {
		}
		deliver()
		trace := []string{}
		for i := 0; i < len(msgs) && failed == "" && !pg.dead; {
			if rng.Intn(3) == 0 && len(upq) > 0 {
				step()
				if rng.Intn(2) == 0 {
					deliver()
				}
				continue
			}
			m := msgs[i]
			d := s.Client(m)
			if d.Fail != "" {
				failed = "client: " + d.Fail
				break
			}
			if d.Wait {
				for _, b := range d.Before {
					upq = append(upq, toSim(b))
				}
				if s.Settled() && len(pending) == 0 && len(upq) == 0 {
					t.Fatalf("seed %d: Wait with nothing in flight at %c %q", seed, m.Type, m.Text)
				}
				if len(upq) == 0 && len(pending) == 0 {
					t.Fatalf("seed %d: Wait, server idle, gate not settled (hang) at %c %q; trace %v", seed, m.Type, m.Text, trace)
				}
				step()
				deliver()
				if pg.copying != 0 {
					// pgwire: a message held back while the server waits
					// for copy data ends the session (heldInCopy).
					failed = "held in copy"
				}
				continue
			}
			trace = append(trace, fmt.Sprintf("%c%s", m.Type, m.Text))
			for _, b := range d.Before {
				upq = append(upq, toSim(b))
			}
			switch {
			case d.Replace != nil:
				upq = append(upq, toSim(d.Replace))
			case !d.Drop:
				upq = append(upq, clientSim(m))
			}
			for _, a := range d.After {
				upq = append(upq, toSim(a))
			}
			i++
		}
		for failed == "" && !pg.dead && step() {
			deliver()
		}
		deliver()
		runs++
		// What went upstream before the gate ended the session may still
		// run: the server reads it before it notices the close.
		for step() {
		}
		if len(pg.unfenced) > 0 {
			t.Fatalf("seed %d: ran without a check: %v\nmsgs %v", seed, pg.unfenced, trace)
		}
		got := showReplies(seen)
		if failed != "" || pg.dead {
			fails++
			// Ending the session is fail-closed; what the client saw
			// before must still be a prefix of what the server sent.
			if !strings.HasPrefix(want, got) && !pg.dead && !simRefused {
				t.Fatalf("seed %d: before failing (%s) the client saw %s, not a prefix of %s\nmsgs %v", seed, failed, got, want, trace)
			}
			continue
		}
		if simRefused {
			continue // the gate refused something the server would run
		}
		if got != want {
			t.Fatalf("seed %d: client saw\n %s\nwant\n %s\nmsgs %v\nfailAt %v", seed, got, want, msgs, failAt)
		}
		if !s.Settled() && pg.copying == 0 {
			t.Fatalf("seed %d: gate not settled at the end; msgs %v", seed, msgs)
		}
	}
	t.Logf("%d runs, %d ended the session", runs, fails)
}
