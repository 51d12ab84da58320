package config

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxIdentifierBytes is PostgreSQL's limit on an identifier (NAMEDATALEN-1).
// PostgreSQL truncates longer names silently; the config refuses them, so
// that a configured name always means the table the server means.
const MaxIdentifierBytes = 63

// Table is a configured table name after PostgreSQL's identifier rules:
// unquoted parts folded to lower case, quoted parts ("Jobs", "a.b") kept
// exactly. Schema "" means a table of that name in any schema.
type Table struct {
	Schema string
	Name   string
}

// String is the name as SQL would write it: schema.name, each part quoted
// when it needs quotes.
func (t Table) String() string {
	if t.Schema == "" {
		return quoteIdent(t.Name)
	}
	return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
}

// ParseTable reads "table", "schema.table", or either with quoted
// identifiers (public."Jobs").
func ParseTable(s string) (Table, error) {
	parts, err := splitIdents(strings.TrimSpace(s))
	if err != nil {
		return Table{}, fmt.Errorf("table %q: %w", s, err)
	}
	switch len(parts) {
	case 1:
		return Table{Name: parts[0]}, nil
	case 2:
		return Table{Schema: parts[0], Name: parts[1]}, nil
	}
	return Table{}, fmt.Errorf("table %q: want schema.table or table", s)
}

// splitIdents splits a dotted name into its identifiers.
func splitIdents(s string) ([]string, error) {
	var parts []string
	for {
		id, rest, err := nextIdent(s)
		if err != nil {
			return nil, err
		}
		if len(id) > MaxIdentifierBytes {
			return nil, fmt.Errorf("identifier %q is %d bytes; PostgreSQL truncates names to %d bytes, so it would never match as written: write the truncated name", id, len(id), MaxIdentifierBytes)
		}
		parts = append(parts, id)
		if rest == "" {
			return parts, nil
		}
		if rest[0] != '.' {
			return nil, errors.New("want schema.table or table; quote names with other characters (\"My Table\")")
		}
		s = rest[1:]
	}
}

// nextIdent reads one identifier at the start of s: a quoted one ("" stands
// for "), or an unquoted one folded to lower case.
func nextIdent(s string) (id, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '"' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			if b.Len() == 0 {
				return "", "", errors.New("empty quoted identifier")
			}
			return b.String(), s[i+1:], nil
		}
		return "", "", errors.New("unterminated quoted identifier")
	}
	i := 0
	for i < len(s) && identByte(s[i], i == 0) {
		i++
	}
	if i == 0 {
		return "", "", errors.New("want schema.table or table; quote names with other characters (\"My Table\")")
	}
	return strings.ToLower(s[:i]), s[i:], nil
}

// identByte reports whether c may appear in an unquoted identifier.
func identByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c >= 0x80:
		return true
	case c >= '0' && c <= '9', c == '$':
		return !first
	}
	return false
}

// quoteIdent quotes name unless it is a plain lower-case identifier.
func quoteIdent(name string) string {
	plain := name != ""
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && (c >= '0' && c <= '9')) {
			plain = false
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// UnmarshalYAML decodes a Resource strictly (an unknown key is an error with
// its line) and remembers the line of each table.
func (r *Resource) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		var unknown []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Value {
			case "name", "tables", "require_token":
			default:
				unknown = append(unknown, fmt.Sprintf("line %d: field %s not found in type config.Resource", k.Line, k.Value))
			}
		}
		if unknown != nil {
			return &yaml.TypeError{Errors: unknown}
		}
	}
	type plain Resource
	if err := n.Decode((*plain)(r)); err != nil {
		return err
	}
	r.lines, r.line = nil, n.Line
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "tables" && n.Content[i+1].Kind == yaml.SequenceNode {
			for _, item := range n.Content[i+1].Content {
				r.lines = append(r.lines, item.Line)
			}
		}
	}
	return nil
}

// TableAt returns Tables[i] of Resources[k] parsed, and where it was
// written ("file:line", or "resources[k] (name)" when not read from a file).
func (c *Config) TableAt(k, i int) (Table, string, error) {
	r := c.Resources[k]
	where := fmt.Sprintf("resources[%d] (%s)", k, r.Name)
	if r.source != "" && i < len(r.lines) {
		where = fmt.Sprintf("%s:%d", r.source, r.lines[i])
	}
	t, err := ParseTable(r.Tables[i])
	return t, where, err
}

// ConfiguredTable is one table under resources:, with where it was written.
type ConfiguredTable struct {
	Table        Table
	Resource     string
	RequireToken bool
	Where        string // "file:line"
}

// Tables returns every configured table in file order. Call Validate first.
func (c *Config) Tables() []ConfiguredTable {
	var out []ConfiguredTable
	for k, r := range c.Resources {
		for i := range r.Tables {
			t, where, err := c.TableAt(k, i)
			if err != nil {
				continue // Validate reported it
			}
			out = append(out, ConfiguredTable{Table: t, Resource: r.Name, RequireToken: r.RequireToken, Where: where})
		}
	}
	return out
}
