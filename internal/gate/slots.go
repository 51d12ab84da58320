package gate

// slotKind is the kind of client message whose replies a slot awaits.
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
)

// slot is one message sent upstream whose replies have not all arrived.
// The server answers messages in order, so the queue's head is what the next
// reply belongs to.
type slot struct {
	kind slotKind

	inj   bool // an extended-protocol message the gate injected
	check bool // part of an injected check (its errors are mapped by hwm)
	parse bool // the injected Parse of the check statement

	// For slotQuery: for each statement of the sent text, whether the gate
	// injected it and what it is, and the index of the statement the next
	// reply belongs to.
	injected []injKind
	stmt     int

	// For the slot ending a unit (slotQuery, slotSync, slotFunctionCall):
	// the gate's prediction at the unit's end.
	ends        bool
	endsChecked bool
	key         checkKey

	// For a pre-check Query (see Session.Precheck): whether it failed.
	precheck bool
	failed   bool
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
// errors hwm maps.
func (s *slot) isCheck() bool {
	if s.kind == slotQuery {
		return s.stmt < len(s.injected) && s.injected[s.stmt] == injCheck
	}
	return s.check
}

// slotQueue is a FIFO of slots that reuses its storage.
type slotQueue struct {
	buf           []slot
	head          int
	unitsInFlight int // ending slots in the queue
}

func (q *slotQueue) push(s slot) {
	if q.head > 0 && q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	q.buf = append(q.buf, s)
}

func (q *slotQueue) front() *slot {
	if q.head == len(q.buf) {
		return nil
	}
	return &q.buf[q.head]
}

func (q *slotQueue) last() *slot { return &q.buf[len(q.buf)-1] }

func (q *slotQueue) pop() {
	if q.head < len(q.buf) {
		if q.buf[q.head].ends {
			q.unitsInFlight--
		}
		q.buf[q.head] = slot{}
		q.head++
	}
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// popUnit pops slots up to and including the next unit end and returns that
// slot; ok is false when there was none (a reply the gate did not expect).
func (q *slotQueue) popUnit() (s slot, ok bool) {
	for q.head < len(q.buf) {
		s = q.buf[q.head]
		q.pop()
		if s.ends {
			return s, true
		}
	}
	return slot{}, false
}

// dropUntilUnitEnd pops the slots before the next unit end: after an error
// the server skips those messages without a reply.
func (q *slotQueue) dropUntilUnitEnd() {
	for q.head < len(q.buf) && !q.buf[q.head].ends {
		q.pop()
	}
}
