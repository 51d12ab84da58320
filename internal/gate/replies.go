package gate

import (
	"github.com/fenceproxy/fenceproxy/internal/hwm"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Verdict says what to do with a reply from the server.
type Verdict uint8

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
