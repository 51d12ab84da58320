package guard

import (
	"context"
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/fencestore"
)

// table is an entry resolved to one relation.
type table struct {
	oid       string // pg_class oid, decimal
	name      string // schema-qualified, as regclass prints it
	resource  string
	where     string
	unguarded bool
}

// resolveQuery finds the relations an entry names: schema and name exact;
// with no schema, every user schema's table of that name (as the proxy's
// table filter reads an unqualified name).
const resolveQuery = `SELECT COALESCE(pg_catalog.array_agg(c.oid::text ORDER BY c.oid), '{}'),
	COALESCE(pg_catalog.array_agg(c.oid::pg_catalog.regclass::text ORDER BY c.oid), '{}'),
	COALESCE(pg_catalog.array_agg(c.relkind::text ORDER BY c.oid), '{}')
FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relname = $2 AND (n.nspname = $1 OR $1 = '' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'fence', 'pg_toast')
	AND n.nspname NOT LIKE 'pg_temp_%' AND n.nspname NOT LIKE 'pg_toast_temp_%')`

// resolveAll resolves every entry; a name that matches no table, or a
// relation that is not a table, is an error naming where it was written.
// A table matched by two entries with different resources is an error too.
func resolveAll(ctx context.Context, q fencestore.Querier, entries []Entry) ([]table, error) {
	var out []table
	seen := map[string]table{}
	for _, e := range entries {
		ts, err := resolve(ctx, q, e)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if prev, dup := seen[t.oid]; dup {
				if prev.resource != t.resource {
					return nil, fmt.Errorf("%s: table %s is also matched at %s, under resource %q instead of %q", t.where, t.name, prev.where, prev.resource, t.resource)
				}
				continue
			}
			seen[t.oid] = t
			out = append(out, t)
		}
	}
	return out, nil
}

func resolve(ctx context.Context, q fencestore.Querier, e Entry) ([]table, error) {
	var oids, names, kinds []string
	if err := q.QueryRow(ctx, resolveQuery, e.Schema, e.Name).Scan(&oids, &names, &kinds); err != nil {
		return nil, fmt.Errorf("protect: look up %s: %w", e, err)
	}
	if len(oids) == 0 {
		return nil, fmt.Errorf("%s: table %s %w in this database", e.Where, e, errNoTable)
	}
	var out []table
	for i := range oids {
		if kinds[i] != "r" && kinds[i] != "p" {
			return nil, fmt.Errorf("%s: %s is not a table (relkind %s): only tables and partitioned tables can be protected", e.Where, names[i], kinds[i])
		}
		out = append(out, table{oid: oids[i], name: names[i], resource: e.Resource, where: e.Where, unguarded: e.Unguarded})
	}
	return out, nil
}
