package gate

import (
	"encoding/binary"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// extended starts or continues an extended-protocol unit.
func (s *Session) extended() {
	s.beginUnit()
	s.extOpen = true
}

// refuseExtended drops the client's message and sends instead a statement
// that raises r: the server answers it with ErrorResponse and skips the
// client's messages up to Sync, as for any failed message.
func (s *Session) refuseExtended(r refusal) Decision {
	s.extended()
	return Decision{Drop: true, Before: s.injectRaise(r.sql())}
}

// parse records an extended-protocol statement; it exists for the gate once
// the server confirms it with ParseComplete.
func (s *Session) parse(name, sql, server string, paramTypes []uint32, userTyped bool) Decision {
	if reserved(name) {
		return s.refuseExtended(refReserved)
	}
	if s.cfg.Pooled && name != "" {
		// The server sees a name of the proxy's: the gate refuses a name
		// in use, as PostgreSQL would.
		_, found, wait := s.reg.lookup(regKey{name: name})
		if wait {
			return Decision{Wait: true}
		}
		if found {
			return s.refuseExtended(refDuplicate(name))
		}
	}
	unseen := s.lexUnseen()
	s.extended()
	// The server lexes the text now, under the settings in force when it
	// reaches it: record them for the Execute that analyses it.
	p := &prepared{text: sql, lex: s.settings, lexUnsure: s.lexPending > 0 || s.unit.lexing, lexUnseen: unseen, lexChanges: s.lexChanges,
		userTyped: userTyped, named: name != "", server: server}
	if s.cfg.Pooled {
		p.typedParams = typedParams(paramTypes)
	}
	op := regOp{key: regKey{name: name}, val: p}
	s.reg.send(op)
	s.slots.push(slot{kind: slotParse, op: op, hasOp: true})
	if r := s.poolParseText(sql); r != "" {
		return Decision{Replace: &pgproto3.Parse{Name: name, Query: r}}
	}
	return Decision{}
}

// bind records which statement a portal runs. Parameters are read only in
// transaction pool mode, for a set_config of a fencing setting (see
// fenceArgsSet).
func (s *Session) bind(portal, stmt string, args []byte) Decision {
	if reserved(portal) || reserved(stmt) {
		return s.refuseExtended(refReserved)
	}
	p, found, wait := s.reg.lookup(regKey{name: stmt})
	if wait {
		return Decision{Wait: true}
	}
	if !found {
		if d, ok := s.awaitProbe(!s.unit.open); ok {
			return d
		}
		if s.fencingPossible() && !s.settledAborted() {
			if s.slots.unitsInFlight > 0 && !s.unit.ran {
				// The answers in flight may leave the transaction
				// aborted, where the server refuses the Bind itself
				// (26000 for a statement it lacks, 25P02 for any other):
				// wait for them.
				return Decision{Wait: true}
			}
			return s.refuseExtended(refUnknown("prepared statement", stmt))
		}
		p = &prepared{unknown: true} // refused at Execute if fencing is possible by then
	}
	s.extended()
	before, wait := s.checkAtBind(p, portal != "" || p.named)
	if wait {
		return Decision{Wait: true}
	}
	op := regOp{key: regKey{portal: true, name: portal}, val: p, gen: s.fenceSets}
	s.reg.send(op)
	s.slots.push(slot{kind: slotBind, op: op, hasOp: true})
	s.unit.bound.set(portal, true)
	if s.cfg.Pooled {
		s.recordFenceArgs(portal, p, args)
	}
	return Decision{Before: before, Server: p.server}
}

// recordFenceArgs records, for a portal bound to a set_config of a fencing
// setting from parameters, which of them args gives a value (see
// unitState.fenceArgs). Only the statement's analysis says which parameters
// matter; a text that holds no "set_config" cannot be one.
func (s *Session) recordFenceArgs(portal string, p *prepared, args []byte) {
	s.unit.fenceArgs.del(portal)
	if args == nil || p.opaque || p.unknown || p.st != nil || !containsFold(p.text, "set_config") {
		return
	}
	if st := s.analyzeStatement(p); st == nil || !st.FenceParam || st.fenceParams&p.typedParams != 0 {
		// A value the Parse typed otherwise than text reaches no
		// pg_catalog.set_config as it is: the server picks another
		// set_config of that type (a user's), or an implicit cast of the
		// user's type to text runs.
		return
	}
	set, ok := nonNullArgs(args)
	if !ok {
		return
	}
	s.unit.fenceArgs.set(portal, set)
}

// typedParams returns the parameters (bit n-1 for $n, of the first 64)
// that types give a type other than text (OID 25) or none (0).
func typedParams(types []uint32) uint64 {
	var m uint64
	for i, oid := range types[:min(len(types), 64)] {
		if oid != 0 && oid != oidText {
			m |= 1 << i
		}
	}
	return m
}

// oidText is the OID of PostgreSQL's text type.
const oidText = 25

// FirstUserOID is PostgreSQL's FirstNormalObjectId: types with lower OIDs
// come with the server (initdb made them), higher ones are users'.
const FirstUserOID = 16384

// nonNullArgs reads a Bind's body after its names and returns which of the
// first 64 parameters are not NULL (bit n-1 for $n); ok false when the
// body is malformed (the server refuses the Bind).
func nonNullArgs(b []byte) (set uint64, ok bool) {
	if len(b) < 2 {
		return 0, false
	}
	nf := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < 2*nf+2 {
		return 0, false
	}
	b = b[2*nf:]
	np := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	for i := range np {
		if len(b) < 4 {
			return 0, false
		}
		n := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n < 0 {
			continue // NULL
		}
		if int(n) > len(b) {
			return 0, false
		}
		b = b[n:]
		if i < 64 {
			set |= 1 << i
		}
	}
	return set, true
}

// fenceArgsSet reports whether st, a set_config of a fencing setting from
// parameters run by the Execute being decided under Config.Pooled, got a
// value for each of them from the portal's Bind in this unit: NULL would
// reset the setting to the shared connection's default (see
// refPoolParamSet).
func (s *Session) fenceArgsSet(st *Statement) bool {
	return s.execArgsKnown && st.fenceParams != 0 && st.fenceParams&^s.execArgs == 0
}

// checkAtBind returns the check to run before a Bind of p, when its
// Execute will need one. A SELECT's portal takes its snapshot at Bind
// (PortalStart): a check after it would wait for an older holder's commit
// and then let the statement read from before that commit. Refusals, and
// what the statement does to the session, wait for the Execute, which
// finds this check already done.
func (s *Session) checkAtBind(p *prepared, byName bool) (before []pgproto3.FrontendMessage, wait bool) {
	// A comment's token is checked at the Bind too: the Bind takes the
	// portal's snapshot, which a check in front of the Execute would follow.
	if p.unknown || !s.fencingPossible() && !p.mayCarryToken() {
		return nil, false
	}
	st, an := s.resolve(p)
	if an.wait || an.a != nil && s.mustWait(an.a) {
		return nil, true
	}
	run := st
	if st == nil {
		if an.a == nil || len(an.a.Statements) != 1 {
			return nil, false // refused, or not decidable: the Execute says so
		}
		st = &an.a.Statements[0]
		if run = s.runs(st); run == nil {
			return nil, false
		}
	}
	s.byName, s.readUnsure = byName, p.lexUnseen && lexRisky(p.text)
	act := s.decideOne(st, run)
	s.byName, s.readUnsure = false, false
	if act.kind != actCheck {
		return nil, false
	}
	s.unit.checked, s.unit.key, s.checkSent = true, keyOf(act.args, act.extra), true
	return s.inject(act), false
}

// describe records a Describe of a statement ('S') or portal ('P').
func (s *Session) describe(kind byte, name string) Decision {
	if reserved(name) {
		return s.refuseExtended(refReserved)
	}
	var d Decision
	if kind == 'S' && s.cfg.Pooled {
		if d = s.serverName(name); d.Wait {
			return d
		}
	}
	s.extended()
	if kind == 'S' {
		s.slots.push(slot{kind: slotDescribeStmt})
	} else {
		s.slots.push(slot{kind: slotDescribePortal})
	}
	return d
}

// serverName returns, under Config.Pooled, the Decision that names the
// statement name reaches on the server (Decision.Server), or Wait when
// that depends on a reply not yet received.
func (s *Session) serverName(name string) Decision {
	p, found, wait := s.reg.lookup(regKey{name: name})
	if wait {
		return Decision{Wait: true}
	}
	if !found {
		return Decision{}
	}
	return Decision{Server: p.server}
}

// PooledStatement returns the server name (Msg.Server of its Parse) of
// the protocol-level statement name the server confirmed, under
// Config.Pooled; ok false when there is none. Only meaningful while
// Settled.
func (s *Session) PooledStatement(name string) (server string, ok bool) {
	p := s.reg.statement(name)
	if p == nil || p.server == "" || p.st != nil {
		return "", false
	}
	return p.server, true
}

// PooledStatements calls f with each protocol-level statement the server
// confirmed (name "" is the unnamed one) and the name it has on the
// server (Msg.Server of its Parse), under Config.Pooled, where pgwire
// prepares them again on a server connection that lacks them. Only
// meaningful while Settled.
func (s *Session) PooledStatements(f func(name, server string)) {
	for name, p := range s.reg.confirmed[0].all {
		if p.server != "" && p.st == nil {
			f(name, p.server)
		}
	}
}

// close records the Close of a statement ('S') or portal ('P'); it is gone
// for the gate once the server confirms it with CloseComplete.
func (s *Session) close(kind byte, name string) Decision {
	if reserved(name) {
		return s.refuseExtended(refReserved)
	}
	var d Decision
	if kind == 'S' && s.cfg.Pooled {
		if d = s.serverName(name); d.Wait {
			return d
		}
	}
	s.extended()
	op := regOp{key: regKey{portal: kind != 'S', name: name}}
	s.reg.send(op)
	s.slots.push(slot{kind: slotClose, op: op, hasOp: true})
	return d
}

// sync ends an extended-protocol unit.
func (s *Session) sync() Decision {
	s.skipUnknown = false // whatever the server skipped, it stops here
	s.beginUnit()
	return Decision{After: s.endUnit(slot{kind: slotSync})}
}

// functionCall decides about a fast-path function call, a unit of its own.
// The gate cannot see what the function does: where fencing is possible it
// passes only inside a transaction block that has passed its check, and
// after it a probe asks whether it set a token.
func (s *Session) functionCall() Decision {
	fresh := !s.unit.open && !s.extOpen
	s.beginUnit()
	if s.fencingPossible() && !s.unit.checked {
		// A probe on its way (after a call before it in the same block, as
		// large objects make) may find no token: wait for its answer.
		if d, ok := s.awaitProbe(fresh); ok {
			if !s.extOpen {
				s.resetUnit()
			}
			return d
		}
		return s.refuseQuery(refFunctionCall, nil)
	}
	s.setMaybe()
	s.unit.probe, s.unit.checked = true, false
	s.unit.blockFresh = false // the call takes a snapshot
	s.lexChanging()
	s.trust = 0 // the function may set the fencing settings, or end the transaction
	s.reg.distrust()
	return Decision{After: s.endUnit(slot{kind: slotFunctionCall})}
}

// execute decides what must run before the Execute of portal.
func (s *Session) execute(portal string) Decision {
	if reserved(portal) {
		return s.refuseExtended(refReserved)
	}
	p, found, wait := s.reg.lookup(regKey{portal: true, name: portal})
	if wait {
		return Decision{Wait: true}
	}
	if d, ok := s.portalFailed(portal); ok {
		return d
	}
	if !found || p.unknown {
		return s.executeUnknown(portal, found)
	}
	if s.cfg.Pooled && p.opaque && s.poolParseText(p.text) != "" {
		// A session SET of lock.* whose statement code the proxy could not
		// see may have changed since: run as opaque code, it would leave
		// the tracked settings as they are while the client reads "SET".
		return s.refuseExtended(refPoolSession)
	}
	s.extended() // before resolve: a text it cannot analyse marks the open unit
	known, an := s.resolve(p)
	if an.wait || an.a != nil && s.mustWait(an.a) {
		return Decision{Wait: true}
	}
	first, here := s.unit.bound.get(portal)
	s.rerun, s.execStale = !first, p.snapStale
	if here {
		s.unit.bound.set(portal, false)
	}
	defer func() { s.rerun, s.execStale = false, false }()
	var before []pgproto3.FrontendMessage
	var ops []regOp
	switch {
	case an.refuse != nil:
		before = s.injectRaise(an.refuse.sql())
	case known != nil:
		before = s.inject(s.decide(known, known, false))
		// Code the proxy could not see ran since p was confirmed, or
		// p's text cannot be read: p may be a COPY … FROM STDIN where its
		// text held one (see opaqueRunOf).
		s.unit.copyIn = s.unit.copyIn || known.CopyIn
	case an.a != nil && len(an.a.Statements) == 1:
		st := &an.a.Statements[0]
		s.byName = portal != "" || p.named
		s.execArgs, s.execArgsKnown = s.unit.fenceArgs.get(portal)
		s.poolAlone = !s.unit.ran && s.poolIdle()
		s.readUnsure = p.lexUnseen && lexRisky(p.text)
		// A parameter of a user's type runs the user's code at Bind (its
		// domain's CHECK, its input function, a cast to the type the
		// statement wants), which the text does not show.
		before = s.inject(s.decide(st, s.runs(st), !p.userTyped))
		if s.readUnsure {
			s.maySetToken() // see lexUnseen
		}
		s.byName, s.poolAlone, s.readUnsure = false, false, false
		s.execArgs, s.execArgsKnown = 0, false
		ops = s.statementOps(st)
		s.unit.copyIn = s.unit.copyIn || st.CopyIn
	case an.a == nil:
		// Not analysed (it cannot matter, or cannot be read in a session
		// without fencing): it may still start COPY-in mode, in which the
		// server ignores the client's Sync and would take a probe sent
		// after it for copy data (see endUnit).
		s.unit.copyIn = s.unit.copyIn || s.memo.mayCopyIn(p.text, nil)
		opens := s.memo.mayOpenBlock(p.text)
		s.unit.blockFresh = opens || s.unit.blockFresh && keepsBlockFresh(p.text)
		s.unit.blockMaybe = s.unit.blockMaybe || opens
	}
	s.slots.push(slot{kind: slotExecute, ops: ops})
	return Decision{Before: before}
}

// portalFailed keeps from the server an Execute of the unnamed portal a
// Query left failed in a failed transaction block (see unnamedFailed), when
// the portal was not bound again in this unit. Such a portal's statement
// list and text point into memory the server frees at its next message;
// PostgreSQL 15.9 and later read them at Execute before they refuse it in
// the failed block, and a backend that reads them crashes, and with it
// every session of the server. It is answered as an unharmed server answers
// it, with 25P02 (an injected statement the failed block refuses with it);
// sent while earlier units are unanswered, it waits for their answers. A
// portal made by Bind is safe: a failed block releases its plan and empties
// its statement list, and its text is its own.
func (s *Session) portalFailed(portal string) (Decision, bool) {
	if portal != "" {
		return Decision{}, false
	}
	if _, here := s.unit.bound.get(portal); here {
		return Decision{}, false
	}
	if s.slots.unitsInFlight > 0 {
		return Decision{Wait: true}, true
	}
	if !s.unnamedFailed || !s.settledAborted() {
		return Decision{}, false
	}
	return s.refuseExtended(refFailedBlock), true
}

// executeUnknown decides about the Execute of a portal the proxy does not
// know: one it never saw bound (found false: a function's refcursor, or
// none at all, and the server answers 34000) runs checked with the
// session's token where the session may hold one, as unknownRun says; one
// bound to a statement the proxy never saw prepared (whose comment may
// have carried a token) is refused where fencing is possible, and so is
// any unknown portal where the config has require_token tables. In an aborted
// transaction nothing runs: the server answers with its own error.
func (s *Session) executeUnknown(portal string, found bool) Decision {
	if found {
		if d, ok := s.awaitProbe(!s.unit.open); ok {
			return d
		}
	}
	if s.fencingPossible() && (found || len(s.cfg.Tables) > 0) && !s.settledAborted() {
		return s.refuseExtended(refUnknown("portal", portal))
	}
	s.extended()
	s.unit.blockMaybe = true // what it runs is not known
	run := unknownRun()
	before := s.inject(s.decide(run, run, false))
	// It may be a COPY … FROM STDIN: no probe right after it (see endUnit).
	s.unit.copyIn = true
	s.slots.push(slot{kind: slotExecute})
	return Decision{Before: before}
}

// settledAborted reports whether the next message runs in a transaction
// the server said is aborted (see unitState.aborted): also in a unit begun
// before the last answers came, when nothing of it has run since.
func (s *Session) settledAborted() bool {
	s.beginUnit()
	if s.slots.unitsInFlight == 0 && !s.unit.ran && s.lastReady == 'E' {
		s.unit.aborted = true
	}
	return s.unit.aborted
}

// resolve returns what a portal bound to p runs: a statement the gate knows
// (SQL PREPARE, a cursor, or opaque code), or else the analysis of p's Parse
// text.
func (s *Session) resolve(p *prepared) (*Statement, analysis) {
	switch {
	case p.opaque:
		return s.opaqueRunOf(p), analysis{}
	case p.st != nil:
		return p.st, analysis{}
	}
	an := s.analyzePrepared(p)
	if an.opaque {
		return s.opaqueRunOf(p), analysis{}
	}
	return nil, an
}

// unsureLex reports whether the server may hold p's text read under other
// lexing settings than those of its Parse: they were changing then, or,
// under Config.Pooled, they have changed since, even if they are back. In
// transaction pool mode pgwire prepares a client's statement again on each
// server connection that lacks it, under the client's settings of that
// lending (pooled_setup.go), so the server's copy may be a reading under
// any settings the client had after its Parse.
func (s *Session) unsureLex(p *prepared) bool {
	return p.lexUnsure || s.cfg.Pooled && p.lexChanges != s.lexChanges
}

// analyzePrepared analyses the text of a statement prepared by Parse, which
// the server lexed under the settings of its Parse: it is refused where
// fencing is possible when those settings were changing, or differ from
// today's in a way that could change how the text reads.
func (s *Session) analyzePrepared(p *prepared) analysis {
	if (s.unsureLex(p) || p.lex != s.settings) && lexRisky(p.text) {
		if s.unreadableAsOpaque(p.text) {
			return analysis{opaque: true}
		}
		return s.cannotAnalyse(p.text, &refLexChanged)
	}
	if p.lexUnseen && mayCarryDirective(p.text[firstRisky(p.text):]) {
		// Parsed behind messages not yet answered, whose code may have
		// changed how the server lexes it (see lexUnseen): past its first
		// risky byte, a directive the proxy reads inside a literal may be
		// a comment to the server. Such a text is read, and followed by a
		// probe, only where no directive can be there.
		return analysis{refuse: &refLexChanged, doubt: true}
	}
	return s.analyzeKnown(p.text, p.mayMatter(&s.memo))
}

// unreadableAsOpaque reports whether a statement prepared by Parse, which
// the server may have lexed under other settings than the proxy knows, can
// run as opaque code (checked with the session's token first, probed
// after, the transaction's check undone) instead of being refused, where
// fencing is possible. A Parse holds one statement, so a check before its
// Execute covers all of it whatever its boundaries; what the proxy could
// misread is only what the text itself says to the proxy. So: no
// directive (the bytes "/*" or "--" and a directive key, which no
// encoding can hide), no reserved name (its prefix "fenceproxy\x1f": a
// lone 0x1F byte in a literal is no name), no word of schema fence and no
// Unicode-escaped identifier (U&"\0066ence"), and no table guarded by the
// config (the table filter must read what it writes). Whatever else the
// server may read there (a SET, a COMMIT, a PREPARE or DECLARE) is what
// opaque code may do, and is followed as such.
func (s *Session) unreadableAsOpaque(text string) bool {
	return s.fencingPossible() && !s.cfg.Pooled && len(s.cfg.Tables) == 0 && !mayHaveDirectives(text) &&
		!containsFold(text, reservedPrefix) && !containsFold(text, "fenc") && !containsFold(text, "u&")
}

// inject returns the messages that carry out act before an Execute.
func (s *Session) inject(act action) []pgproto3.FrontendMessage {
	switch act.kind {
	case actCheck:
		var msgs []pgproto3.FrontendMessage
		for i, c := range act.checks() {
			if i == 0 && act.guard != 0 {
				sql := fencestore.AppendGuardedCall(nil, c, act.guard&fenceToken != 0, act.guard&fenceResource != 0)
				msgs = append(msgs, s.injected(slot{inj: true, check: true}, checkName, string(sql), nil, true)...)
				continue
			}
			msgs = append(msgs, s.injectCheck(c)...)
		}
		if act.after != nil {
			msgs = append(msgs, s.injectRaise(act.after.sql())...)
		}
		return msgs
	case actRaise:
		return s.injectRaise(act.refuse.sql())
	}
	return nil
}

// injectCheck returns a check as extended-protocol messages (see
// Session.injected).
func (s *Session) injectCheck(args fencestore.CheckArgs) []pgproto3.FrontendMessage {
	return s.injected(slot{inj: true, check: true}, checkName, fencestore.CheckStatement, fencestore.Params(args), true)
}

// injectRaise returns messages that make the server raise: the raise
// statement as extended-protocol messages. Its Execute always fails, so
// the server skips whatever would follow it up to Sync.
func (s *Session) injectRaise(sql []byte) []pgproto3.FrontendMessage {
	return s.injected(slot{inj: true}, raiseName, string(sql), nil, false)
}
