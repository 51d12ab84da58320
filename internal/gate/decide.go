package gate

import (
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"strconv"
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// SQLSTATEs of the refusals the gate itself decides (the server raises them
// for the gate, inside the transaction, so they abort it like any error).
const (
	codeFenceWrite   = sqlstate.InsufficientPrivilege   // schema fence written through the proxy
	codeCannotFence  = sqlstate.FeatureNotSupported     // cannot be fenced atomically, or cannot be read safely
	codeCannotParse  = sqlstate.SyntaxError             // text the gate could not analyse, with fencing possible
	codeReservedName = sqlstate.ReservedName            // a name of the proxy's own statements
	codeUnknownStmt  = sqlstate.InvalidSQLStatementName // a statement the proxy does not know
	codeSessionToken = sqlstate.SessionToken            // a session-level fencing setting under token_scope: transaction
	codeInvalidName  = sqlstate.InvalidName             // a non-ASCII name the proxy cannot key as the server does
	codeDuplicate    = sqlstate.DuplicatePreparedStmt   // under Config.Pooled, a Parse of a name the client has
)

// The refusals the gate decides, in PostgreSQL's style: a short message,
// what happened in the detail, what to do in the hint.
var (
	refFenceWrite = refusal{code: codeFenceWrite,
		message: "fenceproxy: schema fence cannot be written or altered through the proxy",
		detail:  "Schema fence holds the fencing high-water marks.",
		hint:    "Administer it with fenceproxy migrate and fenceproxy hwm, connected straight to PostgreSQL."}
	refReserved = refusal{code: codeReservedName,
		message: "fenceproxy: the name is reserved for the proxy",
		detail:  `Names starting with "fenceproxy\x1f" are the proxy's own statements and portals.`,
		hint:    "Use another name."}
	refSetAndWrite = refusal{code: codeCannotFence,
		message: "fenceproxy: a statement that changes lock.fencing_token or lock.resource cannot also write",
		detail:  "Its write would not be checked with the new value.",
		hint:    "Set them in a statement of their own."}
	refSnapshotStale = refusal{code: codeCannotFence,
		message: "fenceproxy: cannot fence a cursor or portal made before the fencing settings changed",
		detail:  "It reads the snapshot taken when it was declared or bound, before the check of the fencing token now in force, and may miss what the previous holder of the lock committed.",
		hint:    "Set lock.fencing_token and lock.resource before you declare the cursor or bind the portal."}
	refLexChanged = refusal{code: codeCannotFence,
		message: "fenceproxy: cannot fence this text: the settings the server reads it under are changing",
		detail:  "standard_conforming_strings or client_encoding changed earlier in this extended-protocol sequence, or the statement was prepared while they were changing, under other values than now or (transaction pool mode, where it is prepared again on each server connection under the values of the day) before they last changed, and the text holds a backslash or a non-ASCII byte the server may read differently.",
		hint:    "Send Sync after changing those settings, and prepare the statement again."}
	refNameEncoding = refusal{code: codeInvalidName,
		message: "fenceproxy: a non-ASCII statement, portal or cursor name cannot be fenced when client_encoding is not UTF8",
		detail:  "The server converts the name from client_encoding before it truncates it, so the proxy cannot key it as the server does.",
		hint:    "Use ASCII names, or client_encoding UTF8."}
	refConfigEncoding = refusal{code: codeCannotFence,
		message: "fenceproxy: cannot fence this statement: a name from the proxy's config has non-ASCII characters",
		detail:  "A table it writes, or a resource name from the config, has non-ASCII characters, and client_encoding is not UTF8 (or is changing), so the server would not read the name as the config spells it.",
		hint:    "Use client_encoding UTF8."}
	refTrackedEncoding = refusal{code: codeCannotFence,
		message: "fenceproxy: cannot fence this statement: the session's lock.resource has non-ASCII characters written under another client_encoding",
		detail:  "In transaction pool mode the proxy passes the session's resource to each check as text, which the server reads in the client_encoding in force; the name was set (or given at startup) under another encoding, or client_encoding is not UTF8, so the server would check another resource.",
		hint:    "Use client_encoding UTF8 throughout, or carry the resource in the transaction (SET LOCAL lock.resource, or a /* resource=R */ comment)."}
	refFunctionCall = refusal{code: codeCannotFence,
		message: "fenceproxy: a fast-path function call cannot be fenced here",
		detail:  "A fast-path function call is fenced only inside a transaction that has passed its check.",
		hint:    "Call the function with SELECT instead."}
	// refFailedBlock is PostgreSQL's own answer to a statement in a failed
	// transaction block (see Session.portalFailed).
	refFailedBlock = refusal{code: "25P02",
		message: "current transaction is aborted, commands ignored until end of transaction block"}
	refPrepareTxn = refusal{code: codeCannotFence,
		message: "fenceproxy: PREPARE TRANSACTION cannot run in a transaction that may have passed a fence check, or in a session that may carry a fencing token",
		detail:  "A transaction that passed a fence check holds its resource's high-water mark locked; a prepared one would hold it until COMMIT PREPARED or ROLLBACK PREPARED, blocking every later holder.",
		hint:    "Commit or roll back instead."}
)

// refCannotFenceFn refuses a token on text, a statement that cannot run
// inside a transaction block.
func refCannotFenceFn(text string) refusal {
	return refusal{code: codeCannotFence,
		message: fmtFirstWords("fenceproxy: %s cannot be fenced", text),
		detail:  "It cannot run inside a transaction block, so a fencing token cannot be checked atomically with it.",
		hint:    "Run it without a token."}
}

// refCannotFenceOpen refuses text, a statement that cannot run inside a
// transaction block, sent inside an open extended-protocol sequence.
func refCannotFenceOpen(text string) refusal {
	return refusal{code: codeCannotFence,
		message: fmtFirstWords("fenceproxy: %s cannot be fenced inside an open extended-protocol sequence", text),
		detail:  "It cannot run inside a transaction block, so a fencing token cannot be checked atomically with it, and with no Sync since the last Parse, Bind, Describe or Close, in a session that may carry a token, it cannot be checked first.",
		hint:    "Send Sync before it, and run it without a token."}
}

// refStoredNoTxn refuses text, a statement that cannot run inside a
// transaction block, run from a name SQL can redefine.
func refStoredNoTxn(text string) refusal {
	return refusal{code: codeCannotFence,
		message: fmtFirstWords("fenceproxy: %s prepared under a name cannot run in a session that may carry a fencing token", text),
		detail:  "A function may have replaced it under that name by a write, and it cannot run after a check in its transaction.",
		hint:    "Send it as a simple Query, or prepare it unnamed."}
}

// refUnknown refuses running a prepared statement or portal (what) named
// name that the proxy does not know.
func refUnknown(what, name string) refusal {
	return refusal{code: codeUnknownStmt,
		message: "fenceproxy: " + what + " " + strconv.Quote(name) + " is not known to the proxy",
		detail:  "What it runs cannot be fenced.",
		hint:    "Prepare it through the proxy (Parse or PREPARE), in this session."}
}

// refDuplicate is PostgreSQL's answer to a Parse of a statement name in
// use, which the server cannot give under Config.Pooled (each Parse has a
// server name of its own): its code and message, as the server words them.
func refDuplicate(name string) refusal {
	return refusal{code: codeDuplicate, message: `prepared statement "` + name + `" already exists`}
}

// Refusals under Config.TransactionTokens (token_scope: transaction).
var (
	refusalSessionSet = refusal{
		code:    codeSessionToken,
		message: "fenceproxy: lock.fencing_token and lock.resource cannot be set for the session here",
		detail:  "The proxy runs with token_scope: transaction, for a transaction-mode pooler beside it: a value set for the session would stay on a server connection that other clients get next.",
		hint:    "Set it inside the transaction with SET LOCAL (or set_config(name, value, true)), or carry it in a /* fencing_token=N resource=R */ comment.",
	}
	refusalSessionRead = refusal{
		code:    codeSessionToken,
		message: "fenceproxy: lock.fencing_token or lock.resource is set on this server connection, but not by this transaction",
		detail:  "The proxy runs with token_scope: transaction, for a transaction-mode pooler beside it: a value this transaction did not set (at session level, by a role or database default, or by code the proxy cannot see) may be another client's, so the check refuses to read it.",
		hint:    "Set lock.fencing_token and lock.resource inside each transaction with SET LOCAL, in a statement of their own, or carry them in a /* fencing_token=N resource=R */ comment; RESET them where they were set for the session.",
	}
)

// checkKey identifies what a check covered, so that a later statement of the
// same transaction with the same token sources needs no second check.
type checkKey struct {
	token, resource, tableResource string
	require, advance               bool
	tables                         string // the forced table resources, sorted, each followed by NUL
}

// covers reports whether a check with key k makes one with key n redundant.
func (k checkKey) covers(n checkKey) bool {
	return k.token == n.token && k.resource == n.resource && k.tableResource == n.tableResource &&
		(k.advance || !n.advance) && (k.require || !n.require) && coversTables(k.tables, n.tables)
}

// coversTables reports whether every resource of n is in k (both as in
// checkKey.tables).
func coversTables(k, n string) bool {
	for n != "" {
		i := strings.IndexByte(n, 0)
		if !strings.Contains("\x00"+k, "\x00"+n[:i+1]) {
			return false
		}
		n = n[i+1:]
	}
	return true
}

// refusal is an error the gate makes the server raise, with the detail and
// hint PostgreSQL's own errors carry, where it has them.
type refusal struct{ code, message, detail, hint string }

func (r *refusal) sql() []byte { return r.append(nil) }

// append appends the statement that raises r.
func (r *refusal) append(dst []byte) []byte {
	if r.detail == "" && r.hint == "" {
		return fencestore.AppendRaise(dst, r.code, r.message)
	}
	return fencestore.AppendRaiseStatement(dst, r.raise())
}

func (r *refusal) raise() fencestore.Raise {
	return fencestore.Raise{Code: r.code, Message: r.message, Detail: r.detail, Hint: r.hint}
}

// analysis is the outcome of looking at a text before deciding.
type analysis struct {
	a      *Analysis // nil: nothing to decide (or nothing that can be)
	refuse *refusal
	wait   bool // the server's answers to earlier units are needed first
	// opaque: one statement of the extended protocol that cannot be read
	// safely, and runs as opaque code (see Session.unreadableAsOpaque).
	opaque bool
	// doubt: refused only because fencing is possible (see cannotAnalyse).
	doubt bool
}

// analyze decides how far a text must be looked at, and refuses what cannot
// be analysed exactly as the server will read it, where fencing is
// possible (docs/design.md "Fail closed", rule 1). In a session that may hold no
// token and has no require_token table, a text that cannot be read safely is
// forwarded, and a probe after it asks the server whether it set a token.
func (s *Session) analyze(sql string) analysis {
	return s.analyzeKnown(sql, s.memo.mayMatter(sql))
}

// analyzeKnown is analyze with mayMatter(sql) already known.
func (s *Session) analyzeKnown(sql string, matters bool) analysis {
	textMatters := matters
	if !matters && s.settings.fold && !isASCII(sql) {
		matters = true // a folded name may be any word (settings.unsafe)
	}
	if s.cfg.Pooled && !matters {
		matters = s.memo.mayNeedSession(sql)
	}
	if !matters && s.unit.checked && s.fencingPossible() {
		matters = s.memo.mayMatterInChecked(sql)
	}
	if !matters && (!s.fencingPossible() || s.unit.checked && len(s.cfg.Tables) == 0 && s.unit.key.covers(s.sessionKey())) {
		// It cannot set a token, carry a directive, end the transaction or
		// touch schema fence; and either nothing in the session is fenced,
		// or its transaction has passed a check that it cannot undo.
		return analysis{}
	}
	if s.lexPending > 0 {
		return analysis{wait: true} // standard_conforming_strings or client_encoding may be changing
	}
	if why := s.settings.unsafe(sql); why != "" {
		return s.cannotAnalyse(sql, &refusal{code: codeCannotFence, message: "fenceproxy: cannot fence this text, because " + why})
	}
	a, err := s.cfg.Analyzer.analyzeKnown(sql, textMatters, &s.parsing)
	if err == nil {
		return analysis{a: a}
	}
	switch e := err.(type) {
	case *TokenError:
		return analysis{refuse: &refusal{code: e.SQLState(), message: "fenceproxy: " + e.Error()}}
	case *DirectiveError:
		return analysis{refuse: &refusal{code: e.SQLState(), message: "fenceproxy: " + e.Error()}}
	case *ParseError:
		r := &refusal{code: codeCannotParse, message: "fenceproxy: cannot analyse the statement to fence it: " + e.Message}
		switch {
		case e.Code != "":
			r.code = e.Code
		case e.Syntax:
			r.message = "fenceproxy: cannot fence the statement: the proxy's parser (PostgreSQL 17 grammar) rejects it: " + e.Message +
				"; if the server accepts it, quote the identifier that newer PostgreSQL reserves"
		}
		return s.cannotAnalyse(sql, r)
	}
	return s.cannotAnalyse(sql, &refusal{code: codeCannotParse, message: "fenceproxy: cannot analyse the statement to fence it: " + err.Error()})
}

// cannotAnalyse refuses a text the gate cannot read where fencing is
// possible, or where the text may carry a directive (mayCarryDirective);
// elsewhere the text passes, and the session may hold a token from then
// on, until a probe says otherwise.
func (s *Session) cannotAnalyse(text string, r *refusal) analysis {
	if s.unreadUnsafe() || s.cfg.Pooled || mayCarryDirective(text) {
		return analysis{refuse: r, doubt: true}
	}
	s.setMaybe()
	s.unit.probe, s.unit.checked = true, false
	s.lexChanging()
	return analysis{}
}

// action is what to inject before one statement.
type action struct {
	kind   uint8 // actNone, actCheck, actRaise
	args   fencestore.CheckArgs
	extra  []fencestore.CheckArgs // actCheck: one more check per resource of the tables written
	refuse refusal
	guard  uint8 // actCheck: the settings the first check refuses to read (see Session.guardBits)
	// after: actCheck: a refusal raised once the checks have passed (a
	// stale token is refused as such first).
	after *refusal
}

// checks returns the checks of an actCheck, in order; none otherwise.
func (a action) checks() []fencestore.CheckArgs {
	if a.kind != actCheck {
		return nil
	}
	return append([]fencestore.CheckArgs{a.args}, a.extra...)
}

const (
	actNone uint8 = iota
	actCheck
	actRaise
)

func raiseR(r refusal) action { return action{kind: actRaise, refuse: r} }

// decide returns what must run before st, and updates the unit's prediction
// for what st itself does. run is the statement that runs: st itself, or
// for SQL EXECUTE the prepared statement (nil when unknown). own: st is the
// text the client sent with this message (a Query's, or a Parse's run by
// Execute), not a statement SQL PREPARE or DECLARE made, which code may
// have redefined (see after).
func (s *Session) decide(st, run *Statement, own bool) action {
	a := s.decideOne(st, run)
	if a.kind != actRaise && s.readsStaleSnapshot(st) {
		if a.kind == actCheck {
			a.after = &refSnapshotStale
		} else {
			a = raiseR(refSnapshotStale)
		}
	}
	if a.kind == actCheck {
		s.checkSent = true
		s.unit.checked = true
		s.unit.key = keyOf(a.args, a.extra)
		s.lastCheck = a.args
	}
	switch {
	case run == nil && (st.Registry == RegExecute || st.Registry == RegFetch):
		// A statement or portal the proxy does not know, in a session
		// where it is not refused: if the server has none, nothing runs.
		// If it has one, made by code the proxy could not see, it is a
		// query or DML statement (PREPARE and DECLARE hold no other),
		// which may set the token only through a function it calls, as
		// a plain SELECT f() may.
	case run != nil:
		// What runs decides: for EXECUTE, FETCH and MOVE of a statement
		// or cursor the session knows, the statement itself; their own
		// Opaque only stands in for one it does not know. A statement
		// prepared by Parse may itself be a PREPARE, DEALLOCATE, DECLARE
		// or CLOSE, which changes names whose change the proxy would not
		// follow.
		if st.Registry == RegFetch {
			// FETCH and MOVE may evaluate no row (FETCH 0, MOVE 0, a
			// portal run to its end): what the portal sets for the
			// transaction may never have been set, as for a portal run
			// again (see unitState.bound).
			rerun := s.rerun
			s.rerun = true
			s.after(run, false)
			s.rerun = rerun
		} else {
			s.after(run, own && run == st && !s.byName)
		}
		if run != st && run.Registry != RegNone {
			s.reg.distrust()
		}
	default:
		s.after(st, false)
	}
	if run != nil && st.Registry != RegFetch && run.CopyIn {
		// SQL EXECUTE of a COPY … FROM STDIN prepared by Parse, or of a
		// statement the proxy no longer knows whose text held one (see
		// opaqueRunOf). (FETCH and MOVE run only portals that return
		// rows: PortalRunFetch refuses any other.)
		s.unit.copyIn = true
	}
	return a
}

// readsStaleSnapshot reports whether st reads a portal or cursor made
// before the fencing settings it is checked under: one made before the
// client last set them (prepared.snapStale), where fencing is possible (a
// FETCH or MOVE of such a cursor, the Execute of such a portal:
// Session.execStale), or a FETCH or MOVE whose comment carries a token the
// cursor's own text did not.
func (s *Session) readsStaleSnapshot(st *Statement) bool {
	dir := st.Directives.Token != 0
	if !dir && !s.fencingPossible() {
		return false
	}
	if st.Registry != RegFetch {
		return s.execStale
	}
	p, found, _ := s.reg.lookup(regKey{portal: true, name: st.Name})
	if !found {
		return false
	}
	return p.snapStale || dir && p.directives() != st.Directives
}

func keyOf(a fencestore.CheckArgs, extra []fencestore.CheckArgs) checkKey {
	k := checkKey{token: a.Token, resource: a.Resource, tableResource: a.TableResource, require: a.RequireToken, advance: a.Advance}
	for _, e := range extra {
		k.tables += e.Resource + "\x00"
	}
	return k
}

func (s *Session) decideOne(st, run *Statement) action {
	if reserved(st.Name) {
		return raiseR(refReserved)
	}
	if s.nameUnsafe(st.Name) {
		return raiseR(refNameEncoding)
	}
	if s.cfg.Pooled && st.poolUnsupported != "" && !poolDeallocates(st, run) {
		return raiseR(refPoolUnsupported(st.poolUnsupported))
	}
	if st.Prepared != nil { // PREPARE x AS …: nothing runs yet
		if st.TouchesFence {
			return raiseR(refFenceWrite)
		}
		return action{}
	}
	if run == nil { // EXECUTE or FETCH of a statement or portal the proxy does not know
		if !s.unit.aborted && (s.fencingPossible() || st.Directives.Token != 0) {
			what := "prepared statement"
			if st.Registry == RegFetch {
				what = "cursor"
			}
			return raiseR(refUnknown(what, st.Name))
		}
		return action{}
	}
	if st.TouchesFence || run.TouchesFence {
		return raiseR(refFenceWrite)
	}
	if run.unreadable {
		return raiseR(refLexChanged)
	}
	runDir := run.Directives
	if run == st && st.execName != "" {
		var r *refusal
		if runDir, r = s.executedDirectives(st); r != nil {
			return action{kind: actRaise, refuse: *r}
		}
	}
	dir, conflict := runDirectives(st.Directives, runDir)
	if conflict != nil {
		return action{kind: actRaise, refuse: *conflict}
	}
	if r := s.tableNamesUnsure(run.Writes); r != nil {
		return action{kind: actRaise, refuse: *r}
	}
	if s.cfg.Pooled {
		if r := s.poolRefusal(st, run); r != nil {
			return raiseR(*r)
		}
		if dir.Resource == "" && s.trust&fenceResource == 0 && s.trackedResourceUnsure() {
			return raiseR(refTrackedEncoding)
		}
		dir = s.withTracked(dir)
	} else if s.cfg.TransactionTokens && run.FenceSession {
		return action{kind: actRaise, refuse: refusalSessionSet}
	}
	byName := s.replaceable(st, run) && !run.txnControl()
	if run.PreparesTxn && (s.fencingPossible() || s.checkSent) {
		return raiseR(refPrepareTxn)
	}
	switch run.Kind {
	case Commit:
		return action{}
	case NoTxnBlock, DiscardAll:
		if run.Kind == NoTxnBlock && (dir.Token != 0 || s.cfg.protection(run.Writes).found) {
			return raiseR(refCannotFenceFn(run.Text))
		}
		if byName && s.tokenMaybe && !s.unit.aborted {
			return raiseR(refStoredNoTxn(run.Text))
		}
		return action{}
	case Read:
		if run.SetsFenceSetting && run.HandOver && run == st && !s.readUnsure {
			// SELECT set_config('lock.fencing_token', …): it sets the token
			// the next statements carry; checking the old one first would
			// refuse the new holder's hand-over. It reads and writes
			// nothing. Any other form, one run through EXECUTE or a
			// cursor, or one the server may read otherwise (readUnsure:
			// what the proxy reads as a comment may be code), is checked
			// under the token in force before it.
			return action{}
		}
	case Write:
		if run.SetsFenceSetting && !run.Opaque {
			return raiseR(refSetAndWrite)
		}
	default:
		if !byName || run.SetsFenceSetting {
			// A SET or RESET of lock.* by name stays unchecked, as the
			// hand-over does (a check under the old token would refuse a
			// new holder's); see replaceable.
			return action{}
		}
	}
	m := s.cfg.protection(run.Writes)
	require := m.require && run.Kind == Write
	if dir.Token == 0 && !s.tokenMaybe && !require {
		return action{}
	}
	args := fencestore.CheckArgs{
		Resource:        dir.Resource,
		TableResource:   first(m.resources),
		DefaultResource: s.cfg.DefaultResource,
		RequireToken:    require,
		Advance:         !(s.cfg.ReadsCheckOnly && run.Kind == Read),
	}
	if dir.Token != 0 {
		args.Token = strconv.FormatInt(dir.Token, 10)
	}
	extra := tableChecks(args, m.resources)
	if run.recalled && s.tokenMaybe {
		extra = append(extra, fencestore.CheckArgs{DefaultResource: s.cfg.DefaultResource, Advance: args.Advance})
	}
	if s.unit.checked && s.unit.key.covers(keyOf(args, extra)) || s.unit.aborted {
		return action{}
	}
	if s.configTextUnsure(args, extra) {
		return raiseR(refConfigEncoding)
	}
	return action{kind: actCheck, args: args, extra: extra, guard: s.guardBits(append([]fencestore.CheckArgs{args}, extra...))}
}

// guardBits returns, under Config.TransactionTokens, the fencing settings
// the checks would read although the current transaction did not set them:
// a value there was left on the server connection by someone, maybe
// another client, so the first check refuses when one is set
// (fencestore.AppendGuardedCall), for all of them. A check's own token or
// resource (a directive's, a table's forced one) is read instead of the
// setting's.
func (s *Session) guardBits(checks []fencestore.CheckArgs) uint8 {
	if !s.cfg.txnScoped() {
		return 0
	}
	var g uint8
	for _, c := range checks {
		if c.Token == "" {
			g |= fenceToken
		}
		if c.Resource == "" {
			g |= fenceResource
		}
	}
	return g &^ s.trust
}

// replaceable reports whether run, which st runs, comes from a name that
// SQL can redefine: a prepared statement or cursor run by SQL EXECUTE,
// FETCH or MOVE, or a named statement or portal run by the extended
// protocol (Session.byName). A function called from a plain SELECT, which
// the proxy cannot see into, can DEALLOCATE or CLOSE it and PREPARE or
// DECLARE a query or DML statement under the same name; so what runs there
// is checked, where the session may carry a token, even when the statement
// the proxy knows under the name (SHOW, SET x …) would need no check. The
// unnamed statement and portal cannot be made by SQL. Not covered: a
// statement the proxy knows as one that sets lock.fencing_token or
// lock.resource (SET, RESET, the hand-over), which must not be checked under
// the token it replaces, and transaction control (see txnControl).
func (s *Session) replaceable(st, run *Statement) bool {
	return run != st || s.byName
}

// setsForTxnOnly reports whether st sets the fencing settings it sets for
// its transaction only: SET LOCAL, or a SELECT of nothing but
// set_config(…, true) calls with constant names that can be only
// PostgreSQL's (fenceScoped, fenceExact), and no code the text does not
// show. A value so set is gone once the transaction ends, whatever happened
// in it. A parameter's type, which may pick a user's overload or cast, is
// known only under pooled (see Msg.ParamTypes).
func (st *Statement) setsForTxnOnly(pooled bool) bool {
	return st.SetsFenceSetting && !st.FenceSession && !st.Opaque && st.FenceReset == 0 &&
		st.fenceExact && (pooled || !st.FenceParam)
}

// txnControl reports whether st controls the transaction: BEGIN, COMMIT,
// ROLLBACK, savepoints, SET TRANSACTION or SESSION CHARACTERISTICS. Nothing
// may run before some of them in their transaction (SET TRANSACTION
// ISOLATION LEVEL, BEGIN ISOLATION LEVEL in an implicit transaction that
// ran a check: 25001), and in an aborted transaction they run where a check
// cannot (25P02), so no check goes in front of them even by name: the
// replacement of such a name by a function stays out of reach (docs/security.md,
// "What fencing covers and what it does not").
func (st *Statement) txnControl() bool {
	switch st.Kind {
	case Begin, Commit, Rollback, RollbackTo, Savepoint, Release:
		return true
	}
	return st.TxnSetting
}

// bytesAsUTF8 reports whether the server reads the session's text as the
// UTF-8 bytes the proxy reads: client_encoding UTF8, or SQL_ASCII (no
// conversion at all).
func (s *Session) bytesAsUTF8() bool {
	return s.settings.encoding == "UTF8" || s.settings.encoding == "SQL_ASCII"
}

// configTextUnsure reports whether a check would carry a resource name from
// the config (a table's resource, default_resource) with non-ASCII
// characters to a server that may not read its UTF-8 bytes as UTF-8: the
// server converts the check's text (a Query, or Bind parameters) from
// client_encoding, so under LATIN1 "billing-é" would be checked as
// "billing-Ã©", another resource with another mark. The comment's
// resource= is the client's own text and is converted like its SET
// lock.resource; it needs nothing.
func (s *Session) configTextUnsure(args fencestore.CheckArgs, extra []fencestore.CheckArgs) bool {
	if s.bytesAsUTF8() && !s.unit.lexing {
		return false
	}
	if !isASCII(args.TableResource) || !isASCII(args.DefaultResource) {
		return true
	}
	for _, e := range extra {
		if !isASCII(e.Resource) || !isASCII(e.TableResource) || !isASCII(e.DefaultResource) {
			return true
		}
	}
	return false
}

// tableNamesUnsure refuses a statement that names a table with non-ASCII
// characters, where the config has require_token tables and the server does not read
// the client's bytes as UTF-8: the config's names are UTF-8, and the proxy
// would compare the client's bytes (LATIN1 e9 a9 a9, read as U+9A69) with
// them, while the server converts them ("é©©") and writes the table the
// config names. (A text whose bytes may read differently because the
// encoding is changing is refused before: see analyzeKnown, query.)
func (s *Session) tableNamesUnsure(writes []TableRef) *refusal {
	if len(s.cfg.Tables) == 0 || s.bytesAsUTF8() {
		return nil
	}
	for _, w := range writes {
		if !isASCII(w.Schema) || !isASCII(w.Name) {
			return &refConfigEncoding
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// runDirectives returns the directives a statement runs under: those of
// st's own comments, each field falling back to the directives of run, the
// statement that runs (the prepared statement of SQL EXECUTE, the cursor's
// query of FETCH), fixed when it was prepared. A comment on the EXECUTE that
// names only a resource must not drop the prepared statement's token (its
// write would then run under the session's token, or with no check at all).
// Two different values for one field are refused, as within one statement.
func runDirectives(st, run Directives) (Directives, *refusal) {
	var err interface {
		error
		SQLState() string
	}
	d := st
	switch {
	case d.Token == 0:
		d.Token = run.Token
	case run.Token != 0 && run.Token != d.Token:
		err = &TokenError{Value: strconv.FormatInt(d.Token, 10), Reason: "conflicts with fencing_token=" + strconv.FormatInt(run.Token, 10) + " of the statement it runs"}
	}
	switch {
	case d.Resource == "":
		d.Resource = run.Resource
	case run.Resource != "" && run.Resource != d.Resource && err == nil:
		err = &DirectiveError{Key: keyResource, Value: d.Resource, Reason: "conflicts with resource " + strconv.Quote(run.Resource) + " of the statement it runs"}
	}
	if err != nil {
		return d, &refusal{code: err.SQLState(), message: "fenceproxy: " + err.Error()}
	}
	return d, nil
}

// executedDirectives returns the directives of the prepared statement that
// st, a CREATE TABLE … AS EXECUTE, runs: a token in its comment counts as
// for a plain EXECUTE. A statement the proxy cannot read is refused where
// a plain EXECUTE of it would be.
func (s *Session) executedDirectives(st *Statement) (Directives, *refusal) {
	p, found, _ := s.reg.lookup(regKey{name: st.execName})
	if !found || p.unknown {
		return Directives{}, nil // as for EXECUTE of a statement the proxy never saw
	}
	var ps *Statement
	switch {
	case p.opaque:
		ps = s.opaqueRunOf(p)
		if ps.unreadable {
			return Directives{}, &refLexChanged
		}
	case p.st != nil:
		ps = p.st
	default:
		ps = s.analyzeStatement(p)
	}
	if ps == nil {
		if s.fencingPossible() || st.Directives.Token != 0 {
			r := refUnknown("prepared statement", st.execName)
			return Directives{}, &r
		}
		return Directives{}, nil
	}
	return ps.Directives, nil
}

// tableChecks returns one more check per resource of the tables a
// statement writes, with that resource forced, unless the statement's own
// resource= is it: the server resolves the first check's resource (the
// comment, then lock.resource, which the proxy cannot see, then the
// table's), and the database guard (fenceproxy protect) needs a check of
// each table's own resource.
func tableChecks(main fencestore.CheckArgs, resources []string) []fencestore.CheckArgs {
	var out []fencestore.CheckArgs
	for _, r := range resources {
		if r == main.Resource {
			continue
		}
		c := main
		c.Resource, c.TableResource = r, r
		out = append(out, c)
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// after applies what st does to the fencing state once it has run; own:
// it runs as its own text shows it, not through a name that code may have
// redefined (see replaceable).
func (s *Session) after(st *Statement, own bool) {
	s.unit.ran = true
	s.unit.blockFresh = st.Kind == Begin || st.Chain && (st.Kind == Commit || st.Kind == Rollback) ||
		s.unit.blockFresh && staysFresh(st.Kind)
	s.unit.blockMaybe = s.unit.blockMaybe || st.Kind == Begin || st.Chain || st.Opaque
	switch st.Kind {
	case Commit, Rollback, RollbackTo, DiscardAll, Begin:
		s.unit.aborted = false
	}
	if st.Opaque {
		s.unit.aborted = false // it may have rolled back to a savepoint
	}
	switch st.Kind {
	case Commit, Rollback, RollbackTo, DiscardAll, NoTxnBlock:
		// The transaction ended, or a savepoint rollback may have undone the
		// advance: the next statement checks again. (A statement that
		// cannot run in a transaction block commits the one it runs in
		// where the server lets it run at all: in an extended-protocol
		// pipeline, on servers without PostgreSQL's pipeline check.) It may
		// also revert a change of standard_conforming_strings or
		// client_encoding made in the transaction, when one may have been
		// (lexTouched; DISCARD ALL resets them whenever they were set): the
		// next text waits for the server's ParameterStatus. A change by
		// code whose text does not show it is reverted unseen, as code
		// can change them unseen (see lexUnseen).
		s.unit.checked = false
		if s.lexTouched || st.Kind == DiscardAll {
			s.lexChanging()
		}
		s.endGen++
		if s.maybeAtEnd {
			s.maySetToken() // see Session.maybeAtEnd
		}
	}
	if st.SetsFenceSetting {
		s.fenceSets++
		s.reg.staleSnapshots(s.fenceSets)
		if st.FenceReset != 0 {
			// RESET, SET … TO DEFAULT: the session may hold no token
			// after it; a probe says so (see maySetToken).
			s.maySetToken()
		} else {
			s.setMaybeFor(own && st.setsForTxnOnly(s.cfg.Pooled))
			s.unit.checked = false
		}
		if st.Kind == DiscardAll {
			s.unit.probe = true // it may clear the token
		}
	}
	if st.Opaque {
		// DO, CALL, EXECUTE: the code may set the token, or COMMIT.
		s.endGen++
		s.setMaybe()
		s.unit.checked = false
		s.unit.probe = true
		s.lexChanging()
		s.reg.distrust()
	}
	if st.SetsLexing {
		s.lexChanging()
	}
	switch {
	case st.Opaque, st.Kind == Commit, st.Kind == Rollback, st.Kind == DiscardAll, st.Kind == NoTxnBlock:
		// The transaction ended, or code the proxy cannot see may have
		// changed what it set. A statement that cannot run in a
		// transaction block commits the one it runs in where the server
		// lets it run at all (in an extended-protocol pipeline, on servers
		// without PostgreSQL's pipeline check).
		s.trust, s.savepoints = 0, nil
	case st.Kind == Savepoint, st.Kind == Release, st.Kind == RollbackTo:
		s.savepoint(st.Kind, st.Name)
	case s.rerun:
		s.trust &^= st.FenceReset
	default:
		s.trust = s.trust&^st.FenceReset | st.FenceLocal
	}
}

// nameUnsafe reports whether the server may key name otherwise than the
// proxy does: it converts a name from client_encoding before truncating it
// to 63 bytes, and the proxy truncates the client's bytes.
func (s *Session) nameUnsafe(name string) bool {
	if s.settings.encoding == "UTF8" || !s.fencingPossible() {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			return true
		}
	}
	return false
}

// sessionKey is the check a statement without directives gets in a session
// that has no require_token table: the session's token and resource, advancing.
func (s *Session) sessionKey() checkKey {
	return keyOf(fencestore.CheckArgs{DefaultResource: s.cfg.DefaultResource, Advance: true}, nil)
}

// opaqueRun stands for a statement whose text the proxy cannot know: it is
// checked wherever the session may hold a token, and followed by a probe.
func opaqueRun() *Statement { return &Statement{Kind: Write, Opaque: true, CopyIn: true} }

// unknownRun stands for a portal the proxy never saw bound (a refcursor a
// function opened), or that does not exist (then nothing runs): a query or
// DML statement, checked wherever the session may hold a token. Like a
// plain SELECT f(), it may set the token only through a function it calls,
// so no probe follows it.
func unknownRun() *Statement { return &Statement{Kind: Write} }

// opaqueRunOf stands for p after code the proxy could not see ran since the
// server confirmed it (it may have replaced p under the same name): what it
// runs is unknown, but a token in the comments p carried when the proxy knew
// it still counts, since a named statement's comment is fixed for every
// execution. Such a run is checked with that token and, where the session
// may hold one, with the session's token too (in case p was replaced by a
// statement without the comment).
func (s *Session) opaqueRunOf(p *prepared) *Statement {
	run := opaqueRun()
	// Code can replace a statement only by SQL PREPARE, which holds a
	// query or DML statement, never PREPARE TRANSACTION nor COPY: the run
	// may be one of those only where its own text held the words.
	run.PreparesTxn = p.text != "" && containsFold(p.text, "prepare") && containsFold(p.text, "transaction")
	run.CopyIn = p.text != "" && mayCopyIn(p.text, nil)
	switch {
	case p.st != nil:
		run.Directives = p.st.Directives
	case p.text != "" && mayHaveDirectives(p.text):
		d, err := ParseDirectives(p.text)
		if err != nil || p.lex.unsafe(p.text) != "" || s.unsureLex(p) && lexRisky(p.text) {
			run.unreadable = true
			break
		}
		run.Directives = d
	}
	run.recalled = run.Directives.Token != 0
	return run
}

// fmtFirstWords puts the first words of text in place of %s in msg.
func fmtFirstWords(msg, text string) string {
	return strings.Replace(msg, "%s", firstWords(text), 1)
}

// firstWords names a statement in a message: its first two words.
func firstWords(text string) string {
	f := strings.Fields(stripLeadingComments(text))
	if len(f) > 2 {
		f = f[:2]
	}
	return strings.ToUpper(strings.Join(f, " "))
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return s
			}
			s = s[i+2:]
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		default:
			return s
		}
	}
}

// appendAction appends the statements of a, separated by "; ".
func appendAction(dst []byte, a action) []byte {
	if a.kind == actRaise {
		return a.refuse.append(dst)
	}
	if a.guard != 0 {
		dst = fencestore.AppendGuardedCall(dst, a.args, a.guard&fenceToken != 0, a.guard&fenceResource != 0)
	} else {
		dst = fencestore.AppendLiteralCall(dst, a.args)
	}
	for _, e := range a.extra {
		dst = append(dst, "; "...)
		dst = fencestore.AppendLiteralCall(dst, e)
	}
	if a.after != nil {
		dst = append(dst, "; "...)
		dst = a.after.append(dst)
	}
	return dst
}
