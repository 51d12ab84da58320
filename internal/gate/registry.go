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
	// lexChanges: Session.lexChanges at its Parse (see Session.unsureLex).
	lexChanges uint32

	// hold: a cursor declared WITH HOLD, which outlives its transaction.
	hold bool
	// snapStale: a portal or cursor made before the client last set the
	// fencing settings: its snapshot may be older than the check of the
	// transaction it is read in (see registry.staleSnapshots).
	snapStale bool

	// server: under Config.Pooled, the name pgwire gave the statement on
	// the server (Msg.Server of its Parse).
	server string
	// typedParams: under Config.Pooled, the parameters (bit n-1 for $n)
	// its Parse gave a type other than text or none (see Msg.ParamTypes).
	typedParams uint64
	// userTyped: its Parse gave a parameter a type of a user's
	// (Msg.UserTyped), whose code runs at every Bind.
	userTyped bool

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
func (p *prepared) mayMatter(m *textMemo) bool {
	if p.matters == 0 {
		p.matters = 1
		if m.mayMatter(p.text) {
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

// kind is the index of the key's namespace in the registry's maps.
func (k regKey) kind() int { return b2i(k.portal) }

// regOp is a change to the registry that a message or statement makes once
// the server confirms it: define (val non-nil), remove (val nil), or remove
// every statement (allStmts) or every portal (allPortals).
type regOp struct {
	key        regKey
	val        *prepared
	allStmts   bool
	allPortals bool
	gen        uint64 // a portal's: Session.fenceSets when it was sent
}

// registry holds the prepared statements and portals the server confirmed
// (docs/design.md "Fail closed", rule 2): a Parse, Bind, Close, PREPARE or
// DEALLOCATE changes it only when its completion reply arrives; one the
// server refused or skipped changes nothing. While a change is in flight
// the name's state is unknown, except to the unit that made the change:
// that unit's own later messages run only if the change succeeded.
//
// Each map is by namespace (regKey.kind: statements, then portals) and
// name.
type registry struct {
	confirmed [2]names[*prepared]
	inflight  [2]names[int] // changes sent and not yet answered or skipped
	allFlight int           // "remove all" changes in flight

	unit    [2]names[*prepared] // changes made by the current unit
	unitAll [2]bool             // the current unit removed all statements / portals

	snapGen uint64 // Session.fenceSets at the last staleSnapshots
}

// lookup returns what k names when the server reaches the current message:
// found is false when it names nothing, and wait is true when that depends
// on a reply not yet received.
func (r *registry) lookup(k regKey) (p *prepared, found, wait bool) {
	kind := k.kind()
	if p, ok := r.unit[kind].get(k.name); ok {
		return p, p != nil, false
	}
	if r.unitAll[kind] {
		return nil, false, false
	}
	if n, _ := r.inflight[kind].get(k.name); n > 0 || r.allFlight > 0 {
		return nil, false, true
	}
	p, _ = r.confirmed[kind].get(k.name)
	return p, p != nil, false
}

// statement returns the statement the server confirmed under name.
func (r *registry) statement(name string) *prepared {
	p, _ := r.confirmed[0].get(name)
	return p
}

// send records that op was sent within the current unit.
func (r *registry) send(op regOp) {
	switch {
	case op.allStmts || op.allPortals:
		r.allFlight++
		if op.allStmts {
			r.unitAll[0] = true
			r.unit[0].clear()
		}
		if op.allPortals {
			r.unitAll[1] = true
			r.unit[1].clear()
		}
	default:
		kind, name := op.key.kind(), op.key.name
		n, _ := r.inflight[kind].get(name)
		r.inflight[kind].set(name, n+1)
		r.unit[kind].set(name, op.val)
	}
}

// settle records the server's answer to op: applied, or skipped.
func (r *registry) settle(op regOp, applied bool) {
	if op.allStmts || op.allPortals {
		r.allFlight--
		if applied && op.allStmts {
			r.confirmed[0].clear()
		}
		if applied && op.allPortals {
			r.confirmed[1].clear()
		}
		return
	}
	kind, name := op.key.kind(), op.key.name
	if n, _ := r.inflight[kind].get(name); n > 1 {
		r.inflight[kind].set(name, n-1)
	} else {
		r.inflight[kind].del(name)
	}
	if !applied {
		return
	}
	if op.val == nil {
		r.confirmed[kind].del(name)
	} else if op.key.portal && op.gen != r.snapGen {
		r.confirmed[kind].set(name, staleCopy(op.val)) // made before a change it did not see
	} else {
		r.confirmed[kind].set(name, op.val)
	}
}

// distrust marks every statement and portal known so far as opaque: code
// the proxy could not see ran and may have deallocated and prepared them
// again, or declared cursors, under the same names.
func (r *registry) distrust() {
	replaceEach([]*names[*prepared]{&r.confirmed[0], &r.confirmed[1], &r.unit[0], &r.unit[1]}, func(p *prepared) *prepared {
		if p.opaque {
			return p
		}
		c := *p
		c.opaque = true
		return &c
	})
}

// replaceEach puts f(p) in place of each entry p of maps. An entry may be
// shared (a portal's with its statement's, the unit's view with the
// confirmed one), so a change is a copy, never made in place.
func replaceEach(maps []*names[*prepared], f func(*prepared) *prepared) {
	for _, m := range maps {
		for k, p := range m.all {
			if p == nil {
				continue
			}
			if q := f(p); q != p {
				m.set(k, q)
			}
		}
	}
}

// staleSnapshots marks every portal and cursor known so far, and those whose
// Bind or DECLARE is in flight, as made before the client set the fencing
// settings (snapStale): a portal's snapshot is taken when it is made (Bind,
// DECLARE), so a check in front of its Execute or FETCH, under settings set
// after it, comes after the snapshot it reads, which may miss what the
// previous holder of the lock committed (READ COMMITTED). gen is the
// Session.fenceSets of the statement that set them. (Code the proxy cannot
// see may set them too; a cursor read after such code is not refused: code
// runs in most transactions, any function call, and refusing the cursors
// read after it would refuse ordinary use.)
func (r *registry) staleSnapshots(gen uint64) {
	r.snapGen = gen
	replaceEach([]*names[*prepared]{&r.confirmed[1], &r.unit[1]}, staleCopy)
}

// directives returns the directives of the text p runs (none when it
// cannot be read): a cursor's DECLARE, a portal's Parse.
func (p *prepared) directives() Directives {
	if p.st != nil {
		return p.st.Directives
	}
	d, _ := ParseDirectives(p.text)
	return d
}

// mayCarryToken reports whether the text p runs may carry a directive.
func (p *prepared) mayCarryToken() bool {
	if p.st != nil {
		return p.st.Directives.Token != 0
	}
	return mayHaveDirectives(p.text)
}

// staleCopy returns p marked snapStale: p itself when it is, else a copy.
func staleCopy(p *prepared) *prepared {
	if p.snapStale {
		return p
	}
	c := *p
	c.snapStale = true
	return &c
}

// endUnit forgets the current unit's view.
func (r *registry) endUnit() {
	r.unit[0].clear()
	r.unit[1].clear()
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
	for k, p := range r.confirmed[1].all {
		if !p.hold {
			r.confirmed[1].del(k)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
