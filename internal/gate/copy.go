package gate

// COPY … FROM STDIN, and the Syncs the server ignores in COPY-in mode.
//
// Once the server has answered a Query or an Execute with CopyInResponse
// it is in COPY-in mode, and it reads every later client message as part
// of the copy until the client's CopyDone or CopyFail (copyfromparse.c
// CopyGetData): CopyData is data, Sync and Flush are ignored ("for the
// convenience of client libraries such as libpq", whose PQexecParams sends
// Parse, Bind, Describe, Execute, Sync before it knows the statement is a
// COPY, and CopyDone, Sync after the data), and any other message is a
// protocol violation: an ERROR, then FATAL "protocol synchronization was
// lost". Outside COPY-in mode the server ignores CopyData, CopyDone and
// CopyFail.
//
// The gate keeps the order of the client's stream in its slot queue: the
// client's CopyDone or CopyFail is a slotCopyEnd there. When the head slot
// (the Query or Execute answered) gets CopyInResponse, the messages queued
// after it up to the first slotCopyEnd, and those the client sends until
// its CopyDone or CopyFail, are the copy's (its region). How the copy ends
// says what happened to them:
//
//   - CommandComplete: the server read the whole region as copy: its Syncs
//     get no ReadyForQuery (they become slotDead). Exact.
//   - ErrorResponse, no Sync in the region: the server left COPY-in mode at
//     the error; in an extended sequence it skips to the next Sync, which
//     it answers, as after any error. Exact.
//   - ErrorResponse, k Syncs in the region: the server may have read any
//     number of them (0 to k) before the error — a BEFORE STATEMENT trigger
//     fails before it reads one, a bad row after it read those before the
//     row, a cancel anywhere — and answers each one it reads after the
//     error. Modeled: up to k bare ReadyForQuery may come (spareZ) before
//     the replies to any later message. All of them, and those of the
//     client's next Syncs, are bare ReadyForQuery with the same status
//     (nothing runs in between), so which Sync each answers does not
//     matter: the gate forwards them, counting, until the first other
//     reply, after which no spare can come. What is not modeled, and ends
//     the session with 08P01 instead: a message other than Sync, Flush or
//     copy data in the region (the server ends the session too); in an
//     extended sequence, a message other than Sync between the copy's end
//     and the next Sync (the server runs it if it had read a Sync after
//     the error, and skips it if not: the gate cannot know which). In a
//     simple Query the server skips nothing after the error: it answers
//     the Query's ReadyForQuery, then the spares, then the rest, in order.
//
// A COPY in a simple Query with no Sync in its region works as before.

// runsSQL reports whether a client message of type typ makes the server do
// more than copy data, end a copy, sync, flush or terminate.
func runsSQL(typ byte) bool {
	switch typ {
	case 'Q', 'P', 'B', 'E', 'D', 'C', 'F':
		return true
	}
	return false
}

const (
	msgInCopy      = "fenceproxy: a message other than CopyData, CopyDone, CopyFail, Flush or Sync was sent during COPY FROM STDIN; the server would end the session"
	msgCopySkipped = "fenceproxy: after a COPY FROM STDIN failed with a Sync sent during it, a message other than Sync followed before the next Sync: whether the server runs or skips it cannot be known; send Sync after CopyDone or CopyFail"
)

func copyFailMsg(active bool) string {
	if active {
		return msgInCopy
	}
	return msgCopySkipped
}

// copyEnd takes the client's CopyDone or CopyFail. It marks its place in
// the queue, which delimits the region of a COPY that may be running;
// with nothing in flight, no COPY is, and the server ignores it.
func (s *Session) copyEnd() Decision {
	s.copyActive, s.copyPending = false, false
	if !s.slots.empty() {
		s.slots.push(slot{kind: slotCopyEnd})
	}
	return Decision{}
}

// copyStarted takes a CopyInResponse to the head slot h.
func (s *Session) copyStarted(h *slot) {
	h.copying = true
	s.copyActive = s.slots.findCopyEnd() < 0
}

// findCopyEnd returns the index in buf of the first slotCopyEnd after the
// head, or -1.
func (q *slotQueue) findCopyEnd() int {
	for i := q.head + 1; i < len(q.buf); i++ {
		if q.buf[i].kind == slotCopyEnd {
			return i
		}
	}
	return -1
}

// copyRegion ends the COPY of head slot h: it turns the Syncs of its
// region and its slotCopyEnd into slotDead and returns how many Syncs
// there were. ok is false when the region holds another message or, when
// complete, has no end: the server's state is not the gate's.
func (s *Session) copyRegion(h *slot, complete bool) (syncs int, ok bool) {
	h.copying = false
	s.copyActive = false
	q := &s.slots
	end := q.findCopyEnd()
	if end < 0 {
		if complete {
			return 0, false // COPY FROM STDIN completes only at CopyDone
		}
		end = len(q.buf)
	}
	for i := q.head + 1; i < end; i++ {
		switch q.buf[i].kind {
		case slotDead:
		case slotSync:
			syncs++
		default:
			return 0, false
		}
	}
	for i := q.head + 1; i < end; i++ {
		if g := q.buf[i].copyGen; g != 0 && g == s.copyGen {
			// The last unit that may have started COPY-in mode did, and
			// the server has left it: the client's next message is read
			// as a message, even without a CopyDone or CopyFail.
			s.copyPending = false
		}
		q.buf[i].kind = slotDead
	}
	if end < len(q.buf) {
		q.buf[end].kind = slotDead
	}
	return syncs, true
}

// copyFailed takes an ErrorResponse that ended the COPY of head slot h.
// ok reports whether the session can go on (see the top of this file);
// spares, whether Syncs of the region may be answered: then an extended
// sequence's skip to Sync is settled here (nothing behind the region is
// skipped for sure) and the caller pops only h.
func (s *Session) copyFailed(h *slot) (ok, spares bool) {
	syncs, ok := s.copyRegion(h, false)
	if !ok || syncs == 0 {
		return ok, false
	}
	s.spareZ += syncs
	if h.kind == slotQuery {
		return true, true
	}
	// In an extended sequence the server skipped to a Sync of the region
	// (then it runs what follows) or still skips (to the next Sync).
	q := &s.slots
	for i := q.head + 1; i < len(q.buf); i++ {
		switch q.buf[i].kind {
		case slotDead:
			continue
		case slotSync:
			return true, true
		}
		return false, true
	}
	s.skipUnknown = true // until the client's next Sync
	return true, true
}

// spare reports whether a ReadyForQuery answers a Sync of a failed COPY's
// region (see the top of this file) rather than the head slot h.
func (s *Session) spare(h *slot) bool {
	if s.spareZ == 0 {
		return false
	}
	switch {
	case h == nil:
	case h.kind == slotSync:
		return false
	case (h.kind == slotQuery || h.kind == slotFunctionCall) && h.replied:
		return false
	}
	return true
}

// spareReady takes a spare ReadyForQuery: the client's, with the status of
// the server's transaction.
func (s *Session) spareReady(status byte) Verdict {
	s.spareZ--
	s.lastReady = status
	s.txChecked = false
	if status == 'I' {
		s.reg.transactionEnded()
		if s.probeIdle || s.probeHeld {
			s.probeIdle, s.probeHeld, s.probeDue = false, false, true
		}
	}
	return Verdict{}
}

// popSlot pops the head slot, and the slots behind it that get no reply.
func (s *Session) popSlot() *slot {
	sl := s.slots.pop()
	s.dropDead()
	return sl
}

// dropDead pops the slots at the head that get no reply: Syncs the server
// consumed in COPY-in mode, and copy ends.
func (s *Session) dropDead() {
	for !s.slots.empty() {
		k := s.slots.front().kind
		if k != slotDead && k != slotCopyEnd {
			return
		}
		if sl := s.slots.pop(); sl.ends && sl.lexing {
			s.lexPending--
		}
	}
}
