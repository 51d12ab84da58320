package gate

import (
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

const (
	// Forward sends the reply to the client as it came.
	Forward Verdict = iota
	// Hide drops the reply: it answers a message the gate injected.
	Hide
	// Replace sends the modified ErrorResponse instead of the original.
	Replace
)

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
