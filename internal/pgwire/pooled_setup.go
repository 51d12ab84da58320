package pgwire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fenceproxy/fenceproxy/internal/pool"
	"github.com/fenceproxy/fenceproxy/internal/sqlstate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// A setup readies a lent server connection for the client before any
// message of the client's reaches it, in one exchange hidden from the
// client and from gate:
//
//   - the settings PostgreSQL reports are set to the client's view of them
//     (client_encoding first, in a Query of its own, since the server reads
//     the next Query's text in it), and the server's ParameterStatus must
//     then show every one as the client's, or the session ends: gate's
//     lexing rule reads them;
//   - statements of clients that no longer have them are closed, now and
//     then (sweep);
//   - the client's statements the connection lacks are prepared again,
//     each with a Sync of its own so that one that fails now (its table
//     dropped) leaves the others; it is then missing on this connection,
//     and a Bind of it fails there as a Bind of a missing statement does;
//   - the unnamed statement is made the client's (or closed), unless the
//     client's first message replaces it anyway (a Query, a Parse of it).
//
// Nothing is sent when nothing differs: the common lending costs no round
// trip.

// setupGroup is one unit of a setup, answered up to its ReadyForQuery.
type setupGroup struct {
	query   bool   // a Query of SETs: an error ends the session
	parse   string // a Parse of this server name ("" none)
	unnamed bool   // the Parse is of the unnamed statement
	closes  []string
	failed  *pgproto3.ErrorResponse
}

// setup readies c for the session, telling the client when it fails (c
// is then released). keepUnnamed: the client's first message replaces the
// unnamed statement itself. At login (s.pooled params taken from the
// startup packet) the server's values are adopted instead of checked.
func (s *session) setup(c *pool.Conn, keepUnnamed, login bool) error {
	err := s.runSetup(c, s.planSetup(c, keepUnnamed), login)
	s.tell(err)
	return err
}

// setupPlan is what a setup sends, and the units its answers come in;
// empty when the connection is ready for the client as it is.
type setupPlan struct {
	msgs   []pgproto3.FrontendMessage
	groups []setupGroup
}

// planSetup returns what readies c for the session, with no I/O.
func (s *session) planSetup(c *pool.Conn, keepUnnamed bool) setupPlan {
	lc := borrowed(c)
	var msgs []pgproto3.FrontendMessage
	var groups []setupGroup
	if s.settingsDiffer(c) {
		if q := s.setQuery(c, true); q != "" {
			msgs, groups = append(msgs, &pgproto3.Query{String: q}), append(groups, setupGroup{query: true})
		}
		if q := s.setQuery(c, false); q != "" {
			msgs, groups = append(msgs, &pgproto3.Query{String: q}), append(groups, setupGroup{query: true})
		}
	}
	if len(msgs) > 0 {
		lc.unnamed = "" // a Query drops the unnamed statement, even one that fails
	}
	live := s.liveStatements()
	closes := s.sweep(c, lc)
	var unnamed *pgproto3.Parse
	if !keepUnnamed {
		unnamed = s.unnamedWanted()
	}
	if !keepUnnamed && unnamed == nil && lc.unnamed != "" {
		closes = append(closes, "")
	}
	if len(closes) > 0 {
		for _, name := range closes {
			msgs = append(msgs, &pgproto3.Close{ObjectType: 'S', Name: name})
		}
		msgs, groups = append(msgs, &pgproto3.Sync{}), append(groups, setupGroup{closes: closes})
	}
	if !keepUnnamed && unnamed != nil && lc.unnamed != s.pooled.unnamedServer {
		msgs = append(msgs, unnamed, &pgproto3.Sync{})
		groups = append(groups, setupGroup{parse: s.pooled.unnamedServer, unnamed: true})
	}
	for server := range live {
		p := s.pooled.stmts[server]
		if _, ok := c.Prepared[server]; ok || p == nil {
			continue
		}
		msgs = append(msgs, p, &pgproto3.Sync{})
		groups = append(groups, setupGroup{parse: server})
	}
	return setupPlan{msgs, groups}
}

// runSetup carries out plan on c. It returns a *pooledFailure, c
// released, when the session cannot go on with it. It touches the
// session's pooled state and c, nothing the relay writes: an event loop
// runs it on a goroutine of its own while the session waits.
func (s *session) runSetup(c *pool.Conn, plan setupPlan, login bool) error {
	if len(plan.msgs) == 0 {
		return nil
	}
	if err := s.exchangeSetup(c, borrowed(c), plan.msgs, plan.groups); err != nil {
		return err
	}
	return s.checkSettings(c, login)
}

// pooledFailure ends a pooled session: resp, when set, is what the client
// is told (tell).
type pooledFailure struct {
	resp *pgproto3.ErrorResponse
	err  error
}

func (f *pooledFailure) Error() string { return f.err.Error() }
func (f *pooledFailure) Unwrap() error { return f.err }

// tell sends the client what a *pooledFailure says it is told.
func (s *session) tell(err error) {
	var f *pooledFailure
	if errors.As(err, &f) && f.resp != nil {
		s.sendClient(f.resp)
	}
}

// settingsDiffer reports whether any setting setup restores differs
// between the client's view and c: one comparison of their settingsKeys,
// each taken again only after its settings changed.
func (s *session) settingsDiffer(c *pool.Conn) bool {
	lc := borrowed(c)
	if lc.settings == "" {
		lc.settings = settingsKey(c.Params)
	}
	if s.pooled.settings == "" {
		s.pooled.settings = settingsKey(s.pooled.params)
	}
	return lc.settings != s.pooled.settings
}

// settingsKey is one string that tells apart any two sets of values of
// the settings setup restores (never "").
func settingsKey(params map[string]string) string {
	var b strings.Builder
	for _, n := range settable {
		if v, ok := params[n]; ok {
			b.WriteString(strconv.Itoa(len(v)))
			b.WriteByte(':')
			b.WriteString(v)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// setQuery returns the SETs that make c's reported settings the client's:
// only client_encoding when encoding, the others otherwise; "" for none.
// Values are dollar-quoted (quoteLiteral).
func (s *session) setQuery(c *pool.Conn, encoding bool) string {
	var b strings.Builder
	for _, n := range settable {
		if (n == "client_encoding") != encoding {
			continue
		}
		v, ok := s.pooled.params[n]
		if have, set := c.Params[n]; ok == set && have == v {
			continue
		}
		fmt.Fprintf(&b, "SET %s TO %s;", n, quoteLiteral(v))
	}
	return b.String()
}

// quoteLiteral quotes v as a dollar-quoted string literal, whose tag v
// does not hold. The server reads it alike under any
// standard_conforming_strings and any client encoding; a backslash escape
// is not: in SJIS, BIG5 or GBK a multibyte character may end in the byte
// of a backslash, which would escape the literal's closing quote and let a
// client's value (a startup parameter) run as SQL, and the server refuses
// \' there (22P06).
func quoteLiteral(v string) string {
	for i := 0; ; i++ {
		tag := "$fenceproxy" + strconv.Itoa(i) + "$"
		if strings.Index(v+tag, tag) == len(v) {
			return tag + v + tag
		}
	}
}

// unnamedWanted returns the Parse of the client's unnamed statement, which
// a connection lent to it must have: the last one sent, when the server
// confirmed it; nil for none (the server has none either when that Parse
// failed: a Parse of the unnamed statement drops the old one first).
func (s *session) unnamedWanted() *pgproto3.Parse {
	if s.pooled.unnamed == nil && s.pooled.unnamedBody == nil {
		return nil
	}
	defer s.unlockGate(s.lockGate())
	g, ok := s.gate.(interface {
		PooledStatement(name string) (string, bool)
	})
	if !ok {
		return nil
	}
	if server, ok := g.PooledStatement(""); !ok || server != s.pooled.unnamedServer {
		return nil
	}
	if s.pooled.unnamed == nil {
		p := &pgproto3.Parse{}
		if p.Decode(s.pooled.unnamedBody) != nil {
			return nil // decoded once already, when the client sent it
		}
		s.pooled.unnamed = p
	}
	return s.pooled.unnamed
}

// liveStatements returns the client's named statements the server
// confirmed, by server name, with their client names; the Parses kept of
// any others are forgotten.
func (s *session) liveStatements() map[string]string {
	if len(s.pooled.stmts) == 0 {
		return nil // every statement the gate confirmed was sent, and kept, here
	}
	live := map[string]string{}
	locked := s.lockGate()
	if g, ok := s.gate.(interface {
		PooledStatements(func(name, server string))
	}); ok {
		g.PooledStatements(func(name, server string) {
			if name != "" {
				live[server] = name
			}
		})
	}
	s.unlockGate(locked)
	for server := range s.pooled.stmts {
		if _, ok := live[server]; !ok {
			delete(s.pooled.stmts, server)
			s.srv.statements.Delete(server)
		}
	}
	return live
}

// sweep returns the statements on c that no session has any more, when c
// holds twice as many as after the last sweep (and at least 64 more):
// each setup thus costs no look-up of them.
func (s *session) sweep(c *pool.Conn, lc *lentConn) []string {
	if len(c.Prepared) < 2*lc.swept+64 {
		return nil
	}
	var dead []string
	for name := range c.Prepared {
		if _, ok := s.srv.statements.Load(name); !ok {
			dead = append(dead, name)
		}
	}
	lc.swept = len(c.Prepared) - len(dead)
	return dead
}

// forgetStatements marks the session's statements dead when it ends: the
// next sweep of a connection that has them closes them there.
func (s *session) forgetStatements() {
	for server := range s.pooled.stmts {
		s.srv.statements.Delete(server)
	}
}

// exchangeSetup sends msgs and reads the answer of each group.
func (s *session) exchangeSetup(c *pool.Conn, lc *lentConn, msgs []pgproto3.FrontendMessage, groups []setupGroup) error {
	c.NetConn.SetDeadline(time.Now().Add(s.cfg.startupTimeout()))
	defer c.NetConn.SetDeadline(time.Time{})
	var buf []byte
	for _, m := range msgs {
		var err error
		if buf, err = m.Encode(buf[:0]); err != nil {
			return s.setupFailed(c, err)
		}
		if _, err := lc.w.Write(buf); err != nil {
			return s.setupFailed(c, err)
		}
	}
	if err := lc.w.Flush(); err != nil {
		return s.setupFailed(c, err)
	}
	for i := range groups {
		if err := s.readSetupGroup(c, lc, &groups[i]); err != nil {
			return s.setupFailed(c, err)
		}
	}
	// Cleared before c can go back to the pool below: an fdConn's
	// deadline is a socket timeout, which the next borrower would keep.
	c.NetConn.SetDeadline(time.Time{})
	for _, g := range groups {
		switch {
		case g.query && g.failed != nil:
			s.srv.pool.Release(c, lc.r.idle())
			e := *g.failed
			e.Severity, e.SeverityUnlocalized = "FATAL", "FATAL"
			return &pooledFailure{&e, fmt.Errorf("setting the client's parameters: %s", g.failed.Message)}
		case g.parse != "" && !g.unnamed && g.failed != nil && g.failed.Code == sqlstate.DuplicatePreparedStmt:
			// The server holds a statement under a name only the proxy
			// gives, which the proxy did not prepare here: code another
			// client ran (a function's EXECUTE 'PREPARE …') put it there,
			// and a Bind of the client's statement would run it. The
			// connection is closed, and the session ends.
			s.srv.pool.Release(c, false)
			s.log.Error("server connection holds a statement under the proxy's name that the proxy did not prepare; closed", "statement", g.parse)
			return &pooledFailure{fatal(codeInternalError, "fenceproxy: the server connection held a statement under a name reserved for the proxy, made by other code; it was closed, and the session cannot continue"),
				fmt.Errorf("statement %q already on the server connection", g.parse)}
		case g.unnamed && g.failed == nil:
			lc.unnamed = g.parse
		case g.unnamed:
			lc.unnamed = ""
		case g.parse != "" && g.failed == nil:
			c.Prepared[g.parse] = 1
		case g.closes != nil && g.failed == nil:
			for _, name := range g.closes {
				if name == "" {
					lc.unnamed = ""
				}
				delete(c.Prepared, name)
			}
		}
	}
	return nil
}

// readSetupGroup reads the replies to one group up to its ReadyForQuery.
func (s *session) readSetupGroup(c *pool.Conn, lc *lentConn, g *setupGroup) error {
	for {
		typ, n, err := lc.r.header()
		if err != nil {
			return err
		}
		body, err := lc.r.body(n)
		if err != nil {
			return err
		}
		switch typ {
		case 'Z':
			return nil
		case 'E':
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				return err
			}
			if e.Severity == "FATAL" || e.Severity == "PANIC" {
				return fmt.Errorf("server error: %s", e.Message)
			}
			g.failed = &e
		case 'S':
			var ps pgproto3.ParameterStatus
			if err := ps.Decode(body); err != nil {
				return err
			}
			c.Params[ps.Name] = ps.Value
			lc.settings = ""
		case 'C', '1', '3', 'N', 'A':
		default:
			return fmt.Errorf("unexpected reply %q to the proxy's setup", typ)
		}
	}
}

// setupFailed closes c, which the setup left in a state not known, and
// returns what the client is told.
func (s *session) setupFailed(c *pool.Conn, err error) error {
	s.srv.pool.Release(c, false)
	s.log.Warn("setting up a server connection failed", "err", err)
	return &pooledFailure{fatal(codeConnectionFailure, "fenceproxy: lost the connection to the upstream server"), err}
}

// checkSettings makes sure the server now reports the client's view of
// every setting setup restores; at login it takes the server's instead
// (the client's startup values, as the server spells them).
func (s *session) checkSettings(c *pool.Conn, login bool) error {
	for _, n := range settable {
		if login {
			if v, reported := c.Params[n]; reported {
				s.pooled.params[n] = v
				s.pooled.settings = ""
			}
			continue
		}
		if c.Params[n] != s.pooled.params[n] {
			s.srv.pool.Release(c, false)
			s.log.Error("server connection setting differs from the client's after setup", "param", n)
			return &pooledFailure{fatal(codeInternalError, "fenceproxy: could not give the server connection the client's "+n+"; the session cannot continue"),
				fmt.Errorf("setting %s not restored", n)}
		}
	}
	return nil
}
