package gate

import "sort"

// Config is the fencing policy a proxy's sessions share. It is read-only once
// a session uses it.
type Config struct {
	// Analyzer memoizes statement analysis across sessions; nil analyses
	// every time.
	Analyzer *Analyzer
	// DefaultResource is the resource of a token that names none; "" means
	// such a token is an error.
	DefaultResource string
	// Tables maps protected tables to their resource. A key with Schema ""
	// matches a table of that name in any schema. Names are as PostgreSQL
	// stores them (unquoted names folded to lower case).
	Tables map[TableRef]Protection
	// ReadsCheckOnly makes reads check the mark without advancing it.
	ReadsCheckOnly bool
	// TransactionTokens trusts lock.fencing_token and lock.resource only
	// where the current transaction set them (SET LOCAL, or set_config
	// with is_local true), for a proxy with a transaction-mode pooler on
	// either side (config token_scope: transaction; docs/topologies.md):
	// there one server connection serves many clients, and a value set at
	// session level may be another client's. A session-level SET of
	// either, or a startup option naming them, is refused (55Z05), and a
	// check that would read a value its transaction did not set refuses
	// instead.
	TransactionTokens bool
	// Pooled is transaction pool mode: pgwire lends a shared server
	// connection to the client for one transaction or autocommit unit.
	// Everything TransactionTokens does holds; the session-level fencing
	// settings (startup options, a SET or RESET alone in its unit outside a
	// transaction block) are kept by the session and passed to checks as
	// literal arguments, never left on the server connection; and what
	// needs session state a pool cannot keep per client is refused (0A000;
	// see pool.go).
	Pooled bool
}

// txnScoped reports whether the fencing settings are trusted only where
// the transaction set them (TransactionTokens, or Pooled).
func (c *Config) txnScoped() bool { return c.TransactionTokens || c.Pooled }

// Protection is what the config says about one table.
type Protection struct {
	Resource     string // the table's resource
	RequireToken bool   // writes without a token are refused (55Z02)
}

// match is what the config says about all the tables a statement writes.
type match struct {
	found     bool     // some written table is configured
	require   bool     // some match requires a token
	resources []string // the distinct resources of the matches, sorted
}

// protection matches every table among writes against the config. Every
// table counts, any match that requires a token requires it, and the
// answer does not depend on map order.
func (c *Config) protection(writes []TableRef) match {
	var m match
	if len(c.Tables) == 0 {
		return m
	}
	add := func(p Protection) {
		m.found = true
		m.require = m.require || p.RequireToken
		for _, r := range m.resources {
			if r == p.Resource {
				return
			}
		}
		m.resources = append(m.resources, p.Resource)
	}
	for _, t := range writes {
		c.lookup(t, add)
	}
	sort.Strings(m.resources)
	return m
}

// lookup calls add for every configured entry that may be t.
func (c *Config) lookup(t TableRef, add func(Protection)) {
	if p, ok := c.Tables[t]; ok {
		add(p)
	}
	if t.Schema != "" {
		if p, ok := c.Tables[TableRef{Name: t.Name}]; ok {
			add(p)
		}
		return
	}
	// Unqualified in the statement: search_path decides on the server,
	// so any configured schema may be meant. Fail closed: all of them.
	for k, p := range c.Tables {
		if k.Schema != "" && k.Name == t.Name {
			add(p)
		}
	}
}
