package gate

import pg_query "github.com/pganalyze/pg_query_go/v6"

// tableRef converts a parser RangeVar.
func tableRef(rv *pg_query.RangeVar) TableRef {
	return TableRef{Schema: rv.Schemaname, Name: rv.Relname}
}

// nameRef converts a qualified name given as a list of String nodes
// ([schema,] name, or catalog.schema.name), as in DROP TABLE.
func nameRef(n *pg_query.Node) (TableRef, bool) {
	items := n.GetList().GetItems()
	var parts []string
	for _, it := range items {
		s := it.GetString_()
		if s == nil {
			return TableRef{}, false
		}
		parts = append(parts, s.Sval)
	}
	switch len(parts) {
	case 1:
		return TableRef{Name: parts[0]}, true
	case 2, 3:
		return TableRef{Schema: parts[len(parts)-2], Name: parts[len(parts)-1]}, true
	}
	return TableRef{}, false
}

// ddlWrites returns the relations a top-level utility statement alters,
// creates or drops, or whose data it rewrites. DML and INTO targets are
// collected by the walker.
func ddlWrites(n *pg_query.Node) []TableRef {
	var out []TableRef
	add := func(rvs ...*pg_query.RangeVar) {
		for _, rv := range rvs {
			if rv != nil {
				out = append(out, tableRef(rv))
			}
		}
	}
	addNodes := func(nodes []*pg_query.Node) {
		for _, x := range nodes {
			add(x.GetRangeVar())
		}
	}
	switch s := n.Node.(type) {
	case *pg_query.Node_TruncateStmt:
		addNodes(s.TruncateStmt.Relations)
	case *pg_query.Node_CopyStmt:
		if s.CopyStmt.IsFrom {
			add(s.CopyStmt.Relation)
		}
	case *pg_query.Node_CreateStmt:
		add(s.CreateStmt.Relation)
		addNodes(s.CreateStmt.InhRelations)
	case *pg_query.Node_CreateForeignTableStmt:
		if b := s.CreateForeignTableStmt.BaseStmt; b != nil {
			add(b.Relation)
			addNodes(b.InhRelations)
		}
	case *pg_query.Node_AlterTableStmt:
		add(s.AlterTableStmt.Relation)
		for _, c := range s.AlterTableStmt.Cmds {
			cmd := c.GetAlterTableCmd()
			add(cmd.GetDef().GetPartitionCmd().GetName())
			switch cmd.GetSubtype() {
			case pg_query.AlterTableType_AT_AddInherit, pg_query.AlterTableType_AT_DropInherit:
				// INHERIT / NO INHERIT parent: the child's rows join or
				// leave the parent, as with CREATE TABLE … INHERITS.
				add(cmd.GetDef().GetRangeVar())
			}
		}
	case *pg_query.Node_DropStmt:
		if dropsRelations(s.DropStmt.RemoveType) {
			for _, o := range s.DropStmt.Objects {
				if t, ok := nameRef(o); ok {
					out = append(out, t)
				}
			}
		}
	case *pg_query.Node_IndexStmt:
		add(s.IndexStmt.Relation)
	case *pg_query.Node_CreateTrigStmt:
		add(s.CreateTrigStmt.Relation)
	case *pg_query.Node_RuleStmt:
		add(s.RuleStmt.Relation)
	case *pg_query.Node_CreatePolicyStmt:
		add(s.CreatePolicyStmt.Table)
	case *pg_query.Node_AlterPolicyStmt:
		add(s.AlterPolicyStmt.Table)
	case *pg_query.Node_RenameStmt:
		add(s.RenameStmt.Relation)
	case *pg_query.Node_AlterObjectSchemaStmt:
		add(s.AlterObjectSchemaStmt.Relation)
	case *pg_query.Node_ClusterStmt:
		add(s.ClusterStmt.Relation)
	case *pg_query.Node_ReindexStmt:
		if s.ReindexStmt.Kind == pg_query.ReindexObjectType_REINDEX_OBJECT_TABLE {
			add(s.ReindexStmt.Relation)
		}
	case *pg_query.Node_RefreshMatViewStmt:
		add(s.RefreshMatViewStmt.Relation)
	case *pg_query.Node_ViewStmt:
		add(s.ViewStmt.View)
	case *pg_query.Node_CreateSeqStmt:
		add(s.CreateSeqStmt.Sequence)
	case *pg_query.Node_AlterSeqStmt:
		add(s.AlterSeqStmt.Sequence)
	case *pg_query.Node_GrantStmt:
		g := s.GrantStmt
		if g.Objtype == pg_query.ObjectType_OBJECT_TABLE && g.Targtype == pg_query.GrantTargetType_ACL_TARGET_OBJECT {
			addNodes(g.Objects)
		}
	}
	return out
}

// dropsRelations reports whether DROP of this object type removes relations.
func dropsRelations(t pg_query.ObjectType) bool {
	switch t {
	case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_VIEW,
		pg_query.ObjectType_OBJECT_MATVIEW, pg_query.ObjectType_OBJECT_FOREIGN_TABLE,
		pg_query.ObjectType_OBJECT_SEQUENCE, pg_query.ObjectType_OBJECT_INDEX:
		return true
	}
	return false
}
