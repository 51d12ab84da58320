package gate

import (
	"slices"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// reservedPrefix starts the names of the statements and portals the gate
// injects. A client message, or SQL statement, that names a statement,
// portal or cursor with this prefix is refused (docs/design.md "Fail closed",
// rule 5): a client that could close or redefine the proxy's statements
// could make a check run its own text.
const reservedPrefix = "fenceproxy\x1f"

// Names of the statements and portals the gate injects.
const (
	checkName = reservedPrefix + "check"
	raiseName = reservedPrefix + "raise"
	probeName = reservedPrefix + "probe"
)

// Msg is a client message as gate needs to see it. pgwire fills in the
// fields of the message's type; Bind's parameters and copy data are never
// needed.
type Msg struct {
	Type   byte   // protocol message type: 'Q', 'P', 'B', 'E', 'D', 'C', 'S', 'F', 'H', 'd', 'c', 'f', 'X'
	Name   string // Parse, Bind: the statement; Describe, Close: the object's name
	Portal string // Bind, Execute: the portal
	Text   string // Query, Parse: the query text
	Object byte   // Describe, Close: 'S' (statement) or 'P' (portal)
	// Server, for a Parse under Config.Pooled: the name pgwire sends the
	// statement under on a shared server connection (ServerStatementName).
	Server string
	// ParamTypes, for a Parse under Config.Pooled (the only mode that
	// reads them): the parameter types it names (OIDs; 0 for none).
	ParamTypes []uint32
	// UserTyped, for a Parse: it names a parameter type of a user's (OID
	// FirstUserOID or higher), whose code runs at every Bind.
	UserTyped bool
	// Args, for a Bind under Config.Pooled: its body after the two names
	// (parameter formats, parameters, result formats) when pgwire holds
	// it whole, else nil; valid only during the call.
	Args []byte
}

// Decision is what pgwire does with one client message.
type Decision struct {
	// Wait: send Before (a pre-check, or nothing), flush, wait until
	// Settled reports true (every reply to what was sent has arrived), then
	// ask again with the same message. The client's message is not sent.
	Wait bool
	// Before are messages to send upstream ahead of the client's.
	Before []pgproto3.FrontendMessage
	// Replace, when not nil, is sent instead of the client's message.
	Replace pgproto3.FrontendMessage
	// Drop: the client's message is not sent at all.
	Drop bool
	// After are messages to send upstream after the client's.
	After []pgproto3.FrontendMessage
	// Fail, when not empty, ends the session: the client's message is not
	// sent, and the client gets a protocol-violation error saying Fail.
	// Used where the server's state cannot be known (docs/design.md "Fail
	// closed", rule 6).
	Fail string
	// Server, under Config.Pooled, for a Bind of a statement and a
	// Describe or Close of one ('S'): the Msg.Server of the Parse that
	// defined the statement the server reaches, which pgwire sends in
	// place of the client's name; "" when the name defines nothing (sent
	// as written: no server statement has a client's name).
	Server string
}

// unitState is the gate's prediction, while the client sends a unit (a
// Query, a FunctionCall, or extended-protocol messages up to Sync), of
// whether the transaction the next statement runs in has been checked.
// Within a unit the prediction is exact: the server runs the unit's
// statements in order and skips the rest after the first error.
type unitState struct {
	open    bool
	checked bool
	key     checkKey
	probe   bool // the unit ran something that may set the token unseen
	// aborted: the transaction the next statement runs in is aborted: the
	// server runs nothing but ROLLBACK, COMMIT or ROLLBACK TO (and answers
	// the rest with its own error), so no check is needed before it.
	aborted bool
	// ran: a statement of this unit was sent to run. blockMaybe: what ran
	// may have opened a transaction block: BEGIN, START TRANSACTION, a
	// chained COMMIT or ROLLBACK, code the proxy cannot see, a text or
	// portal it did not analyse, or the other statements of a Query, which
	// run as one implicit block. Extended-protocol messages up to Sync
	// otherwise run in an implicit transaction that is no block.
	ran        bool
	blockMaybe bool
	lexing     bool // the unit may change how the server lexes text
	copyIn     bool // the unit may leave the server in COPY-in mode: nothing may follow it
	// blockFresh: the unit may leave the session in a transaction block
	// (opened by BEGIN, START TRANSACTION or COMMIT AND CHAIN, in this unit
	// or one before: Session.freshBlock) in which no statement has taken a
	// snapshot yet: a probe after the unit would be the block's first query.
	blockFresh bool
	// savepoints: the unit sent a SAVEPOINT, RELEASE or ROLLBACK TO (see
	// Session.savepoints).
	savepoints bool
	// bound: the portals bound in this unit, true until their first
	// Execute. A portal runs its statement at its first Execute only;
	// executed again it sets nothing, so what it would set for the
	// transaction counts at that Execute alone (see Session.rerun). Across
	// units the server may have skipped the Bind (after an error) and kept
	// an older portal of the name (see Session.portalFailed).
	bound names[bool]
	// fenceArgs: for the portals bound in this unit to a set_config of a
	// fencing setting from parameters, under Config.Pooled, which of those
	// parameters the Bind gave a value (not NULL): see Session.fenceArgsSet.
	fenceArgs names[uint64]
	// poolSet: the unit's one statement is a session-level change of the
	// fencing settings, kept in Session.tracked once the server answered
	// the unit without an error (Config.Pooled).
	poolSet *poolSet
}

// Session is the fencing state machine of one client connection. It sees
// every client message before pgwire forwards it ([Session.Client]) and
// every server reply before pgwire relays it ([Session.Server]), and
// answers with values. It does no I/O.
//
// A Session is not safe for concurrent use; pgwire serializes the calls from
// its two directions.
type Session struct {
	cfg     *Config
	nextCfg *Config // Reconfigure's, in force from the next unit on

	// tokenMaybe is set while lock.fencing_token may hold a value on the
	// server: every transaction's first read or write is then checked, and
	// the server evaluates the setting inside the check. It is cleared only
	// by a probe's answer (fencestore.ProbeStatement) sent when nothing had set it
	// since (maybeGen counts the settings).
	tokenMaybe bool
	maybeGen   uint64
	otherGen   uint64 // counts the settings of tokenMaybe that were not for a transaction only
	// maybeTxnOnly: tokenMaybe was set, from a state known to hold no
	// token (or one a probe found when it ran, with nothing else decided
	// after it: otherGen), only by statements whose own text sets the
	// fencing settings for their transaction alone (SET LOCAL,
	// pg_catalog.set_config(…, true): see Statement.setsForTxnOnly). Such a
	// value ends with its transaction, so
	// once every unit sent is answered outside a transaction block the
	// session holds no token again, without a probe (readyForQuery).
	maybeTxnOnly bool

	reg      registry
	memo     textMemo      // the word scans of the last text
	parsing  time.Duration // see ParseTime
	unit     unitState
	slots    slotQueue
	settings settings
	// lexChanges counts the changes of settings the server reported (see
	// unsureLex).
	lexChanges uint32

	lastCheck fencestore.CheckArgs // what the last check decided carried (LastCheck)

	lexPending int // units in flight that may change lexing settings
	// lexTouched: something that may change the lexing settings (a SET of
	// them, code the proxy cannot see, text it cannot read) was sent
	// since the session was last idle with every unit answered: only then
	// may the end of a transaction or a savepoint's rollback revert such a
	// change (see lexChanging).
	lexTouched bool
	// endGen counts the statements decided that may end a transaction or
	// roll back to a savepoint; maybeAtEnd: a probe answered inside a
	// transaction block found no token, and the session was taken to hold
	// none for the rest of the block: the block's end may bring back a
	// value set before it, so the statement that ends it makes the session
	// possibly fenced again, and a probe follows it.
	endGen     uint64
	maybeAtEnd bool
	// checkSent: a check was sent since the session was last idle with
	// every unit answered: the open transaction may hold a resource's
	// mark locked, which PREPARE TRANSACTION would keep locked.
	checkSent bool
	extOpen   bool // extended-protocol messages sent since the last Sync
	probeDue  bool // a probe waits for the next boundary both sides agree on
	skipping  bool // the server is skipping every message up to the client's Sync, after an error
	probeIdle bool // a probe answered inside a transaction block: probe again once it ends
	// freshBlock: the units sent so far may leave the session in a block
	// that has taken no snapshot (unitState.blockFresh); each unit starts
	// from it. probeHeld: a probe is due but held back while freshBlock
	// holds; it goes after the first unit that takes a snapshot, before a
	// client message that waits for a probe (awaitProbe), which takes one
	// right after it, or once the block ends.
	freshBlock bool
	probeHeld  bool
	probesOut  int // probes sent and not yet answered
	// unnamedFailed: a statement of a Query failed in the transaction
	// block, which the server reported failed, and nothing has replaced
	// its unnamed portal since: it may be left, failed, until the block
	// ends (see portalFailed).
	unnamedFailed bool
	// rerun: the statement being decided runs from a portal that may have
	// run before (see unitState.bound): it sets nothing for the
	// transaction the proxy may trust.
	rerun bool
	// execStale: the statement being decided runs from a portal made
	// before the fencing settings last changed (prepared.snapStale); set
	// only around decide.
	execStale bool
	// fenceSets counts the client's statements that set or reset the
	// fencing settings (see registry.staleSnapshots).
	fenceSets uint64
	// byName: the statement being decided runs from a name SQL can
	// redefine (see Session.replaceable); set only around decide.
	byName bool
	// execArgs: which parameters the Bind of the portal whose Execute is
	// being decided gave a value, when execArgsKnown (see fenceArgsSet);
	// set only around decide.
	execArgs      uint64
	execArgsKnown bool
	// readUnsure: the statement being decided was prepared by a Parse the
	// server may have lexed under settings the proxy has not seen
	// (lexUnseen, with a risky text): it is read under the known ones, so
	// it gets no exemption from the check that only a sure reading earns
	// (the hand-over); set only around decide.
	readUnsure bool
	// poolAlone: the statement being decided is alone in its unit, outside
	// a transaction block the server confirmed (Config.Pooled); set only
	// around decide.
	poolAlone bool
	lastReady byte // status of the last ReadyForQuery: 'I', 'T' or 'E'
	txChecked bool // confirmed: the open transaction block has passed a check
	txKey     checkKey

	// Under Config.TransactionTokens: the fencing settings (fenceToken,
	// fenceResource bits) the current transaction set itself, so that a
	// check may read them (see Session.guardBits). trust is the
	// prediction within the unit being sent, txTrust what the server
	// confirmed for the open transaction block, lastTrust the prediction
	// at the end of the last unit sent (a unit begun before it is
	// answered waits, rather than guess whether its block is still open).
	trust, txTrust, lastTrust uint8
	// savepoints and txSavepoints: the savepoints of the open block, each
	// with the trust when it was taken, which ROLLBACK TO brings back (the
	// server restores the settings as they were then): predicted in the
	// unit being sent, and confirmed by the server's last answer.
	savepoints, txSavepoints []savepointTrust

	// COPY … FROM STDIN (see copy.go). copyActive: the server answered
	// CopyInResponse and the client has sent no CopyDone or CopyFail
	// since. copyPending: a unit that may start COPY-in mode ended, and
	// neither its ReadyForQuery nor the client's CopyDone or CopyFail has
	// come (copyGen numbers such units). spareZ: ReadyForQuery messages
	// that may still come for Syncs sent in a COPY that failed (the server
	// answers those it read after the error). skipUnknown: such a COPY
	// failed in an extended sequence, and whether the server still skips
	// to the next Sync is unknown until the client sends one.
	copyActive  bool
	copyPending bool
	copyGen     uint64
	spareZ      int
	skipUnknown bool

	pre precheckState

	// Under Config.Pooled: the session-level fencing settings the server
	// confirmed (see pool.go), and the units sent whose poolSet is not yet
	// answered.
	tracked     Tracked
	startup     Tracked // what RESET and SET … TO DEFAULT go back to
	poolPending int
	// trackedEnc, startupEnc: the client_encoding the tracked (startup)
	// resource's bytes were written in (see trackedResourceUnsure).
	trackedEnc, startupEnc string
}

// NewSession returns the state machine for a connection whose startup
// message carried params. Until the startup probe is answered (see
// [Session.Probe]), the session may hold a token.
func NewSession(cfg *Config, params map[string]string) *Session {
	s := &Session{cfg: cfg, tokenMaybe: true, lastReady: 'I', settings: settings{encoding: "UTF8"}}
	if cfg != nil && cfg.Pooled {
		s.tracked, _, _ = PooledStartup(params) // CheckStartup refused what is invalid
		s.startup = s.tracked
		s.startupEnc = strings.ToUpper(params["client_encoding"])
		if s.startupEnc == "" || s.startupEnc == "UTF-8" {
			s.startupEnc = "UTF8"
		}
		s.trackedEnc = s.startupEnc
	}
	return s
}

// Probe returns the messages of a probe of lock.fencing_token, to send
// after authentication (the server's settings include startup parameters
// in every form, role and database defaults), before the client's first
// message; pgwire relays its replies through Server as usual: all are
// hidden.
func (s *Session) Probe() []pgproto3.FrontendMessage {
	return s.probe()
}

// Settled reports whether every reply to what was sent upstream has
// arrived.
func (s *Session) Settled() bool { return s.slots.empty() }

// maxNameBytes is how much of a statement or portal name the server keys
// on (NAMEDATALEN - 1): longer names that share their first 63 bytes name
// the same object.
const maxNameBytes = 63

func truncName(name string) string {
	if len(name) > maxNameBytes {
		return name[:maxNameBytes]
	}
	return name
}

// Reconfigure puts cfg in force for this session from the next unit the
// client begins (a reloaded config): never inside a unit, whose statements
// are decided under one policy. What the session already confirmed stays:
// a check made under the old table map covers only what its key says, so a
// write to a newly protected table is checked again. cfg must share the
// session's Analyzer or be read-only like it.
func (s *Session) Reconfigure(cfg *Config) { s.nextCfg = cfg }

// Client decides about one client message.
func (s *Session) Client(m Msg) Decision {
	if s.nextCfg != nil && !s.unit.open {
		s.cfg, s.nextCfg = s.nextCfg, nil
	}
	if s.skipping {
		if m.Type != 'S' {
			return Decision{} // discarded by the server, unanswered
		}
		s.skipping = false
	}
	if (s.copyActive || s.skipUnknown) && runsSQL(m.Type) {
		return Decision{Fail: copyFailMsg(s.copyActive)}
	}
	if s.nameUnsafe(m.Name) || s.nameUnsafe(m.Portal) {
		return s.refuseExtended(refNameEncoding)
	}
	m.Name, m.Portal = truncName(m.Name), truncName(m.Portal)
	if s.trustUnknown(m.Type) {
		return Decision{Wait: true}
	}
	if d, ok := s.releaseHeld(&m); ok {
		return d
	}
	pre := s.probeFirst(m.Type)
	d := s.client(&m)
	if pre != nil {
		d.Before = append(pre, d.Before...)
	}
	if m.Type == 'E' && !d.Wait {
		s.unit.ran = true // whatever it runs, analysed or not
	}
	if d.Wait && s.extOpen {
		// The server answers the open sequence's messages only at a Sync
		// or a Flush: ask for them, or the wait would never end.
		d.Before = append(d.Before, &pgproto3.Flush{})
	}
	return d
}

func (s *Session) client(m *Msg) Decision {
	switch m.Type {
	case 'Q':
		return s.query(m.Text)
	case 'P':
		return s.parse(m.Name, m.Text, m.Server, m.ParamTypes, m.UserTyped)
	case 'B':
		return s.bind(m.Portal, m.Name, m.Args)
	case 'E':
		return s.execute(m.Portal)
	case 'D':
		return s.describe(m.Object, m.Name)
	case 'C':
		return s.close(m.Object, m.Name)
	case 'S':
		return s.sync()
	case 'F':
		return s.functionCall()
	case 'c', 'f':
		return s.copyEnd()
	}
	return Decision{} // Flush, copy data, Terminate: no reply of their own
}

// probeFirst returns a probe that is due to send before a client message
// of type typ, when the message begins a unit while the session is idle,
// with every unit answered: a probe postponed because its answer came
// inside a transaction block (probeIdle) would otherwise go after the
// client's next unit, inside the block a BEGIN opens, where its query would
// take the block's snapshot, and make SET TRANSACTION ISOLATION LEVEL fail.
func (s *Session) probeFirst(typ byte) []pgproto3.FrontendMessage {
	if !s.probeDue || s.cfg.Pooled || s.unit.open || s.extOpen || s.slots.unitsInFlight > 0 || s.lastReady != 'I' ||
		s.copyActive || s.copyPending || strings.IndexByte("QPBEDCF", typ) < 0 {
		return nil
	}
	s.probeDue = false
	return s.probe()
}

// trustUnknown reports whether a client message of type typ would begin a
// unit whose fencing settings the gate cannot know yet, under
// Config.TransactionTokens: an earlier unit, not yet answered, set some
// for its transaction, and whether that transaction is still open when
// this unit runs (so that they still hold) is the server's answer.
func (s *Session) trustUnknown(typ byte) bool {
	if s.cfg.Pooled && !s.unit.open && s.poolPending > 0 {
		return strings.IndexByte("QPBEDCF", typ) >= 0 // the tracked settings are the server's answer away
	}
	if !s.cfg.txnScoped() || s.unit.open || s.lastTrust == 0 || s.slots.unitsInFlight == 0 {
		return false
	}
	switch typ {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'F':
		return true
	}
	return false
}

// fencingPossible reports whether a statement may need a check: the session
// may hold a token, or the config has require_token tables.
func (s *Session) fencingPossible() bool {
	return s.tokenMaybe || len(s.cfg.Tables) > 0 || s.tracked.Token != 0
}

// awaitProbe returns, for a refusal that fencing being possible would
// cause, a wait for a probe's answer instead, when one may settle it: the
// session may hold a token only until the probe sent after its last change
// answers (see tokenMaybe), and a session without one refuses nothing of
// the kind. A probe that is due but waits for a boundary goes first, when
// this message starts a unit (fresh: a boundary both sides agree on); a
// unit in flight that may start COPY-in mode is waited for first.
func (s *Session) awaitProbe(fresh bool) (Decision, bool) {
	if !s.tokenMaybe || len(s.cfg.Tables) > 0 || s.copyActive {
		return Decision{}, false
	}
	switch {
	case s.probesOut > 0:
		return Decision{Wait: true}, true
	case !fresh:
	case (s.probeDue || s.probeHeld) && s.copyPending:
		return Decision{Wait: true}, true
	case s.probeDue || s.probeHeld:
		s.probeDue, s.probeHeld = false, false
		return Decision{Wait: true, Before: s.probe()}, true
	}
	return Decision{}, false
}

// setMaybe records that the session may now hold a token.
func (s *Session) setMaybe() { s.setMaybeFor(false) }

// setMaybeFor is setMaybe, told whether the token may have been set for
// the current transaction only (see maybeTxnOnly).
func (s *Session) setMaybeFor(txnOnly bool) {
	if !txnOnly {
		s.otherGen++
	}
	if s.tokenMaybe || s.maybeAtEnd {
		txnOnly = txnOnly && s.maybeTxnOnly
	}
	s.tokenMaybe, s.maybeTxnOnly = true, txnOnly
	s.maybeGen++
}

// unreadUnsafe reports whether a text the proxy cannot read may not pass
// unread: the session may hold a token; or it holds none for now only
// because a probe answered inside the open block (maybeAtEnd), and the text
// may end the block and bring one back; or a check ran in the open
// transaction (checkSent), and the text may be PREPARE TRANSACTION.
func (s *Session) unreadUnsafe() bool {
	return s.fencingPossible() || s.maybeAtEnd || s.checkSent
}

// mayOpenBlock reports whether a text the gate did not analyse may open a
// transaction block: it holds BEGIN, START or CHAIN, in any case (keywords:
// ASCII in every encoding, never escaped).
func mayOpenBlock(text string) bool {
	for _, w := range openBlockWords {
		if containsFold(text, w) {
			return true
		}
	}
	return false
}

// openBlockWords are mayOpenBlock's words.
var openBlockWords = [...]string{"begin", "start", "chain"}

// lexChanging records that the current unit may change the lexing
// settings: texts after it, until its answer, are read under settings the
// proxy cannot know.
func (s *Session) lexChanging() {
	s.unit.lexing = true
	s.lexTouched = true
}

// lexUnseen reports whether the server may read the next text under
// settings the proxy has not seen yet, changed by code whose text does not
// show it (a function, a view's or a trigger's code calling set_config on
// standard_conforming_strings or client_encoding): something sent before
// it, in an open extended sequence or in a unit not yet answered, may have
// run, and its ParameterStatus has not arrived. A simple Query that could
// set the token is then treated as unreadable in a session without fencing
// (it passes, and a probe follows it); where fencing is possible it waits
// for the answers (inside an open extended sequence it is refused). A
// statement prepared so is analysed under the settings the proxy knows and
// taken as possibly setting the token (maySetToken), in every session: a
// Parse holds one statement, so what it runs is checked where fencing is
// possible whatever its reading, and the statement after it is checked
// again. Refusing it instead would refuse every pipelined batch whose data
// holds a non-ASCII letter (the risky texts, lexRisky) once a text before
// it had made fencing possible.
func (s *Session) lexUnseen() bool { return s.extOpen || s.slots.unitsInFlight > 0 }

// maySetToken records that the statement being decided may set the token
// (a SET or RESET of lock.*, or a statement prepared under settings the
// proxy may not know: see lexUnseen): the next statement is checked again.
// In a session (not a transaction pool, where a check never reads the
// server's fencing settings) a probe after the unit asks the server
// whether a token is set, unless the session may hold one already and no
// probe is on its way that this would make moot: else a session that a
// RESET ALL left without a token would be checked for good.
func (s *Session) maySetToken() {
	if !s.cfg.Pooled && (!s.tokenMaybe || s.probeDue || s.probesOut > 0) {
		s.unit.probe = true
	}
	s.setMaybe()
	s.unit.checked = false
}

// beginUnit starts a unit, carrying over the confirmed state of the
// transaction block only when every earlier unit has been answered.
func (s *Session) beginUnit() {
	if s.unit.open {
		return
	}
	s.resetUnit()
	s.unit.open = true
	settled := s.slots.unitsInFlight == 0
	if settled && s.lastReady == 'T' && s.txChecked {
		s.unit.checked, s.unit.key = true, s.txKey
	}
	s.unit.aborted = settled && s.lastReady == 'E'
	s.trust, s.savepoints = 0, nil
	if settled && s.lastReady == 'T' {
		s.trust = s.txTrust
	}
	if settled && s.lastReady != 'I' {
		// Also in an aborted block, where ROLLBACK TO is how it recovers.
		s.savepoints = slices.Clone(s.txSavepoints)
	}
}

// resetUnit clears the unit's state. The maps of bound portals are kept,
// emptied, for the next unit's Binds: a session makes one.
func (s *Session) resetUnit() {
	bound, args := s.unit.bound, s.unit.fenceArgs
	bound.clear()
	args.clear()
	s.unit = unitState{bound: bound, fenceArgs: args, blockFresh: s.freshBlock}
}

// staysFresh reports whether a block that has taken no snapshot still has
// none after a statement of kind k: settings (SET, RESET, SHOW, SET
// TRANSACTION), BEGIN, savepoints, and the utility statements of Other take
// none. Every other kind, or a block's end, counts as taking one.
func staysFresh(k Kind) bool {
	switch k {
	case Setting, Begin, Savepoint, Release, RollbackTo, Other:
		return true
	}
	return false
}

// keepsBlockFresh reports whether text plainly starts with a statement
// that takes no snapshot (SET, RESET, SHOW, BEGIN, START, SAVEPOINT,
// RELEASE) or ends the block (COMMIT, ROLLBACK, END, ABORT), past blanks,
// comments and parentheses: a text the gate did not analyse keeps a block
// without a snapshot so (unitState.blockFresh), and a held probe waits
// past it (releaseHeld). Any other text may take the block's snapshot.
func keepsBlockFresh(text string) bool {
	text = skipBlanksAndComments(text)
	for _, w := range [...]string{"set", "reset", "show", "begin", "start", "savepoint", "release", "commit", "rollback", "end", "abort"} {
		if hasFoldAt(text, 0, w) && isStartWordAt(text, 0, len(w)) {
			return true
		}
	}
	return false
}

// skipBlanksAndComments returns text past its leading blanks, '(' and
// comments (nested, as the server nests them); a comment without its end
// leaves nothing.
func skipBlanksAndComments(text string) string {
	for {
		text = strings.TrimLeft(text, " \t\n\r\f\v(")
		switch {
		case strings.HasPrefix(text, "--"):
			i := strings.IndexAny(text, "\n\r")
			if i < 0 {
				return ""
			}
			text = text[i:]
		case strings.HasPrefix(text, "/*"):
			depth, i := 1, 2
			for depth > 0 && i < len(text) {
				switch {
				case strings.HasPrefix(text[i:], "/*"):
					depth, i = depth+1, i+2
				case strings.HasPrefix(text[i:], "*/"):
					depth, i = depth-1, i+2
				default:
					i++
				}
			}
			if depth > 0 {
				return ""
			}
			text = text[i:]
		default:
			return text
		}
	}
}

// releaseHeld sends a held probe (probeHeld) before a client message that
// begins a unit which may take the block's snapshot, and holds the message
// until its answer: the probe takes the snapshot just before the client's
// statement would, and the statement is decided knowing whether a token is
// set, as it would have been with the probe sent at once.
func (s *Session) releaseHeld(m *Msg) (Decision, bool) {
	if !s.probeHeld || s.unit.open || s.extOpen || s.copyActive || s.copyPending {
		return Decision{}, false
	}
	switch m.Type {
	case 'Q', 'P':
		if keepsBlockFresh(m.Text) {
			return Decision{}, false
		}
	case 'B', 'E', 'F', 'C', 'D':
		// A Close or Describe takes no snapshot, but the probe cannot go
		// later in the unit it begins (its Sync would end the client's
		// sequence): drivers begin a batch with the Close of a statement
		// they dropped (pgjdbc), and a query follows.
	default:
		return Decision{}, false
	}
	s.probeHeld = false
	return Decision{Wait: true, Before: s.probe()}, true
}

// savepointTrust is a savepoint and the trust when it was taken.
type savepointTrust struct {
	name  string
	trust uint8
}

// savepoint applies a SAVEPOINT, RELEASE or ROLLBACK TO of name to the
// predicted trust: a name the proxy does not know (the server refuses it,
// or the proxy lost track) trusts nothing.
func (s *Session) savepoint(kind Kind, name string) {
	s.unit.savepoints = true
	i := len(s.savepoints) - 1
	for i >= 0 && s.savepoints[i].name != name {
		i--
	}
	switch {
	case kind == Savepoint:
		s.savepoints = append(s.savepoints, savepointTrust{name: name, trust: s.trust})
	case i < 0:
		s.trust, s.savepoints = 0, nil
	case kind == Release:
		s.savepoints = s.savepoints[:i]
	case kind == RollbackTo:
		s.trust, s.savepoints = s.savepoints[i].trust, s.savepoints[:i+1]
	}
}

// endUnit closes the unit with sl, the slot whose ReadyForQuery ends it,
// and returns the probe to send after it, if the unit needs one.
func (s *Session) endUnit(sl slot) []pgproto3.FrontendMessage {
	sl.ends = true
	sl.endsChecked, sl.key, sl.lexing = s.unit.checked, s.unit.key, s.unit.lexing
	sl.trust, s.lastTrust = s.trust, s.trust
	if sl.poolSet = s.unit.poolSet; sl.poolSet != nil {
		s.poolPending++
	}
	sl.savepoints, sl.savepointsRan = s.savepoints, s.unit.savepoints
	if sl.lexing {
		s.lexPending++
	}
	s.probeDue = s.probeDue || s.unit.probe
	s.freshBlock = s.unit.blockFresh
	if s.probeHeld && !s.unit.blockFresh {
		s.probeHeld, s.probeDue = false, true
	}
	if s.probeDue && s.unit.blockFresh {
		// Not as the first query of a block: it would take the block's
		// snapshot, and SET TRANSACTION ISOLATION LEVEL would then fail
		// (25001), or a REPEATABLE READ block would see the database as
		// of the probe rather than of the client's first query. The
		// session stays checked until the probe, held back (probeHeld).
		s.probeDue, s.probeHeld = false, true
	}
	copyIn := s.unit.copyIn
	if copyIn {
		s.copyGen++
		s.copyPending = true
		sl.copyGen = s.copyGen
	}
	s.resetUnit()
	s.slots.push(sl)
	s.reg.endUnit()
	if sl.kind == slotSync {
		s.extOpen = false
	}
	if s.probeDue && !s.extOpen && !s.copyActive && !s.copyPending {
		// Only at a Sync, or after a Query or FunctionCall outside an
		// extended sequence: the probe's own Sync must not end a client's
		// sequence early. Nor while the server may be in COPY-in mode
		// (COPY … FROM STDIN): after a unit that may have started it,
		// until its ReadyForQuery or the client's CopyDone or CopyFail
		// (copyPending), or once the server said so (copyActive). The
		// server would read the probe as bad copy data, fail the COPY and
		// answer out of order (docs/design.md "Fail closed", rule 4: inject
		// only where both sides agree). The probe stays due for the next
		// unit's end; until it is answered the session may hold a token
		// and is checked, so a later probe never lets anything through
		// unchecked.
		s.probeDue = false
		return s.probe()
	}
	return nil
}

// mayCopyIn reports whether text may hold a COPY … FROM STDIN: a (true)
// sure answer when a is its analysis, and when a is nil (not analysed, or
// unreadable) true for every text holding the words "copy" and "stdin" in
// any case. Both are keywords: ASCII in every client encoding, never
// escaped nor quoted, so a text without them cannot start COPY-in mode.
// A false true only defers a probe (see endUnit).
func mayCopyIn(text string, a *Analysis) bool {
	if a == nil {
		return containsFold(text, "copy") && containsFold(text, "stdin")
	}
	for i := range a.Statements {
		if a.Statements[i].CopyIn {
			return true
		}
	}
	return false
}

// probe returns a probe of lock.fencing_token as a unit of its own, in the
// extended protocol so that the client's unnamed statement and portal
// survive (a simple Query would drop them). Its replies are hidden, and it
// leaves nothing behind (see injected).
func (s *Session) probe() []pgproto3.FrontendMessage {
	s.setMaybe()
	s.probesOut++
	msgs := s.injected(slot{inj: true, probe: true}, probeName, fencestore.ProbeStatement, nil, true)
	s.slots.push(slot{kind: slotSync, inj: true, probe: true, ends: true, gen: s.maybeGen, otherGen: s.otherGen, endGen: s.endGen})
	return append(msgs, &pgproto3.Sync{})
}

// injected returns the messages that run one statement of the proxy's own
// under name, and pushes their slots (copies of sl with the kind set). The
// statement is prepared anew each time, after closing whatever has its
// name: nothing the client ran before (DISCARD ALL, DEALLOCATE, a DO block
// that prepares statements) can make it run other text. It is closed again
// right after its Bind (the portal keeps the plan), and the portal after
// its Execute (closeP), so that nothing of the proxy's shows in
// pg_prepared_statements or pg_cursors once the statement has run; a
// portal whose Execute failed goes with its aborted transaction.
func (s *Session) injected(sl slot, name, sql string, params [][]byte, closeP bool) []pgproto3.FrontendMessage {
	for _, k := range []slotKind{slotClose, slotParse, slotBind, slotClose, slotExecute} {
		sl.kind = k
		s.slots.push(sl)
	}
	m := &injectedMsgs{
		closeS:  pgproto3.Close{ObjectType: 'S', Name: name},
		parse:   pgproto3.Parse{Name: name, Query: sql},
		bind:    pgproto3.Bind{DestinationPortal: name, PreparedStatement: name, Parameters: params},
		execute: pgproto3.Execute{Portal: name},
		closeP:  pgproto3.Close{ObjectType: 'P', Name: name},
	}
	m.list = [...]pgproto3.FrontendMessage{&m.closeS, &m.parse, &m.bind, &m.closeS, &m.execute, &m.closeP}
	if closeP {
		sl.kind = slotClose
		s.slots.push(sl)
		return m.list[:6:6]
	}
	return m.list[:5:5]
}

// injectedMsgs holds the messages of an injected statement in one
// allocation (an injected check goes with every fenced statement). The
// two Closes of the statement are one message sent twice: nothing
// changes a message once made.
type injectedMsgs struct {
	closeS, closeP pgproto3.Close
	parse          pgproto3.Parse
	bind           pgproto3.Bind
	execute        pgproto3.Execute
	list           [6]pgproto3.FrontendMessage
}

// reserved reports whether a client-chosen name is one of the proxy's.
func reserved(name string) bool { return strings.HasPrefix(name, reservedPrefix) }

// LastCheck returns the arguments of the last fence check the session
// decided to put in front of a statement: the comment's token and resource
// (empty when the setting supplies them, which the server evaluates), the
// table's resource and the default. Zero before the first check. For an
// operator's view of the session; fencing never depends on it.
func (s *Session) LastCheck() fencestore.CheckArgs { return s.lastCheck }

// TokenMaybe reports whether lock.fencing_token may hold a value on the
// server; once the startup probe is answered, nothing sent since, whether
// the session's defaults (startup parameters, role and database settings)
// hold a token.
func (s *Session) TokenMaybe() bool { return s.tokenMaybe }

// ParseTime returns the time the session's texts took to parse so far:
// the texts the Analyzer had no analysis of. Most texts are found in its
// cache or need none; a parse is the gate's one step that can take
// milliseconds, and pgwire's event loop reads this to let a session that
// parses long go to a relay of its own.
func (s *Session) ParseTime() time.Duration { return s.parsing }
