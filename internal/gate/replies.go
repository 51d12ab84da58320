package gate

import (
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Reply is a server message as gate needs to see it. pgwire decodes
// ErrorResponse, ReadyForQuery and ParameterStatus; of the others gate
// needs only the type.
type Reply struct {
	Type   byte
	Error  *pgproto3.ErrorResponse // 'E'
	Status byte                    // 'Z': 'I', 'T' or 'E'
	Param  string                  // 'S': name
	Value  string                  // 'S': value
}

// Act is what pgwire does with a server reply.
type Act uint8

const (
	// Forward sends the reply to the client as it came.
	Forward Act = iota
	// Hide drops the reply: it answers a message the gate injected.
	Hide
	// Replace sends Verdict.Error instead of the reply.
	Replace
	// Fail ends the session: the reply cannot be placed (docs/design.md "Fail
	// closed", rule 6). Verdict.Reason says why, for the log; the client
	// gets a protocol-violation error.
	Fail
)

// Verdict is gate's answer about one server reply.
type Verdict struct {
	Act    Act
	Error  *pgproto3.ErrorResponse // Replace: what the client sees instead
	Reason string                  // Fail: why
	// Check: the reply answers an injected fence check (its
	// CommandComplete, or its error). pgwire times the check by it; the
	// reply itself is hidden or, for an error, replaced.
	Check bool
}

// Server takes one server reply and says what the client sees of it.
// Replies are matched to the messages sent by the protocol's own rules
// (PostgreSQL protocol, "Message Flow" and "Extended Query"): each message
// sent has a slot, answered in order; after an error in an extended-protocol
// message the server skips every message up to the next Sync (Query and
// FunctionCall messages included); a Query's error skips the rest of its
// text. A reply that fits no slot fails the session rather than shift every
// later answer by one.
func (s *Session) Server(r Reply) Verdict {
	switch r.Type {
	case 'S':
		before := s.settings
		s.settings.param(r.Param, r.Value)
		if s.settings != before {
			s.lexChanges++
		}
		return Verdict{}
	case 'N', 'A': // notices, notifications: any time
		return Verdict{}
	}
	h := s.slots.front()
	if r.Type != 'Z' {
		s.spareZ = 0 // spares come before any other reply (see copy.go)
	} else if s.spare(h) {
		return s.spareReady(r.Status)
	}
	if r.Type == 'E' {
		return s.serverError(r.Error)
	}
	if h == nil {
		return fail("%q with nothing awaiting a reply", r.Type)
	}
	ok, last := h.kind.accepts(r.Type)
	if !ok {
		return fail("%q in reply to message kind %d", r.Type, h.kind)
	}
	h.replied = true
	v := Verdict{Check: r.Type == 'C' && h.isCheck()}
	if h.isInjected() || h.probe {
		v.Act = Hide
	}
	switch {
	case r.Type == 'G' && !h.copying:
		s.copyStarted(h)
	case r.Type == 'C' && h.copying:
		if _, ok := s.copyRegion(h, true); !ok {
			return fail("COPY completed with messages other than Sync or Flush in it, or before the client's CopyDone")
		}
	}
	switch {
	case h.kind == slotQuery && r.Type == 'C':
		s.applyEffects(h, h.stmt)
		h.stmt++
	case h.kind == slotQuery && r.Type == 'I':
		h.stmt = len(h.injected)
	case h.probe && r.Type == 'D':
		s.setMaybe() // the probe found a token
	}
	if !last {
		return v
	}
	if r.Type == 'Z' {
		return s.readyForQuery(r.Status, v)
	}
	sl := s.popSlot()
	s.settleOps(sl, true)
	if sl.kind == slotBind && sl.op.key == (regKey{portal: true}) {
		s.unnamedFailed = false // the new unnamed portal replaced the failed one
	}
	return v
}

// settleOps records the server's answer to the registry changes of a
// Parse, Bind, Close or Execute (slot.op, slot.ops): applied, or skipped.
func (s *Session) settleOps(sl *slot, applied bool) {
	if sl.hasOp {
		s.reg.settle(sl.op, applied)
	}
	for _, op := range sl.ops {
		s.reg.settle(op, applied)
	}
}

func fail(format string, args ...any) Verdict {
	return Verdict{Act: Fail, Reason: fmt.Sprintf(format, args...)}
}

// applyEffects confirms the registry changes of statement i of a Query.
func (s *Session) applyEffects(h *slot, i int) {
	if i < len(h.effects) {
		for _, op := range h.effects[i] {
			s.reg.settle(op, true)
		}
		h.effects[i] = nil
	}
}

// serverError takes an ErrorResponse. The head slot, and what the server
// skips after it, are settled; an error that answers an injected statement
// is cleaned for the client (internal context removed, the check's errors
// mapped by fencestore.ClientError) and replaces the original.
func (s *Session) serverError(e *pgproto3.ErrorResponse) Verdict {
	h := s.slots.front()
	if e.Severity == "FATAL" || e.Severity == "PANIC" {
		return Verdict{} // the server is closing the connection
	}
	if h == nil {
		// Unsolicited (statement_timeout between messages): inside an
		// extended sequence the server now skips to the client's Sync, and
		// the open unit's implicit transaction is aborted.
		s.skipping = s.extOpen
		s.poolUnitFailed()
		return Verdict{}
	}
	injected, check, probe := h.isInjected(), h.isCheck(), h.probe
	if probe {
		s.setMaybe() // could not ask: assume a token
	}
	h.replied = true
	spares := false
	if h.copying {
		var ok bool
		if ok, spares = s.copyFailed(h); !ok {
			return fail("COPY failed with messages other than Sync or Flush in it, or followed by a message the server may run or skip")
		}
	}
	switch {
	case spares && h.kind != slotQuery:
		// The COPY's Execute: what follows is settled by copyFailed.
		sl := s.popSlot()
		s.settleOps(sl, false)
	case h.kind == slotQuery:
		// The first statement of a Query sent into a failed block is
		// refused (25P02) before it gets a portal; any other error may
		// come from a statement that ran (code can raise 25P02 too).
		h.failed = true
		h.portalLeft = !(h.sentAborted && h.stmt == 0 && e.Code == "25P02")
		for i := h.stmt; i < len(h.effects); i++ {
			for _, op := range h.effects[i] {
				s.reg.settle(op, false)
			}
		}
		h.effects, h.stmt = nil, len(h.injected) // the rest of the text is skipped
	case h.kind == slotFunctionCall:
		// ReadyForQuery follows.
	default:
		// The server skips every message up to the next Sync.
		for !s.slots.empty() && s.slots.front().kind != slotSync {
			sl := s.slots.pop()
			s.settleOps(sl, false)
			for _, ops := range sl.effects {
				for _, op := range ops {
					s.reg.settle(op, false)
				}
			}
			if sl.ends && sl.lexing {
				s.lexPending--
			}
			if sl.copyGen != 0 && sl.copyGen == s.copyGen {
				// The unit that may have started COPY-in mode was
				// skipped: it started nothing.
				s.copyPending = false
			}
		}
		// No Sync sent yet (a pipeline ended by Flush): the client's
		// messages up to its Sync are skipped too.
		s.skipping = s.slots.empty() && s.extOpen
	}
	s.poolUnitFailed()
	if probe {
		return Verdict{Act: Hide}
	}
	if !injected {
		return Verdict{}
	}
	c := *e
	if check {
		if code, msg, rewrite := fencestore.ClientError(c.Code, c.Message); rewrite {
			c.Code, c.Message = code, msg
		}
		if fencestore.IsUnownedSetting(c.Code, c.Message) {
			r := refusalSessionRead
			c.Code, c.Message, c.Detail, c.Hint = r.code, r.message, r.detail, r.hint
		}
	}
	c.Where, c.InternalQuery, c.InternalPosition, c.Position = "", "", 0, 0
	c.SchemaName, c.TableName, c.ColumnName, c.DataTypeName, c.ConstraintName = "", "", "", "", ""
	c.File, c.Line, c.Routine = "", 0, ""
	return Verdict{Act: Replace, Error: &c, Check: check}
}

// readyForQuery ends the unit at the head of the queue with the server's
// transaction status.
func (s *Session) readyForQuery(status byte, v Verdict) Verdict {
	u := s.popSlot()
	if u.copyGen != 0 && u.copyGen == s.copyGen {
		s.copyPending = false // the unit that may have started COPY-in mode is over
	}
	s.settleOps(u, true) // a Query drops the unnamed statement and portal even when it fails
	for _, ops := range u.effects {
		for _, op := range ops {
			s.reg.settle(op, false) // statements that never completed
		}
	}
	if u.lexing {
		s.lexPending--
	}
	if u.poolSet != nil {
		s.poolPending--
		if !u.poolFailed {
			s.applyPoolSet(u.poolSet)
		}
	}
	s.lastReady = status
	if status == 'I' && s.slots.unitsInFlight == 0 {
		s.freshBlock = false // out of every block, with nothing sent after
	}
	switch {
	case status != 'E':
		s.unnamedFailed = false // the block ended or recovered: its failed portals are gone
	case u.kind == slotQuery && u.portalLeft:
		s.unnamedFailed = true
	}
	if status == 'I' {
		s.reg.transactionEnded() // portals do not outlive their transaction
		if s.slots.unitsInFlight == 0 && !s.extOpen {
			s.lexTouched, s.checkSent = false, false // nothing sent is unanswered, no transaction open
			if s.maybeTxnOnly {
				// What may have set a token set it for a transaction
				// that has ended: the next transaction's first read or
				// write needs no check, as before it.
				s.tokenMaybe, s.maybeTxnOnly = false, false
			}
		}
	}
	switch {
	case u.precheck:
		if u.failed {
			s.pre = preRefused
			return Verdict{} // the client sees the refusal's ErrorResponse and this
		}
		s.pre = preProceed
		return Verdict{Act: Hide} // the client's own Query follows and gets its own
	case u.probe:
		s.probesOut--
		switch {
		case status == 'T' && u.gen == s.maybeGen && u.endGen == s.endGen:
			// Inside a transaction block, with nothing sent since the probe
			// that may set a token or end the block: the session holds none
			// for now. The block's end, or a rollback to a savepoint, may
			// bring back a value set before (a SET LOCAL undone): the
			// statement that does it makes it possibly fenced again
			// (maybeAtEnd), and is probed.
			s.tokenMaybe, s.maybeAtEnd = false, true
		case status != 'I':
			// Something that may end the block was sent since the probe, or
			// the block failed: probe again once the block has ended.
			s.probeIdle = true
		case u.gen == s.maybeGen:
			s.tokenMaybe = false // nothing set it since the probe was sent
			s.maybeAtEnd = false
		case u.otherGen == s.otherGen && !s.maybeAtEnd:
			// Only statements that set a token for their own transaction
			// were decided since the probe was sent (the first ones of a
			// session often go before its answer): once every unit is
			// answered outside a block, the session holds none.
			s.maybeTxnOnly = true
		}
		return Verdict{Act: Hide}
	}
	if status == 'I' && (s.probeIdle || s.probeHeld) {
		s.probeIdle, s.probeHeld, s.probeDue = false, false, true
	}
	s.txChecked = status == 'T' && u.endsChecked
	s.txKey = u.key
	s.txTrust, s.txSavepoints = 0, nil
	switch {
	case status == 'T':
		s.txTrust, s.txSavepoints = u.trust, u.savepoints
	case status == 'E' && !u.savepointsRan:
		// The block failed in a unit that changed no savepoint: those
		// taken before stand as they were.
		s.txSavepoints = u.savepoints
	}
	return v
}
