package gate

import (
	"strconv"
	"strings"

	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Reserved names of the statements and portals the gate injects in the
// extended protocol. The unit separator byte makes a clash with a client's
// own names practically impossible (clients name statements with printable
// text: pgx "stmtcache_…", JDBC "S_1", libpq whatever the caller chose).
const (
	checkName = "fenceproxy\x1fcheck"
	raiseName = "fenceproxy\x1fraise"
)

// SQLSTATEs of the refusals the gate itself decides (the server raises them
// for the gate, inside the transaction, so they abort it like any error).
const (
	codeFenceWrite   = "42501" // insufficient_privilege: schema fence written through the proxy
	codeCannotFence  = "0A000" // feature_not_supported: statement cannot run in a transaction block
	codeCannotParse  = "42601" // syntax_error: text the gate could not analyse, with a token in play
	msgFenceWrite    = "fenceproxy: schema fence holds the fencing high-water marks and cannot be written or altered through the proxy"
	msgCannotFenceFn = "fenceproxy: %s cannot run inside a transaction block, so a fencing token cannot be checked atomically with it; run it without a token"
)

// Config is the fencing policy a proxy's sessions share. It is read-only once
// a session uses it.
type Config struct {
	// Analyzer memoizes statement analysis across sessions; nil analyses
	// every time.
	Analyzer *Analyzer
	// DefaultResource is the resource of a token that names none; "" means
	// such a token is an error.
	DefaultResource string
	// Tables maps protected tables to their resource. Keys are "schema.name",
	// or "name" for a table named without a schema, which then matches a
	// table of that name in any schema.
	Tables map[string]Protection
	// ReadsCheckOnly makes reads check the mark without advancing it.
	ReadsCheckOnly bool
}

// Protection is what the config says about one table.
type Protection struct {
	Resource     string // the table's resource
	RequireToken bool   // writes without a token are refused (55Z02)
}

// protection returns the first protected table among writes.
func (c *Config) protection(writes []TableRef) (Protection, string, bool) {
	if len(c.Tables) == 0 {
		return Protection{}, "", false
	}
	for _, t := range writes {
		if p, ok := c.Tables[t.String()]; ok {
			return p, t.String(), true
		}
		if t.Schema != "" {
			if p, ok := c.Tables[t.Name]; ok {
				return p, t.String(), true
			}
			continue
		}
		// Unqualified in the statement: search_path decides on the server,
		// so any configured schema may be meant. Fail closed.
		for name, p := range c.Tables {
			if i := strings.LastIndexByte(name, '.'); i >= 0 && name[i+1:] == t.Name {
				return p, t.String(), true
			}
		}
	}
	return Protection{}, "", false
}

// Verdict says what to do with a reply from the server.
type Verdict uint8

const (
	// Forward sends the reply to the client as it came.
	Forward Verdict = iota
	// Hide drops the reply: it answers a message the gate injected.
	Hide
	// Replace sends the modified ErrorResponse instead of the original.
	Replace
)

// checkKey identifies what a check covered, so that a later statement of the
// same transaction with the same token sources needs no second check.
type checkKey struct {
	token, resource, tableResource string
	require, advance               bool
}

// covers reports whether a check with key k makes one with key n redundant.
func (k checkKey) covers(n checkKey) bool {
	return k.token == n.token && k.resource == n.resource && k.tableResource == n.tableResource &&
		(k.advance || !n.advance) && (k.require || !n.require)
}

// unitState is the gate's prediction, while the client sends a unit (a Query,
// a FunctionCall, or extended-protocol messages up to Sync), of whether the
// transaction the next statement runs in has been checked. Within a unit the
// prediction is exact: the server runs the unit's statements in order and
// skips the rest after the first error.
type unitState struct {
	open    bool
	checked bool
	key     checkKey
}

// statement is a prepared statement or portal: its text, analysed lazily.
type statement struct {
	text string
}

// Session is the fencing state machine of one client connection. It sees
// every client message before pgwire forwards it and every server reply
// before pgwire relays it, and answers with values: messages to inject, a
// rewritten query, a verdict on a reply. It does no I/O.
//
// A Session is not safe for concurrent use; pgwire serializes the calls from
// its two directions.
type Session struct {
	cfg *Config

	// tokenMaybe is set once lock.fencing_token or lock.resource may hold a
	// value on the server: from then on every transaction's first read or
	// write is checked, and the server evaluates the setting inside the check
	// (current_setting), so the gate never has to agree with it exactly.
	tokenMaybe bool

	stmts   map[string]*statement
	portals map[string]*statement

	checkParsed bool // our check statement is (being) prepared upstream

	unit unitState

	// Reply side.
	slots     slotQueue
	lastReady byte // status of the last ReadyForQuery: 'I', 'T' or 'E'
	precheck  PrecheckResult
	txChecked bool // confirmed: the open transaction block has passed a check
	txKey     checkKey
}

// NewSession returns the state machine for a connection whose startup
// message carried params.
func NewSession(cfg *Config, params map[string]string) *Session {
	s := &Session{cfg: cfg, stmts: map[string]*statement{}, portals: map[string]*statement{}, lastReady: 'I'}
	if opts := params["options"]; containsFold(opts, "lock.fencing_token") || containsFold(opts, "lock.resource") {
		s.tokenMaybe = true
	}
	return s
}

// mayMatter reports whether a text can concern fencing at all when the
// session has no token and no table is protected: only then may the gate
// skip analysing it.
func (s *Session) mayMatter(sql string) bool {
	return s.tokenMaybe || len(s.cfg.Tables) > 0 ||
		containsFold(sql, "fenc") || containsFold(sql, "lock.") || containsFold(sql, `lock"`) || containsFold(sql, "set_config")
}

func (s *Session) analyze(sql string) (*Analysis, error) {
	if !s.mayMatter(sql) {
		return nil, nil
	}
	if s.unit.checked && len(s.cfg.Tables) == 0 && !mayChangeFencing(sql) {
		// The transaction has passed its check and this text can neither
		// end it, undo the check, change the token, carry a directive nor
		// touch schema fence: nothing to decide, so nothing to parse. This
		// keeps the parser off all but the first statement of a fenced
		// transaction.
		return nil, nil
	}
	return s.cfg.Analyzer.Analyze(sql)
}

// changeWords are the fragments without which a statement cannot end a
// transaction (COMMIT, END, ROLLBACK, ABORT, PREPARE TRANSACTION), undo a
// check (ROLLBACK TO), change the fencing settings (SET/RESET lock.…,
// set_config, RESET ALL, DISCARD ALL), carry a directive or mention schema
// fence ("fenc"), or drop the prepared check statement (DEALLOCATE, DISCARD).
// A false match only costs a parse.
var changeWords = [...]string{"commit", "end", "rollback", "abort", "prepare", "lock.", `lock"`, "set_config", "reset", "discard", "dealloc", "fenc"}

func mayChangeFencing(sql string) bool {
	for _, w := range changeWords {
		if containsFold(sql, w) {
			return true
		}
	}
	return false
}

// beginUnit starts a unit, carrying over the confirmed state of the
// transaction block only when every earlier unit has been answered.
func (s *Session) beginUnit() {
	if s.unit.open {
		return
	}
	s.unit = unitState{open: true}
	if s.slots.unitsInFlight == 0 && s.lastReady == 'T' && s.txChecked {
		s.unit.checked, s.unit.key = true, s.txKey
	}
}

// endUnit closes the unit with the slot whose ReadyForQuery ends it.
func (s *Session) endUnit(kind slotKind) {
	s.slots.push(slot{kind: kind})
	s.endUnitWith()
}

// action is what to inject before one statement.
type action struct {
	kind    uint8 // actNone, actCheck, actRaise
	args    hwm.CheckArgs
	code    string
	message string
}

const (
	actNone uint8 = iota
	actCheck
	actRaise
)

// decide returns what must run before st, and updates the unit's prediction
// for what st itself does.
func (s *Session) decide(st *Statement) action {
	a := s.decideOne(st)
	if a.kind == actCheck {
		s.unit.checked = true
		s.unit.key = keyOf(a.args)
	}
	s.after(st)
	return a
}

func keyOf(a hwm.CheckArgs) checkKey {
	return checkKey{token: a.Token, resource: a.Resource, tableResource: a.TableResource, require: a.RequireToken, advance: a.Advance}
}

func (s *Session) decideOne(st *Statement) action {
	if st.TouchesFence {
		return action{kind: actRaise, code: codeFenceWrite, message: msgFenceWrite}
	}
	target := st
	if st.Prepared != nil { // PREPARE x AS …: nothing runs yet
		return action{}
	}
	switch target.Kind {
	case NoTxnBlock:
		_, _, protected := s.cfg.protection(st.Writes)
		if st.Directives.Token != 0 || protected {
			return action{kind: actRaise, code: codeCannotFence, message: strings.Replace(msgCannotFenceFn, "%s", firstWords(st.Text), 1)}
		}
		return action{}
	case Read:
		if st.SetsFenceSetting {
			// SELECT set_config('lock.fencing_token', …): it sets the token
			// the next statements carry; checking the old one first would
			// refuse the new holder's hand-over.
			return action{}
		}
	case Write:
	default:
		return action{}
	}
	prot, _, protected := s.cfg.protection(st.Writes)
	require := protected && prot.RequireToken && st.Kind == Write
	if st.Directives.Token == 0 && !s.tokenMaybe && !require {
		return action{}
	}
	args := hwm.CheckArgs{
		Resource:        st.Directives.Resource,
		TableResource:   prot.Resource,
		DefaultResource: s.cfg.DefaultResource,
		RequireToken:    require,
		Advance:         !(s.cfg.ReadsCheckOnly && st.Kind == Read),
	}
	if st.Directives.Token != 0 {
		args.Token = strconv.FormatInt(st.Directives.Token, 10)
	}
	if s.unit.checked && s.unit.key.covers(keyOf(args)) {
		return action{}
	}
	return action{kind: actCheck, args: args}
}

// after applies what st does to the fencing state once it has run.
func (s *Session) after(st *Statement) {
	switch st.Kind {
	case Commit, Rollback, RollbackTo, DiscardAll:
		// The transaction ended, or a savepoint rollback may have undone the
		// advance: the next statement checks again.
		s.unit.checked = false
	}
	if st.SetsFenceSetting {
		s.tokenMaybe = true
		s.unit.checked = false
	}
	if st.Kind == DiscardAll || (st.Kind == Other && containsFold(st.Text, "deallocate")) {
		// Our prepared check statement may be gone.
		s.checkParsed = false
	}
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

// Query takes a simple-protocol Query. It returns the text to send instead
// (with checks injected before the statements that need them) and true, or
// "" and false to send the client's text unchanged.
func (s *Session) Query(sql string) (string, bool) {
	s.beginUnit()
	a, err := s.analyze(sql)
	var injected []injKind
	var out []byte
	if err != nil {
		out = s.refuseUnparsable(err)
		if out != nil {
			injected = []injKind{injRaise}
			out = append(append(out, "; "...), sql...)
		}
	} else if a != nil {
		prev := 0
		for i := range a.Statements {
			st := &a.Statements[i]
			act := s.decide(st)
			if act.kind == actNone {
				injected = append(injected, injNone)
				continue
			}
			if out == nil {
				out = make([]byte, 0, len(sql)+160)
			}
			out = append(out, sql[prev:st.Start]...)
			out = appendAction(out, act)
			out = append(out, "; "...)
			prev = st.Start
			kind := injCheck
			if act.kind == actRaise {
				kind = injRaise
			}
			injected = append(injected, kind, injNone)
		}
		if out != nil {
			out = append(out, sql[prev:]...)
		}
	}
	if out == nil {
		s.slots.push(slot{kind: slotQuery})
		s.endUnitWith()
		return "", false
	}
	s.slots.push(slot{kind: slotQuery, injected: injected})
	s.endUnitWith()
	return string(out), true
}

// endUnitWith marks the slot just pushed as the one ending the unit.
func (s *Session) endUnitWith() {
	last := s.slots.last()
	last.ends = true
	last.endsChecked, last.key = s.unit.checked, s.unit.key
	s.slots.unitsInFlight++
	s.unit.open = false
}

// refuseUnparsable decides about text the analysis could not take apart. A
// syntax error that the server will report anyway passes when no token is in
// play; otherwise the statement is refused, because it cannot be fenced.
func (s *Session) refuseUnparsable(err error) []byte {
	var msg, code string
	switch e := err.(type) {
	case *TokenError:
		code, msg = e.SQLState(), "fenceproxy: "+e.Error()
	case *DirectiveError:
		code, msg = e.SQLState(), "fenceproxy: "+e.Error()
	case *ParseError:
		if e.Syntax {
			// The server parses the whole text before running any of it and
			// will reject it with its own syntax error: nothing to fence.
			return nil
		}
		code, msg = codeCannotParse, "fenceproxy: cannot analyse the statement to fence it: "+e.Message
	default:
		code, msg = codeCannotParse, "fenceproxy: cannot analyse the statement to fence it: "+err.Error()
	}
	return hwm.AppendRaise(nil, code, msg)
}

func appendAction(dst []byte, a action) []byte {
	if a.kind == actRaise {
		return hwm.AppendRaise(dst, a.code, a.message)
	}
	return hwm.AppendLiteralCall(dst, a.args)
}

// PrecheckResult is the outcome of a pre-check (see Precheck).
type PrecheckResult uint8

const (
	// PrecheckNone: no pre-check has just completed.
	PrecheckNone PrecheckResult = iota
	// PrecheckProceed: no token is set; send the client's Query.
	PrecheckProceed
	// PrecheckRefused: the client got the refusal and ReadyForQuery; drop
	// its Query.
	PrecheckRefused
)

// Precheck reports whether the client's Query must wait for a check of its
// own first, and returns that check's text. It applies to a Query that is
// one statement which cannot run inside a transaction block (VACUUM, CREATE
// INDEX CONCURRENTLY, …), in a session whose lock.fencing_token setting may
// hold a token: such a statement cannot share a transaction with the check,
// so the check runs as a Query of its own and raises 0A000 only when the
// setting holds a token. The caller sends the returned text as a Query,
// waits until TakePrecheck reports the outcome, then sends the client's
// Query (through Query, as usual) or drops it. Precheck records nothing when
// it returns false.
func (s *Session) Precheck(sql string) (string, bool) {
	if !s.tokenMaybe || s.unit.open {
		return "", false
	}
	a, err := s.cfg.Analyzer.Analyze(sql)
	if err != nil || len(a.Statements) != 1 {
		return "", false
	}
	st := &a.Statements[0]
	if st.Kind != NoTxnBlock || st.Directives.Token != 0 {
		return "", false // a comment token is refused by Query itself
	}
	if _, _, protected := s.cfg.protection(st.Writes); protected {
		return "", false // refused by Query itself
	}
	s.beginUnit()
	s.slots.push(slot{kind: slotQuery, injected: []injKind{injRaise}, precheck: true})
	s.endUnitWith()
	msg := strings.Replace(msgCannotFenceFn, "%s", firstWords(st.Text), 1)
	return string(hwm.AppendRaiseIfToken(nil, codeCannotFence, msg)), true
}

// TakePrecheck returns the outcome of the pre-check whose ReadyForQuery was
// the last one passed to ReadyForQuery, once; PrecheckNone otherwise.
func (s *Session) TakePrecheck() PrecheckResult {
	r := s.precheck
	s.precheck = PrecheckNone
	return r
}

// Parse records an extended-protocol statement.
func (s *Session) Parse(name, sql string) {
	s.beginUnit()
	s.stmts[name] = &statement{text: sql}
	s.slots.push(slot{kind: slotParse})
}

// Bind records which statement a portal runs. Parameters are not needed.
func (s *Session) Bind(portal, stmt string) {
	s.beginUnit()
	s.portals[portal] = s.stmts[stmt]
	s.slots.push(slot{kind: slotBind})
}

// Describe records a Describe of a statement ('S') or portal ('P').
func (s *Session) Describe(kind byte) {
	s.beginUnit()
	if kind == 'S' {
		s.slots.push(slot{kind: slotDescribeStmt})
	} else {
		s.slots.push(slot{kind: slotDescribePortal})
	}
}

// Close records the Close of a statement ('S') or portal ('P').
func (s *Session) Close(kind byte, name string) {
	s.beginUnit()
	if kind == 'S' {
		delete(s.stmts, name)
	} else {
		delete(s.portals, name)
	}
	s.slots.push(slot{kind: slotClose})
}

// Sync ends an extended-protocol unit.
func (s *Session) Sync() {
	s.beginUnit()
	s.endUnit(slotSync)
}

// FunctionCall records a fast-path function call (a unit of its own). It is
// not fenced: the gate cannot see what the function does.
func (s *Session) FunctionCall() {
	s.beginUnit()
	s.endUnit(slotFunctionCall)
}

// Execute takes the Execute of portal and returns the messages to send before
// it (nil when none).
func (s *Session) Execute(portal string) []pgproto3.FrontendMessage {
	s.beginUnit()
	var inject []pgproto3.FrontendMessage
	if p := s.portals[portal]; p != nil {
		inject = s.executeStatement(p.text)
	}
	s.slots.push(slot{kind: slotExecute})
	return inject
}

func (s *Session) executeStatement(text string) []pgproto3.FrontendMessage {
	a, err := s.analyze(text)
	if err != nil {
		if raise := s.refuseUnparsable(err); raise != nil {
			return s.injectRaise(string(raise))
		}
		return nil
	}
	if a == nil || len(a.Statements) != 1 {
		return nil // irrelevant, empty, or several (the server refuses those)
	}
	act := s.decide(&a.Statements[0])
	switch act.kind {
	case actCheck:
		return s.injectCheck(act.args)
	case actRaise:
		return s.injectRaise(string(hwm.AppendRaise(nil, act.code, act.message)))
	}
	return nil
}

func (s *Session) injectCheck(args hwm.CheckArgs) []pgproto3.FrontendMessage {
	msgs := make([]pgproto3.FrontendMessage, 0, 4)
	if !s.checkParsed {
		msgs = append(msgs, &pgproto3.Parse{Name: checkName, Query: hwm.CheckStatement})
		s.slots.push(slot{kind: slotParse, inj: true, check: true, parse: true})
		s.checkParsed = true
	}
	msgs = append(msgs,
		&pgproto3.Bind{DestinationPortal: checkName, PreparedStatement: checkName, Parameters: hwm.Params(args)},
		&pgproto3.Execute{Portal: checkName},
		&pgproto3.Close{ObjectType: 'P', Name: checkName},
	)
	s.slots.push(slot{kind: slotBind, inj: true, check: true})
	s.slots.push(slot{kind: slotExecute, inj: true, check: true})
	s.slots.push(slot{kind: slotClose, inj: true, check: true})
	return msgs
}

func (s *Session) injectRaise(sql string) []pgproto3.FrontendMessage {
	s.slots.push(slot{kind: slotClose, inj: true})
	s.slots.push(slot{kind: slotParse, inj: true})
	s.slots.push(slot{kind: slotBind, inj: true})
	s.slots.push(slot{kind: slotExecute, inj: true})
	return []pgproto3.FrontendMessage{
		&pgproto3.Close{ObjectType: 'S', Name: raiseName},
		&pgproto3.Parse{Name: raiseName, Query: sql},
		&pgproto3.Bind{DestinationPortal: raiseName, PreparedStatement: raiseName},
		&pgproto3.Execute{Portal: raiseName},
	}
}

// Reply takes the type of a server message other than ErrorResponse and
// ReadyForQuery and says whether the client sees it.
func (s *Session) Reply(typ byte) Verdict {
	switch typ {
	case 'N', 'S', 'A': // notices, parameter status, notifications: anytime
		return Forward
	}
	h := s.slots.front()
	if h == nil {
		return Forward
	}
	v := Forward
	if h.isInjected() {
		v = Hide
	}
	switch h.kind {
	case slotQuery:
		if typ == 'C' || typ == 'I' {
			h.stmt++
		}
	case slotParse:
		if typ == '1' {
			s.slots.pop()
		}
	case slotBind:
		if typ == '2' {
			s.slots.pop()
		}
	case slotExecute:
		if typ == 'C' || typ == 'I' || typ == 's' {
			s.slots.pop()
		}
	case slotDescribeStmt, slotDescribePortal:
		if typ == 'T' || typ == 'n' {
			s.slots.pop()
		}
	case slotClose:
		if typ == '3' {
			s.slots.pop()
		}
	}
	return v
}

// Error takes an ErrorResponse. When it answers an injected check, e is
// rewritten for the client (internal context removed, a missing fence store
// named as such) and the verdict is Replace.
func (s *Session) Error(e *pgproto3.ErrorResponse) Verdict {
	h := s.slots.front()
	if h == nil || e.Severity == "FATAL" || e.Severity == "PANIC" {
		return Forward
	}
	injected, check := h.isInjected(), h.isCheck()
	if h.parse || (check && e.Code == "26000") {
		// The check statement was not prepared, or is gone (the client ran
		// DEALLOCATE ALL in a way gate did not see): prepare it next time.
		s.checkParsed = false
	}
	if h.kind == slotQuery {
		h.failed = true
		h.stmt = len(h.injected) // the rest of the query is skipped
	} else {
		// The server skips every message up to the next Sync.
		s.slots.dropUntilUnitEnd()
	}
	if !injected {
		return Forward
	}
	if check {
		if code, msg, rewrite := hwm.ClientError(e.Code, e.Message); rewrite {
			e.Code, e.Message = code, msg
		}
	}
	e.Where, e.InternalQuery, e.InternalPosition, e.Position = "", "", 0, 0
	e.SchemaName, e.TableName, e.ColumnName, e.DataTypeName, e.ConstraintName = "", "", "", "", ""
	e.File, e.Line, e.Routine = "", 0, ""
	return Replace
}

// ReadyForQuery takes the end of a unit with the transaction status. It
// hides the ReadyForQuery of a pre-check that passed: the client's own Query
// follows and gets its own.
func (s *Session) ReadyForQuery(status byte) Verdict {
	u, ok := s.slots.popUnit()
	if ok && u.precheck {
		s.lastReady = status
		if u.failed {
			s.precheck = PrecheckRefused
			return Forward
		}
		s.precheck = PrecheckProceed
		return Hide
	}
	s.lastReady = status
	s.txChecked = ok && status == 'T' && u.endsChecked
	s.txKey = u.key
	if status == 'I' && s.slots.unitsInFlight == 0 {
		// Portals do not outlive their transaction.
		clear(s.portals)
	}
	return Forward
}
