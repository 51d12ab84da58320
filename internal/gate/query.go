package gate

import (
	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// refuseQuery replaces the client's message with a Query that raises r, a
// unit of its own (ops: what the client's Query would have done to the
// unnamed statement and portal).
func (s *Session) refuseQuery(r refusal, ops []regOp) Decision {
	return Decision{Replace: &pgproto3.Query{String: string(r.sql())}, After: s.endUnit(slot{kind: slotQuery, ops: ops, injected: []injKind{injRaise}})}
}

// query decides about a simple-protocol Query: unchanged, rewritten with
// checks (or refusals) injected at the statement boundaries the parser
// found, replaced whole by a refusal, or held back (Wait) until earlier
// units are answered.
func (s *Session) query(sql string) Decision {
	if d, ok := s.precheck(sql); ok {
		return d
	}
	unseen := s.lexUnseen()
	s.beginUnit()
	if (s.unit.lexing || unseen) && (s.unreadUnsafe() || mayCarryDirective(sql)) && lexRisky(sql) {
		if s.unit.lexing || s.extOpen {
			// Inside an open extended sequence whose earlier messages
			// changed, or may have changed unseen (see lexUnseen),
			// standard_conforming_strings or client_encoding: the server
			// reports them only at Sync.
			return s.refuseQuery(refLexChanged, nil)
		}
		return s.waitQuery() // see lexUnseen
	}
	var an analysis
	if unseen && !s.unreadUnsafe() && lexRisky(sql) && s.memo.mayMatter(sql) {
		// Code the text did not show may have changed how the server reads
		// this text (see lexUnseen): in a session without fencing it
		// passes, and a probe follows it.
		an = s.cannotAnalyse(sql, &refLexChanged)
	} else {
		an = s.analyze(sql)
	}
	if an.wait || an.a != nil && s.mustWait(an.a) {
		return s.waitQuery()
	}
	if an.doubt || an.a != nil && s.refersToUnknown(an.a) {
		if d, ok := s.awaitProbe(!s.extOpen); ok {
			s.waitQuery()
			return d
		}
	}
	for _, op := range dropUnnamed {
		s.reg.send(op)
	}
	sl := slot{kind: slotQuery, ops: dropUnnamed, sentAborted: s.unit.aborted}
	var out []byte
	switch {
	case an.refuse != nil:
		// Nothing of the client's text goes upstream: the server gets only
		// the refusal, and the client sees its error and ReadyForQuery.
		out = an.refuse.sql()
		sl.injected = []injKind{injRaise}
	case an.a != nil:
		out = s.rewrite(sql, an.a, &sl)
		fallthrough
	default:
		// The client's text goes upstream: it may leave the server in
		// COPY-in mode. A text the gate did not read (it could not matter,
		// or could not be read in a session without fencing) counts when
		// it holds the words; so does one that may open a block.
		s.unit.copyIn = s.unit.copyIn || s.memo.mayCopyIn(sql, an.a)
		if an.a == nil {
			s.unit.blockFresh = s.memo.mayOpenBlock(sql) || s.unit.blockFresh && keepsBlockFresh(sql)
		}
	}
	after := s.endUnit(sl)
	if out == nil {
		return Decision{After: after}
	}
	return Decision{Replace: &pgproto3.Query{String: string(out)}, After: after}
}

// dropUnnamed is what a Query does to the registry: it drops the unnamed
// statement and portal (postgres.c exec_simple_query). Shared by every
// Query's slot, and never changed.
var dropUnnamed = []regOp{{key: regKey{}}, {key: regKey{portal: true}}}

// waitQuery holds a Query back until every reply to what was sent has
// arrived. A unit the Query itself began is begun again when it is asked
// again, from the server's answers.
func (s *Session) waitQuery() Decision {
	if !s.extOpen {
		s.resetUnit()
	}
	return Decision{Wait: true}
}

// refersToUnknown reports whether a statement of a runs a prepared
// statement or portal the proxy does not know.
func (s *Session) refersToUnknown(a *Analysis) bool {
	for i := range a.Statements {
		if k, ok := runsKey(&a.Statements[i]); ok {
			if p, found, _ := s.reg.lookup(k); !found || p.unknown {
				return true
			}
		}
	}
	return false
}

// mustWait reports whether a statement of a refers to a prepared statement
// whose state depends on replies not yet received.
func (s *Session) mustWait(a *Analysis) bool {
	for i := range a.Statements {
		st := &a.Statements[i]
		if len(a.Statements) == 1 && st.NeedsTxnBlock && s.slots.unitsInFlight > 0 && s.fencingPossible() {
			return true // whether a transaction block is open decides (see decideOne)
		}
		if k, ok := runsKey(st); ok {
			if _, _, wait := s.reg.lookup(k); wait {
				return true
			}
		}
		if st.execName != "" {
			if _, _, wait := s.reg.lookup(regKey{name: st.execName}); wait {
				return true
			}
		}
	}
	return false
}

// rewrite decides each statement of a and returns the text to send, or nil
// when nothing needs injecting. It records the per-statement slots in sl.
func (s *Session) rewrite(sql string, a *Analysis, sl *slot) []byte {
	if len(a.Statements) > 1 {
		s.unit.ran, s.unit.blockMaybe = true, true // the server runs them in an implicit transaction block
	}
	var out []byte
	prev := 0
	for i := range a.Statements {
		st := &a.Statements[i]
		lone := st.NeedsTxnBlock && !s.unit.blockMaybe && s.slots.unitsInFlight == 0 && s.lastReady == 'I'
		s.poolAlone = s.poolAloneIn(a, i)
		act := s.decide(st, s.runs(st), true)
		s.poolAlone = false
		if lone && act.kind == actCheck {
			// Alone in a Query outside a transaction block, the server
			// refuses it (25P01) and runs nothing; with a check in front the
			// Query would be two statements, run as one implicit block, and
			// it would succeed where PostgreSQL says it cannot. (Also after
			// extended-protocol messages not yet synced, whose implicit
			// transaction is no block unless they opened one.)
			act = action{}
			s.unit.checked = false
		}
		repl := s.poolReplacement(st) // before statementOps, which a DEALLOCATE's lookup must precede
		ops := s.statementOps(st)
		if act.kind == actNone && repl == "" {
			sl.injected = append(sl.injected, injNone)
			sl.effects = append(sl.effects, ops)
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(sql)+160)
		}
		out = append(out, sql[prev:st.Start]...)
		prev = st.Start
		if act.kind != actNone {
			out = appendAction(out, act)
			out = append(out, "; "...)
		}
		if repl != "" {
			out = append(out, repl...)
			prev = st.End
		}
		if act.kind == actRaise {
			sl.injected = append(sl.injected, injRaise)
			sl.effects = append(sl.effects, nil)
		}
		for range act.checks() {
			sl.injected = append(sl.injected, injCheck)
			sl.effects = append(sl.effects, nil)
		}
		if act.after != nil {
			sl.injected = append(sl.injected, injRaise)
			sl.effects = append(sl.effects, nil)
		}
		sl.injected = append(sl.injected, injNone)
		sl.effects = append(sl.effects, ops)
	}
	if out != nil {
		out = append(out, sql[prev:]...)
	}
	return out
}

// runsKey returns the registry name of what st runs: the prepared
// statement of SQL EXECUTE, the portal of FETCH or MOVE.
func runsKey(st *Statement) (regKey, bool) {
	switch st.Registry {
	case RegExecute:
		return regKey{name: st.Name}, true
	case RegFetch:
		return regKey{portal: true, name: st.Name}, true
	}
	return regKey{}, false
}

// runs returns the statement that runs when st runs: for SQL EXECUTE the
// prepared statement, for FETCH and MOVE the portal's (nil when the proxy
// does not know it, or cannot read it), else st.
//
// A cursor the proxy never saw declared was opened by code it could not
// see (a function returning a refcursor), or does not exist: what it runs
// is checked with the session's token (docs/design.md "Fail closed", rule 3; see
// unknownRun); a comment token cannot be fixed in it, since every DECLARE
// the client sends is read. Where the config has require_token tables it stays
// unknown, and is refused where fencing is possible: the table filter cannot
// see what it writes.
func (s *Session) runs(st *Statement) *Statement {
	run := s.runsOnce(st)
	if run == st && runsOther(st) {
		return unknownRun() // a portal bound to a FETCH from itself (the same analysis)
	}
	for depth := 0; run != nil && run != st && runsOther(run); depth++ {
		// A portal bound to a FETCH or an EXECUTE (by Parse and Bind, then
		// run by FETCH): what runs is what that one runs.
		k, _ := runsKey(st)
		if k2, _ := runsKey(run); k2 == k && k.portal {
			return unknownRun() // the portal fetches from itself: the server refuses it, nothing runs
		}
		if depth == maxRunsDepth {
			return opaqueRun()
		}
		next := s.runsOnce(run)
		if next == nil || next == run {
			return next
		}
		d, conflict := runDirectives(run.Directives, next.Directives)
		if conflict != nil {
			return nil // refused as unknown where fencing is possible
		}
		if d != next.Directives {
			c := *next
			c.Directives = d
			next = &c
		}
		st, run = run, next
	}
	return run
}

// maxRunsDepth bounds how many FETCH or EXECUTE statements runs follows
// through portals bound to them; past it, what runs is opaque.
const maxRunsDepth = 4

// runsOther reports whether st runs another statement or portal: FETCH,
// MOVE, EXECUTE.
func runsOther(st *Statement) bool { return st.Registry == RegFetch || st.Registry == RegExecute }

// runsOnce is runs for one level: the statement or portal st names.
func (s *Session) runsOnce(st *Statement) *Statement {
	k, ok := runsKey(st)
	if !ok {
		return st
	}
	p, found, _ := s.reg.lookup(k)
	switch {
	case !found && k.portal && len(s.cfg.Tables) == 0:
		return unknownRun()
	case !found || p.unknown:
		return nil
	case p.opaque:
		return s.opaqueRunOf(p)
	case p.st != nil:
		return p.st
	}
	// Prepared by Parse: analyse its text now. Text the proxy cannot read
	// is refused where fencing is possible (nil: as unknown); elsewhere
	// it runs as opaque code, since it may set the token: a probe follows.
	if st := s.analyzeStatement(p); st != nil || s.fencingPossible() {
		return st
	}
	return opaqueRun()
}

// analyzeStatement analyses the text of a statement prepared by Parse,
// under the lexing settings the server read it with, returning nil when it
// is not exactly one statement that can be analysed.
func (s *Session) analyzeStatement(p *prepared) *Statement {
	text := p.text
	if p.lex.unsafe(text) != "" || s.unsureLex(p) && lexRisky(text) {
		return nil
	}
	a, err := s.cfg.Analyzer.Analyze(text)
	switch {
	case err == nil && len(a.Statements) == 0:
		return &Statement{} // empty, or only comments: runs nothing
	case err != nil || len(a.Statements) != 1:
		return nil
	}
	return &a.Statements[0]
}

// statementOps returns the registry changes st makes when it completes, and
// records them as sent.
func (s *Session) statementOps(st *Statement) []regOp {
	var ops []regOp
	switch st.Registry {
	case RegPrepare:
		ops = []regOp{{key: regKey{name: st.Name}, val: &prepared{st: st.Prepared}}}
	case RegDeallocate:
		ops = []regOp{{key: regKey{name: st.Name}}}
	case RegDeallocateAll:
		ops = []regOp{{allStmts: true}}
	case RegDeclare:
		// The cursor's query runs at FETCH: keep what it does (its kind,
		// writes, set_config calls), not the DECLARE's name.
		cur := *st
		cur.Name, cur.Registry = "", RegNone
		ops = []regOp{{key: regKey{portal: true, name: st.Name}, val: &prepared{st: &cur, hold: st.Hold}, gen: s.fenceSets}}
	case RegCloseCursor:
		ops = []regOp{{key: regKey{portal: true, name: st.Name}}}
	case RegCloseAllCursors:
		ops = []regOp{{allPortals: true}}
	case RegDiscardAll:
		ops = []regOp{{allStmts: true, allPortals: true}}
	}
	for _, op := range ops {
		s.reg.send(op)
	}
	return ops
}

// precheckState follows a pre-check: a Query of its own sent before a
// client Query that cannot run inside a transaction block.
type precheckState uint8

const (
	preNone    precheckState = iota
	prePending               // sent; the client's Query waits for its answer
	preProceed               // answered: no token; send the client's Query
	preRefused               // answered: refused; the client saw the error
)

// precheck handles a Query that is one statement which cannot run inside a
// transaction block (VACUUM, CREATE INDEX CONCURRENTLY, …) in a session
// whose lock.fencing_token setting may hold a token: such a statement
// cannot share a transaction with a check, so a check of its own runs
// first, as a Query, and raises 0A000 only when the setting holds a token.
// The client's Query waits for its answer, then runs or is dropped.
func (s *Session) precheck(sql string) (Decision, bool) {
	switch s.pre {
	case prePending:
		return Decision{Wait: true}, true
	case preRefused:
		s.pre = preNone
		return Decision{Drop: true}, true
	case preProceed:
		s.pre = preNone
		return Decision{}, false
	}
	if !s.tokenMaybe || !s.memo.mayMatterInChecked(sql) || !s.memo.mayBeNoTxnBlock(sql) || s.lexPending > 0 || s.settings.unsafe(sql) != "" || s.unit.open && s.unit.lexing {
		return Decision{}, false
	}
	a, err := s.cfg.Analyzer.Analyze(sql)
	if err != nil || len(a.Statements) != 1 {
		return Decision{}, false
	}
	st := &a.Statements[0]
	if st.Kind != NoTxnBlock || st.Directives.Token != 0 {
		return Decision{}, false // a comment token is refused by the Query itself
	}
	if s.cfg.protection(st.Writes).found {
		return Decision{}, false // refused by the Query itself
	}
	if s.unit.open {
		// Inside an open extended sequence (Parse, Bind, … and no Sync
		// yet): a check of its own, as a Query, would end the sequence's
		// implicit transaction, and the server reads the statement with
		// that transaction's history (PreventInTransactionBlock refuses it
		// after an Execute, not after a Parse alone). The session may hold
		// a token: refuse, as the proxy cannot tell in time.
		for _, op := range dropUnnamed {
			s.reg.send(op)
		}
		return s.refuseQuery(refCannotFenceOpen(st.Text), dropUnnamed), true
	}
	s.beginUnit()
	s.pre = prePending
	s.endUnit(slot{kind: slotQuery, injected: []injKind{injRaise}, precheck: true})
	r := refCannotFenceFn(st.Text)
	return Decision{Wait: true, Before: []pgproto3.FrontendMessage{&pgproto3.Query{String: string(fencestore.AppendRaiseIfToken(nil, r.raise()))}}}, true
}

// noTxnWords are fragments without which a statement cannot be one that
// refuses a transaction block (VACUUM; CREATE/DROP DATABASE or TABLESPACE;
// … CONCURRENTLY; ALTER SYSTEM; subscriptions; REINDEX SCHEMA/SYSTEM/
// DATABASE; CLUSTER; COMMIT/ROLLBACK PREPARED). A false match only costs a
// parse; the parser decides.
var noTxnWords = [...]string{"vacuum", "database", "tablespace", "concurrently", "system", "subscription", "reindex", "cluster", "prepared"}

// mayBeNoTxnBlock reports whether sql holds a word of noTxnWords, in any
// ASCII case (keywords are ASCII: scan.l), in one pass.
func mayBeNoTxnBlock(sql string) bool { return hasWordOf(&noTxnIndex, sql) }

var noTxnIndex = func() (idx wordIndex) {
	for _, w := range noTxnWords {
		idx.add(w, false)
	}
	return idx
}()
