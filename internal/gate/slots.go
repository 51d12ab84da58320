package gate

// slotKind is the kind of message sent upstream whose replies a slot awaits.
type slotKind uint8

const (
	slotQuery          slotKind = iota // replies up to ReadyForQuery
	slotParse                          // ParseComplete
	slotBind                           // BindComplete
	slotExecute                        // rows, then CommandComplete, EmptyQueryResponse or PortalSuspended
	slotDescribeStmt                   // ParameterDescription, then RowDescription or NoData
	slotDescribePortal                 // RowDescription or NoData
	slotClose                          // CloseComplete
	slotSync                           // ReadyForQuery
	slotFunctionCall                   // FunctionCallResponse, then ReadyForQuery

	// slotCopyEnd marks where the client's CopyDone or CopyFail went
	// upstream: it gets no reply, and delimits the messages a COPY-in
	// mode consumes (see Session.copyStarted).
	slotCopyEnd
	// slotDead is a Sync the server consumed in COPY-in mode, or a used
	// slotCopyEnd: no reply will come; it is dropped on reaching the head.
	slotDead
)

// slot is one message sent upstream whose replies have not all arrived.
// The server answers messages in order, so the queue's head is what the next
// reply belongs to (PostgreSQL protocol, "Message Flow").
type slot struct {
	kind slotKind

	inj   bool // an extended-protocol message the gate injected
	check bool // part of an injected check (its errors are mapped by the fence store package)
	probe bool // part of an injected probe of lock.fencing_token

	// For slotQuery: for each statement of the sent text, whether the gate
	// injected it, and the registry changes it makes once it completes; and
	// the index of the statement the next reply belongs to.
	injected []injKind
	effects  [][]regOp
	stmt     int

	// For Parse, Bind, Close and Execute: the registry changes the message
	// makes once the server confirms it: op when hasOp (a Parse's, Bind's or
	// Close's one change, kept without an allocation), then ops.
	op    regOp
	hasOp bool
	ops   []regOp

	// For the slot ending a unit (slotQuery, slotSync, slotFunctionCall):
	// the gate's prediction at the unit's end, and what the unit did.
	ends        bool
	endsChecked bool
	key         checkKey
	trust       uint8 // the fencing settings the unit's transaction set (Session.trust)
	// savepoints: Session.savepoints at the unit's end; savepointsRan: the
	// unit sent a savepoint statement (after an error the server skipped
	// some of it, and which is not known).
	savepoints    []savepointTrust
	savepointsRan bool
	lexing        bool     // the unit may change standard_conforming_strings or client_encoding
	gen           uint64   // probe: Session.maybeGen when the probe was sent
	otherGen      uint64   // probe: Session.otherGen when the probe was sent
	endGen        uint64   // probe: Session.endGen when the probe was sent
	poolSet       *poolSet // the unit's change of Session.tracked
	poolFailed    bool     // an error answered the unit: poolSet is not kept

	// For a Query: whether it failed (a pre-check's failure refuses the
	// client's Query, see Session.precheck); sentAborted: it was sent
	// into a block the server had reported failed; portalLeft: its error
	// may leave the unnamed portal failed (see Session.unnamedFailed).
	precheck    bool
	failed      bool
	sentAborted bool
	portalLeft  bool

	replied bool   // a reply to this message has arrived
	copying bool   // Query, Execute: answered CopyInResponse, the COPY not ended yet
	copyGen uint64 // ending slot of a unit that may start COPY-in: Session.copyGen then
}

// injKind says whether a statement of a Query was the client's or injected.
type injKind uint8

const (
	injNone  injKind = iota // the client's own statement
	injCheck                // an injected fence.check call
	injRaise                // an injected refusal
)

func (s *slot) isInjected() bool {
	if s.kind == slotQuery {
		return s.stmt < len(s.injected) && s.injected[s.stmt] != injNone
	}
	return s.inj
}

// isCheck reports whether the reply belongs to an injected check, whose
// errors the fence store package maps.
func (s *slot) isCheck() bool {
	if s.kind == slotQuery {
		return s.stmt < len(s.injected) && s.injected[s.stmt] == injCheck
	}
	return s.check
}

// accepts reports whether a reply of type typ (other than ErrorResponse,
// NoticeResponse, ParameterStatus and NotificationResponse, which any slot
// accepts) can answer a message of this kind, and whether it is the last
// reply the message gets.
func (k slotKind) accepts(typ byte) (ok, last bool) {
	switch k {
	case slotQuery:
		switch typ {
		case 'T', 'D', 'C', 'I', 'G', 'H', 'W', 'd', 'c':
			return true, false
		case 'Z':
			return true, true
		}
	case slotParse:
		return typ == '1', true
	case slotBind:
		return typ == '2', true
	case slotExecute:
		switch typ {
		case 'D', 'G', 'H', 'W', 'd', 'c':
			return true, false
		case 'C', 'I', 's':
			return true, true
		}
	case slotDescribeStmt:
		switch typ {
		case 't':
			return true, false
		case 'T', 'n':
			return true, true
		}
	case slotDescribePortal:
		return typ == 'T' || typ == 'n', true
	case slotClose:
		return typ == '3', true
	case slotSync:
		return typ == 'Z', true
	case slotFunctionCall:
		switch typ {
		case 'V':
			return true, false
		case 'Z':
			return true, true
		}
	}
	return false, false
}

// keptSlots bounds the popped slots a slotQueue keeps uncleared: their
// references (statements, slices) outlive them until later pushes
// overwrite them.
const keptSlots = 16

// slotQueue is a FIFO of slots that reuses its storage: a push into an
// empty queue starts again at the front.
type slotQueue struct {
	buf           []slot
	head          int
	unitsInFlight int // ending slots in the queue
}

func (q *slotQueue) push(s slot) *slot {
	if q.head > 0 && q.head == len(q.buf) {
		if len(q.buf) > keptSlots {
			clear(q.buf) // a deep pipeline's references
		}
		q.buf, q.head = q.buf[:0], 0
	}
	q.buf = append(q.buf, s)
	if s.ends {
		q.unitsInFlight++
	}
	return &q.buf[len(q.buf)-1]
}

// firstEnd returns the first slot in the queue that ends a unit, or nil.
func (q *slotQueue) firstEnd() *slot {
	for i := q.head; i < len(q.buf); i++ {
		if q.buf[i].ends {
			return &q.buf[i]
		}
	}
	return nil
}

func (q *slotQueue) empty() bool { return q.head == len(q.buf) }

func (q *slotQueue) front() *slot {
	if q.empty() {
		return nil
	}
	return &q.buf[q.head]
}

// pop removes the slot at the head and returns it, in place: it stays
// valid until the next push.
func (q *slotQueue) pop() *slot {
	s := &q.buf[q.head]
	if s.ends {
		q.unitsInFlight--
	}
	q.head++
	return s
}
