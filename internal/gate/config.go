package gate

import "strings"

// Config is the fencing policy a proxy's sessions share. It is read-only once
// a session uses it.
type Config struct {
	// Analyzer memoizes statement analysis across sessions; nil analyses
	// every time.
	Analyzer *Analyzer
	// DefaultResource is the resource of a token that names none; "" means
	// such a token is an error.
	DefaultResource string
	// Tables maps protected tables to their resource. Keys are "schema.name",
	// or "name" for a table named without a schema, which then matches a
	// table of that name in any schema.
	Tables map[string]Protection
	// ReadsCheckOnly makes reads check the mark without advancing it.
	ReadsCheckOnly bool
}

// Protection is what the config says about one table.
type Protection struct {
	Resource     string // the table's resource
	RequireToken bool   // writes without a token are refused (55Z02)
}

// protection returns the first protected table among writes.
func (c *Config) protection(writes []TableRef) (Protection, string, bool) {
	if len(c.Tables) == 0 {
		return Protection{}, "", false
	}
	for _, t := range writes {
		if p, ok := c.Tables[t.String()]; ok {
			return p, t.String(), true
		}
		if t.Schema != "" {
			if p, ok := c.Tables[t.Name]; ok {
				return p, t.String(), true
			}
			continue
		}
		// Unqualified in the statement: search_path decides on the server,
		// so any configured schema may be meant. Fail closed.
		for name, p := range c.Tables {
			if i := strings.LastIndexByte(name, '.'); i >= 0 && name[i+1:] == t.Name {
				return p, t.String(), true
			}
		}
	}
	return Protection{}, "", false
}
