package gate

import pg_query "github.com/pganalyze/pg_query_go/v6"

// noTxnBlock reports whether PostgreSQL refuses the utility statement at the
// root of n inside a transaction block (PreventInTransactionBlock in the
// server; each case was checked against a PostgreSQL 15 server). Transaction
// statements (COMMIT/ROLLBACK PREPARED) and DISCARD ALL are classified by
// their callers. See the NoTxnBlock constant for the list.
func noTxnBlock(n *pg_query.Node) bool {
	switch s := n.Node.(type) {
	case *pg_query.Node_VacuumStmt:
		// VACUUM, VACUUM ANALYZE; plain ANALYZE is allowed in a block.
		return s.VacuumStmt.IsVacuumcmd
	case *pg_query.Node_CreatedbStmt, *pg_query.Node_DropdbStmt,
		*pg_query.Node_CreateTableSpaceStmt, *pg_query.Node_DropTableSpaceStmt,
		*pg_query.Node_AlterSystemStmt, *pg_query.Node_DropSubscriptionStmt:
		return true
	case *pg_query.Node_AlterDatabaseStmt:
		// ALTER DATABASE … SET TABLESPACE moves files (movedb).
		return hasAnyOption(s.AlterDatabaseStmt.Options, "tablespace")
	case *pg_query.Node_IndexStmt:
		return s.IndexStmt.Concurrent
	case *pg_query.Node_DropStmt:
		return s.DropStmt.Concurrent
	case *pg_query.Node_ReindexStmt:
		switch s.ReindexStmt.Kind {
		case pg_query.ReindexObjectType_REINDEX_OBJECT_SCHEMA,
			pg_query.ReindexObjectType_REINDEX_OBJECT_SYSTEM,
			pg_query.ReindexObjectType_REINDEX_OBJECT_DATABASE:
			return true
		}
		return hasOption(s.ReindexStmt.Params, "concurrently")
	case *pg_query.Node_ClusterStmt:
		// CLUSTER without a table reclusters every table, each in its own
		// transaction. (CLUSTER of a partitioned table is refused too, but
		// that takes the catalog to know.)
		return s.ClusterStmt.Relation == nil
	case *pg_query.Node_AlterTableStmt:
		for _, c := range s.AlterTableStmt.Cmds {
			if c.GetAlterTableCmd().GetDef().GetPartitionCmd().GetConcurrent() {
				return true // DETACH PARTITION … CONCURRENTLY
			}
		}
	case *pg_query.Node_CreateSubscriptionStmt:
		// create_slot defaults to true, and connect = false implies false.
		o := s.CreateSubscriptionStmt.Options
		return !optionIsFalse(o, "connect") && !optionIsFalse(o, "create_slot")
	case *pg_query.Node_AlterSubscriptionStmt:
		switch s.AlterSubscriptionStmt.Kind {
		case pg_query.AlterSubscriptionType_ALTER_SUBSCRIPTION_REFRESH:
			return true
		case pg_query.AlterSubscriptionType_ALTER_SUBSCRIPTION_SET_PUBLICATION,
			pg_query.AlterSubscriptionType_ALTER_SUBSCRIPTION_ADD_PUBLICATION,
			pg_query.AlterSubscriptionType_ALTER_SUBSCRIPTION_DROP_PUBLICATION:
			return !optionIsFalse(s.AlterSubscriptionStmt.Options, "refresh")
		}
	}
	return false
}

// hasAnyOption reports whether a DefElem list has an option called name,
// whatever its value.
func hasAnyOption(opts []*pg_query.Node, name string) bool {
	for _, o := range opts {
		if d := o.GetDefElem(); d != nil && d.Defname == name {
			return true
		}
	}
	return false
}
