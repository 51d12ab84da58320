package pgwire

import (
	"github.com/fenceproxy/fenceproxy/internal/gate"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Statement names in transaction pool mode. A client's named
// protocol-level statement has a name of the proxy's on the server
// (gate.ServerStatementName, one per Parse), so clients sharing a server
// connection never meet each other's statements and a statement can be
// prepared again on another connection under the same name. gate keeps,
// with each statement it knows confirmed, the server name of its Parse
// (gate.Msg.Server), and says it for every Bind, Describe and Close of one
// (gate.Decision.Server); a name that defines nothing is sent as written,
// and no server statement has a client's name. The unnamed statement stays
// unnamed (setup makes it the client's). Portals live no longer than a
// transaction, which a lending outlasts: their names are the client's.

// newStatementName returns the server name for a client's next Parse.
func (s *session) newStatementName() string {
	return gate.ServerStatementName(s.srv.nextStatement.Add(1))
}

// serverStatement returns the name to send for the client's statement
// name, given the Decision gate made on the message that names it.
func serverStatement(name string, d *gate.Decision) string {
	if name == "" || d.Server == "" {
		return name
	}
	return d.Server
}

// writePooled writes the client's own Parse, Describe or Close (body)
// upstream with the statement's server name, and keeps what the Parse
// defines for setup.
func (s *session) writePooled(typ byte, body []byte, m *gate.Msg, d *gate.Decision) error {
	switch {
	case typ == 'P' && m.Name == "":
		// The client's unnamed Parse goes as it is: kept raw, decoded for
		// setup only if a connection ever lacks it (unnamedWanted).
		if err := s.writeRaw(s.uw, typ, body); err != nil {
			return err
		}
		s.pooled.unnamed, s.pooled.unnamedBody = nil, append(s.pooled.unnamedBody[:0], body...)
		s.pooled.unnamedServer = m.Server
		borrowed(s.pooled.cur).unnamed = m.Server
		return nil
	case typ == 'P':
		var p pgproto3.Parse
		if err := p.Decode(body); err != nil {
			return protocolViolation("invalid Parse message: " + err.Error())
		}
		return s.writeParse(&p, m)
	case (typ == 'D' || typ == 'C') && m.Object == 'S' && serverStatement(m.Name, d) != m.Name:
		if typ == 'D' {
			return s.writeUpstreamOwn(&pgproto3.Describe{ObjectType: 'S', Name: d.Server})
		}
		return s.writeUpstreamOwn(&pgproto3.Close{ObjectType: 'S', Name: d.Server})
	}
	return s.writeRaw(s.uw, typ, body)
}

// writeParse writes a Parse of the client's (or gate's replacement of
// one) under the server name m.Server, and keeps it for setup.
func (s *session) writeParse(p *pgproto3.Parse, m *gate.Msg) error {
	sent := &pgproto3.Parse{Name: p.Name, Query: p.Query, ParameterOIDs: p.ParameterOIDs}
	if sent.Name != "" {
		sent.Name = m.Server
	}
	if err := s.writeUpstreamOwn(sent); err != nil {
		return err
	}
	c := s.pooled.cur
	if sent.Name == "" {
		// One unnamed statement at a time, replaced by the next: nothing
		// to sweep, nothing for other sessions to look up.
		s.pooled.unnamed, s.pooled.unnamedBody, s.pooled.unnamedServer = sent, nil, m.Server
		borrowed(c).unnamed = m.Server
		return nil
	}
	s.pooled.stmts[m.Server] = sent
	s.srv.statements.Store(m.Server, struct{}{})
	c.Prepared[m.Server] = 1
	return nil
}

// writeUpstreamOwn writes msg upstream in place of the client's own
// message; the caller counts it sent.
func (s *session) writeUpstreamOwn(msg pgproto3.FrontendMessage) error {
	buf, err := msg.Encode(s.encBuf[:0])
	if err != nil {
		return err
	}
	s.encBuf = buf
	_, err = s.uw.Write(buf)
	return err
}

// pooledMessage carries out d on the client's Query, Parse, Execute,
// Describe or Close (m, its body) in transaction pool mode: as
// clientMessage does, with statement names made the server's.
func (s *session) pooledMessage(typ byte, body []byte, m *gate.Msg, d *gate.Decision) error {
	// gate's replacement of a Parse is one too: written below, under the
	// server name.
	replacement, _ := d.Replace.(*pgproto3.Parse)
	if typ == 'P' && replacement != nil {
		d.Replace, d.Drop = nil, true
	}
	own, err := s.applyBefore(*d)
	if err == nil && typ == 'P' && replacement != nil {
		if err = s.writeParse(replacement, m); err == nil {
			s.sent('P')
		}
	}
	if err == nil && own {
		if err = s.writePooled(typ, body, m, d); err == nil {
			s.sent(typ)
		}
	}
	return s.applyAfter(*d, err)
}
