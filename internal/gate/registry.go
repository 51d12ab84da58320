package gate

// prepared is a prepared statement or a portal as the gate knows it: its
// text (analysed when it is executed), or the analysis of a statement
// prepared with SQL PREPARE.
type prepared struct {
	text string     // protocol Parse: the statement's text
	st   *Statement // SQL PREPARE: the prepared statement's analysis

	// unknown: bound to a statement the proxy never saw, while nothing in
	// the session was fenced.
	unknown bool
	// opaque: what it runs is not known to the proxy: code the proxy could
	// not see (DO, CALL, EXECUTE, a FunctionCall) ran since it was
	// confirmed, and may have replaced it under the same name.
	opaque bool

	// Protocol Parse: the lexing settings the server read text under, and
	// whether they may have been changing then (a change in flight, or
	// earlier in the same unit).
	lex       settings
	lexUnsure bool
	// lexUnseen: something ran before it whose effect on the settings the
	// proxy had not yet seen (see Session.lexUnseen).
	lexUnseen bool

	// hold: a cursor declared WITH HOLD, which outlives its transaction.
	hold bool

	// server: under Config.Pooled, the name pgwire gave the statement on
	// the server (Msg.Server of its Parse).
	server string

	// named: prepared by a Parse with a name, which SQL can redefine (a
	// function's EXECUTE 'DEALLOCATE s' and 'PREPARE s AS …'); the
	// unnamed statement it cannot.
	named bool

	// matters caches mayMatter(text): 0 not yet known, 1 false, 2 true.
	// The text of a prepared statement never changes.
	matters uint8
}

// mayMatter returns mayMatter(p.text), computed once per prepared
// statement rather than at every Execute.
func (p *prepared) mayMatter() bool {
	if p.matters == 0 {
		p.matters = 1
		if mayMatter(p.text) {
			p.matters = 2
		}
	}
	return p.matters == 2
}

// regKey names a prepared statement (portal false) or a portal. SQL
// PREPARE and the protocol's Parse share one namespace on the server, and so
// do SQL cursors and protocol portals.
type regKey struct {
	portal bool
	name   string
}

// regOp is a change to the registry that a message or statement makes once
// the server confirms it: define (val non-nil), remove (val nil), or remove
// every statement (allStmts) or every portal (allPortals).
type regOp struct {
	key        regKey
	val        *prepared
	allStmts   bool
	allPortals bool
}

// registry holds the prepared statements and portals the server confirmed
// (docs/design.md "Fail closed", rule 2): a Parse, Bind, Close, PREPARE or
// DEALLOCATE changes it only when its completion reply arrives; one the
// server refused or skipped changes nothing. While a change is in flight
// the name's state is unknown, except to the unit that made the change:
// that unit's own later messages run only if the change succeeded.
type registry struct {
	confirmed map[regKey]*prepared
	inflight  map[regKey]int // changes sent and not yet answered or skipped
	allFlight int            // "remove all" changes in flight

	unit    map[regKey]*prepared // changes made by the current unit
	unitAll [2]bool              // the current unit removed all statements / portals
}

func newRegistry() registry {
	return registry{confirmed: map[regKey]*prepared{}, inflight: map[regKey]int{}, unit: map[regKey]*prepared{}}
}

// lookup returns what k names when the server reaches the current message:
// found is false when it names nothing, and wait is true when that depends
// on a reply not yet received.
func (r *registry) lookup(k regKey) (p *prepared, found, wait bool) {
	if p, ok := r.unit[k]; ok {
		return p, p != nil, false
	}
	if r.unitAll[b2i(k.portal)] {
		return nil, false, false
	}
	if r.inflight[k] > 0 || r.allFlight > 0 {
		return nil, false, true
	}
	p = r.confirmed[k]
	return p, p != nil, false
}

// send records that op was sent within the current unit.
func (r *registry) send(op regOp) {
	switch {
	case op.allStmts || op.allPortals:
		r.allFlight++
		if op.allStmts {
			r.unitAll[0] = true
			r.clearUnit(false)
		}
		if op.allPortals {
			r.unitAll[1] = true
			r.clearUnit(true)
		}
	default:
		r.inflight[op.key]++
		r.unit[op.key] = op.val
	}
}

func (r *registry) clearUnit(portals bool) {
	for k := range r.unit {
		if k.portal == portals {
			delete(r.unit, k)
		}
	}
}

// settle records the server's answer to op: applied, or skipped.
func (r *registry) settle(op regOp, applied bool) {
	if op.allStmts || op.allPortals {
		r.allFlight--
		if applied {
			for k := range r.confirmed {
				if (k.portal && op.allPortals) || (!k.portal && op.allStmts) {
					delete(r.confirmed, k)
				}
			}
		}
		return
	}
	if r.inflight[op.key]--; r.inflight[op.key] <= 0 {
		delete(r.inflight, op.key)
	}
	if !applied {
		return
	}
	if op.val == nil {
		delete(r.confirmed, op.key)
	} else {
		r.confirmed[op.key] = op.val
	}
}

// distrust marks every statement and portal known so far as opaque: code
// the proxy could not see ran and may have deallocated and prepared them
// again, or declared cursors, under the same names.
func (r *registry) distrust() {
	for _, m := range []map[regKey]*prepared{r.confirmed, r.unit} {
		for k, p := range m {
			if p != nil && !p.opaque {
				c := *p
				c.opaque = true
				m[k] = &c
			}
		}
	}
}

// endUnit forgets the current unit's view.
func (r *registry) endUnit() {
	clear(r.unit)
	r.unitAll = [2]bool{}
}

// transactionEnded drops the portals that do not outlive their
// transaction: all but WITH HOLD cursors. A WITH HOLD cursor whose
// transaction rolled back (or a cursor a ROLLBACK TO SAVEPOINT undid) is
// gone on the server but kept here: a name the proxy keeps that the server
// has dropped only makes the server answer "cursor does not exist", while
// a name the proxy drops that the server keeps would be refused as
// unknown. A new definition of the name always goes through the registry
// (DECLARE, Bind), or through code the proxy cannot see, after which
// every entry is distrusted.
func (r *registry) transactionEnded() {
	for k, p := range r.confirmed {
		if k.portal && !p.hold {
			delete(r.confirmed, k)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
