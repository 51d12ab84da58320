package gate

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// TableRef names a table (or other relation) as written in a statement, after
// PostgreSQL's identifier rules: unquoted names folded to lower case, quoted
// names exact. Schema is "" when the name is unqualified; resolving it
// through search_path is the caller's business. A catalog (database) prefix
// is dropped.
type TableRef struct {
	Schema string
	Name   string
}

// String returns "schema.name", or "name" when unqualified. It does not
// quote: it is for matching against configured names and for messages.
func (t TableRef) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Statement is the analysis of one statement of a Query string.
type Statement struct {
	Kind Kind

	// Text is this statement's own text: the parser's span for it with
	// surrounding white space trimmed, without the terminating ';'. It
	// includes comments that lead the statement.
	Text string

	// Start and End delimit the statement's span in the query text, in
	// bytes, as PostgreSQL's parser reports it: Start is 0 or just past the
	// previous statement's ';', so text injected at Start runs before this
	// statement and after the previous one.
	Start, End int

	// Name is the savepoint name (Savepoint, RollbackTo, Release), the
	// prepared statement name (PREPARE, EXECUTE, DEALLOCATE; "" for
	// DEALLOCATE ALL), the cursor name (DECLARE, FETCH, MOVE, CLOSE; "" for
	// CLOSE ALL) or the global transaction id (PREPARE TRANSACTION, COMMIT
	// PREPARED, ROLLBACK PREPARED). Empty otherwise.
	Name string

	// ReadOnly is set for BEGIN READ ONLY, START TRANSACTION READ ONLY and
	// SET TRANSACTION READ ONLY. A transaction can also be read-only through
	// default_transaction_read_only, which the text does not show; the check
	// SQL should consult transaction_read_only on the server.
	ReadOnly bool

	// Chain is set for COMMIT AND CHAIN and ROLLBACK AND CHAIN: a new
	// transaction block begins at once.
	Chain bool

	// Writes lists the tables the statement writes, without duplicates, the
	// statement's own target first: INSERT/UPDATE/DELETE/MERGE targets (also inside a
	// data-modifying WITH and under EXPLAIN ANALYZE), TRUNCATE, COPY … FROM,
	// SELECT … INTO and CREATE TABLE/MATERIALIZED VIEW … AS targets, and the
	// relations of DDL: CREATE TABLE (and its INHERITS/PARTITION OF parents),
	// ALTER TABLE (and partitions attached or detached, parents of INHERIT
	// and NO INHERIT), DROP TABLE/VIEW/
	// MATERIALIZED VIEW/FOREIGN TABLE/SEQUENCE/INDEX, CREATE INDEX/TRIGGER/
	// RULE/POLICY, ALTER POLICY, RENAME, SET SCHEMA, CLUSTER, REINDEX TABLE,
	// REFRESH MATERIALIZED VIEW, CREATE VIEW, CREATE/ALTER SEQUENCE, GRANT/
	// REVOKE on tables. Nil when none. What a function, procedure, DO block or
	// EXECUTE writes is not visible and not listed.
	Writes []TableRef

	// TouchesFence is set when the statement may write, lock or alter
	// anything in schema fence. Conservative: any reference to schema fence
	// counts except reading fence.hwm in a SELECT (also under EXPLAIN,
	// DECLARE or COPY … TO) without FOR UPDATE/SHARE. That covers DML and
	// DDL on fence objects, fence.* function and type references, DROP/
	// ALTER/GRANT/COMMENT … SCHEMA fence, CREATE SCHEMA fence, SET SCHEMA
	// fence, references inside BEGIN ATOMIC bodies, rules and PREPAREd
	// statements, a DO block or a string function body whose text mentions
	// "fence" in any case (even as part of a word), and SET search_path or
	// set_config('search_path', …) to a value that mentions fence or is not a
	// constant. Not covered: unqualified names resolved through a search_path
	// set at startup or in a role's defaults, and what functions do when
	// called; privileges on the fence schema are the backstop (internal/fencestore).
	TouchesFence bool

	// SetsFenceSetting is set when the statement may change
	// lock.fencing_token or lock.resource: SET [LOCAL] or RESET of either
	// (names compared case-insensitively, as PostgreSQL does), RESET ALL,
	// DISCARD ALL, a DO block (its body is opaque), SQL-level EXECUTE (the
	// prepared statement is not visible), or any call of set_config anywhere
	// in the tree that runs now (not in a function body or a PREPAREd
	// statement) whose first argument is not a constant naming some other
	// parameter. Functions and procedures that set them internally are not
	// visible.
	SetsFenceSetting bool
	// HandOver is set for the one form of statement that may set the
	// fencing settings without a check first: SELECT of nothing but
	// pg_catalog.set_config calls with uncast literal arguments, no FROM,
	// WHERE or WITH.
	// A new holder hands over with it while the session still carries the
	// old token; anything more might read or write under the old one.
	HandOver bool

	// Opaque is set for statements that run code the text does not show:
	// DO, CALL, and SQL EXECUTE (whose statement the session looks up).
	// They may change the fencing settings, end transactions (a procedure
	// may COMMIT) or write anything.
	Opaque bool

	// SetsLexing is set when the statement may change a setting that
	// changes how the server reads query text: standard_conforming_strings
	// or client_encoding (SET, SET NAMES, RESET, RESET ALL, DISCARD ALL, or
	// set_config with that name or a name that is not a constant).
	SetsLexing bool

	// Registry is what the statement does to the session's prepared
	// statements and cursors, when it runs.
	Registry RegistryChange

	// Local is set for SET LOCAL (and RESET is never local).
	Local bool

	// FenceLocal has a bit (fenceToken, fenceResource) for each fencing
	// setting the statement sets for the current transaction only: SET
	// LOCAL to a value, or a SELECT of nothing but set_config calls with
	// constant names and a constant true is_local. FenceReset has one for
	// each it sets back to the server's default (RESET, SET … TO DEFAULT,
	// RESET ALL, DISCARD ALL). FenceSession: the statement may set one
	// for the rest of the session (SET without LOCAL, any other
	// set_config form); opaque code is not counted here.
	FenceLocal, FenceReset uint8
	FenceSession           bool
	// FenceParam: a set_config of FenceLocal takes its value from a
	// parameter, which may be NULL: the server then resets the setting for
	// the transaction to the connection's default, not to a value the
	// transaction set. fenceParams has bit n-1 set for each such $n; 0
	// when one is past $64.
	FenceParam  bool
	fenceParams uint64
	// fenceExact: FenceLocal comes from SET LOCAL, or from set_config calls
	// that can be only PostgreSQL's set_config(text, text, boolean)
	// whatever the search_path (exactSetConfigs). See setsForTxnOnly.
	fenceExact bool

	// Hold is set for DECLARE … WITH HOLD: the cursor outlives the
	// transaction that declared it, once that transaction commits.
	Hold bool

	// PreparesTxn is set for PREPARE TRANSACTION: the transaction ends
	// for the session but keeps its locks until COMMIT or ROLLBACK
	// PREPARED.
	PreparesTxn bool

	// NeedsTxnBlock is set for statements the server refuses outside a
	// transaction block, running nothing: DECLARE without WITH HOLD, LOCK.
	NeedsTxnBlock bool

	// TxnSetting is set for SET TRANSACTION … and SET SESSION
	// CHARACTERISTICS AS TRANSACTION …, which must come before any query of
	// their transaction.
	TxnSetting bool

	// CopyFrom is set for COPY … FROM (STDIN, a file or a program).
	CopyFrom bool
	// CopyIn is set for COPY … FROM STDIN: the server then reads copy data
	// from the client (COPY-in mode) and takes any other message sent
	// before the client's CopyDone or CopyFail for bad copy data, so the
	// gate must inject nothing behind it (see Session.endUnit).
	CopyIn bool

	// Prepared is, for PREPARE name AS statement, the analysis of that
	// statement (its Text, Start and End are those of the PREPARE; its
	// Directives are PREPARE's). Nil for every other statement.
	Prepared *Statement

	// poolUnsupported names what the statement does that a transaction
	// pool cannot keep per client, refused under Config.Pooled; poolSet is
	// its session-level change of the fencing settings, which Config.Pooled
	// keeps in the session (see pool.go).
	poolUnsupported string
	poolSet         *poolSet

	// recalled: an opaque stand-in (see Session.opaqueRunOf) whose
	// Directives are those the statement carried when the proxy last knew
	// it; unreadable: such a statement's comments could not be read again.
	recalled, unreadable bool
	// execName: for CREATE TABLE … AS EXECUTE, the prepared statement
	// it runs.
	execName string

	// Directives are read from the comments within this statement's span;
	// for a query of one statement, from comments anywhere in the text. A
	// comment after the last statement's terminating ';' of a
	// multi-statement query belongs to no statement's span and applies to
	// all of them.
	Directives Directives
}

// Analysis is the result of analysing one Query string: its statements in
// order. A string of only white space and comments has no statements (the
// server answers it with EmptyQueryResponse).
type Analysis struct {
	Statements []Statement
}

// Analyze parses sql, a simple-protocol Query string or an extended-protocol
// Parse message's text, with PostgreSQL's own parser and classifies each
// statement in it. It is pure and safe for concurrent use; it parses every
// time (use an Analyzer to memoize). A text longer than safeParseBytes is
// parsed without the bulk of its long constant lists and literals (see
// reductions); a syntax error in it then carries no Position.
//
// Errors: *ParseError when PostgreSQL would reject the text as a syntax
// error (or it contains a NUL byte); *TokenError or *DirectiveError when a
// statement's comments carry a malformed or conflicting directive (the whole
// string is then refused: SQLSTATE 22023).
func Analyze(sql string) (*Analysis, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return nil, &ParseError{Message: "query text contains a NUL byte"}
	}
	text, edits, err := prepare(sql)
	if err != nil {
		return nil, err
	}
	tree, err := pg_query.Parse(text)
	if err != nil {
		pe := newParseError(err)
		if len(edits) > 0 {
			pe.Position = 0 // a position in the reduced text
		}
		return nil, pe
	}
	a := &Analysis{Statements: make([]Statement, len(tree.Stmts))}
	spans := offsets{edits: edits}
	for i, raw := range tree.Stmts {
		start, end := spans.orig(int(raw.StmtLocation)), len(sql)
		if raw.StmtLen > 0 {
			end = spans.orig(int(raw.StmtLocation + raw.StmtLen))
		}
		if start < 0 || start > end || end > len(sql) {
			return nil, &ParseError{Message: "parser returned a statement outside the text"}
		}
		st := classify(raw.Stmt)
		st.Text, st.Start, st.End = strings.TrimSpace(sql[start:end]), start, end
		if st.Prepared != nil {
			st.Prepared.Text, st.Prepared.Start, st.Prepared.End = st.Text, start, end
		}
		a.Statements[i] = st
	}
	if err := a.attachDirectives(sql); err != nil {
		return nil, err
	}
	return a, nil
}

// attachDirectives reads the comments of sql and gives each statement the
// directives of the comments in its span.
func (a *Analysis) attachDirectives(sql string) error {
	if len(a.Statements) == 0 || !mayHaveDirectives(sql) {
		return nil
	}
	comments, err := scanComments(sql)
	if err != nil {
		return err
	}
	builders := make([]directiveBuilder, len(a.Statements))
	for _, c := range comments {
		text := sql[c.start:c.end]
		owner := a.owner(c)
		for i := range builders {
			if owner < 0 || owner == i {
				if err := builders[i].addComment(text); err != nil {
					return err
				}
			}
		}
	}
	for i := range a.Statements {
		a.Statements[i].Directives = builders[i].d
		if p := a.Statements[i].Prepared; p != nil {
			p.Directives = builders[i].d
		}
	}
	return nil
}

// owner returns the index of the statement whose span holds comment c, or
// -1 when c belongs to all of them (a single statement, or a comment past the
// last statement).
func (a *Analysis) owner(c span) int {
	if len(a.Statements) == 1 {
		return -1
	}
	for i, st := range a.Statements {
		if c.start >= st.Start && c.end <= st.End {
			return i
		}
	}
	return -1
}

// classify analyses one statement's parse tree.
func classify(n *pg_query.Node) Statement {
	var w walker
	w.walk(n.ProtoReflect())
	var st Statement
	st.Kind = classifyRoot(n, &w, &st)
	st.Writes = dedupe(append(w.writes, ddlWrites(n)...))
	st.SetsFenceSetting = st.SetsFenceSetting || w.setsFence
	st.FenceSession = st.SetsFenceSetting && !st.Opaque && !w.opaque && !fenceScoped(n, &st)
	st.SetsLexing = st.SetsLexing || w.setsLexing
	st.Opaque = st.Opaque || w.opaque
	st.TouchesFence = st.TouchesFence || w.fenceOther || touchesFenceRels(&w, st.Kind == Read && n.GetLockStmt() == nil)
	classifyPool(n, &w, &st)
	if st.Prepared != nil {
		// PREPARE runs nothing: judge the prepared statement on its own, so
		// that preparing a plain read of fence.hwm is as fine as running it.
		st.TouchesFence = st.Prepared.TouchesFence
	}
	return st
}

// touchesFenceRels applies the one exception to "any reference to schema
// fence counts": reading fence.hwm in a plain read without row locks.
func touchesFenceRels(w *walker, plainRead bool) bool {
	for _, r := range w.fenceRels {
		if r != "hwm" || !plainRead || w.locking || w.anyDML {
			return true
		}
	}
	return false
}

// classifyRoot returns the Kind of the statement at the root of a parse tree
// and fills the fields of st that depend on the statement type.
func classifyRoot(n *pg_query.Node, w *walker, st *Statement) Kind {
	switch s := n.Node.(type) {
	case *pg_query.Node_SelectStmt:
		if s.SelectStmt.IntoClause != nil || w.dml > 0 {
			return Write
		}
		st.HandOver = isHandOver(s.SelectStmt)
		return Read
	case *pg_query.Node_CreateTableAsStmt:
		// CREATE TABLE … AS EXECUTE p: p runs, with the directives of its
		// comment (see Session.executedDirectives).
		if ex := s.CreateTableAsStmt.GetQuery().GetExecuteStmt(); ex != nil {
			st.execName = ex.Name
		}
		return Write
	case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt,
		*pg_query.Node_MergeStmt, *pg_query.Node_TruncateStmt:
		return Write
	case *pg_query.Node_ExplainStmt:
		if hasOption(s.ExplainStmt.Options, "analyze") {
			return classifyRoot(s.ExplainStmt.Query, w, st)
		}
		return Read
	case *pg_query.Node_CopyStmt:
		return classifyCopy(s.CopyStmt, w, st)
	case *pg_query.Node_DeclareCursorStmt:
		st.Name = s.DeclareCursorStmt.Portalname
		st.Registry = RegDeclare
		st.Hold = s.DeclareCursorStmt.Options&cursorOptHold != 0
		st.NeedsTxnBlock = !st.Hold
		if w.dml > 0 {
			return Write
		}
		return Read
	case *pg_query.Node_FetchStmt:
		// FETCH and MOVE run the portal's statement (a cursor's query, or
		// a protocol portal's): it is judged as an Execute of the portal.
		// Opaque stands for that statement while the session does not
		// know it (see Session.decide).
		st.Name = s.FetchStmt.Portalname
		st.Opaque, st.Registry = true, RegFetch
		return Read
	case *pg_query.Node_LockStmt:
		st.NeedsTxnBlock = true
		return Read
	case *pg_query.Node_ClosePortalStmt:
		st.Name = s.ClosePortalStmt.Portalname
		st.Registry = RegCloseCursor
		if st.Name == "" {
			st.Registry = RegCloseAllCursors
		}
		return Other
	case *pg_query.Node_PrepareStmt:
		st.Name = s.PrepareStmt.Name
		st.Registry = RegPrepare
		if s.PrepareStmt.Query != nil {
			p := classify(s.PrepareStmt.Query)
			st.Prepared = &p
		}
		return Other
	case *pg_query.Node_ExecuteStmt:
		// The prepared statement is not visible here: it may write, and it
		// may call set_config.
		st.Name = s.ExecuteStmt.Name
		st.Opaque, st.Registry = true, RegExecute
		return Write
	case *pg_query.Node_DeallocateStmt:
		st.Name = s.DeallocateStmt.Name
		st.Registry = RegDeallocate
		if s.DeallocateStmt.Isall {
			st.Registry = RegDeallocateAll
		}
		return Other
	case *pg_query.Node_ListenStmt, *pg_query.Node_UnlistenStmt,
		*pg_query.Node_CheckPointStmt, *pg_query.Node_LoadStmt:
		return Other
	case *pg_query.Node_VariableSetStmt:
		classifySet(s.VariableSetStmt, st)
		return Setting
	case *pg_query.Node_VariableShowStmt, *pg_query.Node_ConstraintsSetStmt:
		return Setting
	case *pg_query.Node_DiscardStmt:
		if s.DiscardStmt.Target == pg_query.DiscardMode_DISCARD_ALL {
			st.SetsFenceSetting, st.SetsLexing, st.Registry = true, true, RegDiscardAll
			return DiscardAll
		}
		return Setting
	case *pg_query.Node_TransactionStmt:
		return classifyTransaction(s.TransactionStmt, st)
	}
	if noTxnBlock(n) {
		return NoTxnBlock
	}
	return Write
}

// isHandOver reports whether sel is SELECT pg_catalog.set_config(a, b, c)
// [, …] and nothing else, each argument an uncast literal.
func isHandOver(sel *pg_query.SelectStmt) bool {
	if len(sel.FromClause) > 0 || sel.WhereClause != nil || sel.WithClause != nil || sel.Op != pg_query.SetOperation_SETOP_NONE ||
		len(sel.TargetList) == 0 || len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.ValuesLists) > 0 ||
		len(sel.SortClause) > 0 || sel.LimitCount != nil || sel.LimitOffset != nil || len(sel.LockingClause) > 0 || len(sel.DistinctClause) > 0 {
		return false
	}
	for _, t := range sel.TargetList {
		fc := t.GetResTarget().GetVal().GetFuncCall()
		// Schema-qualified: an unqualified name may resolve to a user's
		// overload. Uncast literals only: a cast (to a domain, say) or a
		// parameter (typed at Parse) may run code.
		if fc == nil || len(fc.Funcname) != 2 || fc.Funcname[0].GetString_().GetSval() != "pg_catalog" ||
			fc.Funcname[1].GetString_().GetSval() != "set_config" || len(fc.Args) != 3 || fc.AggFilter != nil || fc.Over != nil {
			return false
		}
		for _, a := range fc.Args {
			if a.GetAConst() == nil {
				return false
			}
		}
	}
	return true
}

// classifyCopy handles COPY: FROM writes the table; TO reads it, or runs its
// query, which may be a data-modifying statement with RETURNING.
func classifyCopy(c *pg_query.CopyStmt, w *walker, st *Statement) Kind {
	if c.IsFrom {
		st.CopyFrom = true
		st.CopyIn = c.Filename == "" && !c.IsProgram
		return Write
	}
	if w.dml > 0 {
		return Write
	}
	return Read
}

// classifySet handles SET, SET LOCAL, RESET, RESET ALL and the SET forms
// with several values (SET TRANSACTION, SET SESSION CHARACTERISTICS).
func classifySet(s *pg_query.VariableSetStmt, st *Statement) {
	st.Local = s.IsLocal
	switch s.Kind {
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		st.SetsFenceSetting, st.SetsLexing = true, true
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		// SET TRANSACTION …; SET SESSION CHARACTERISTICS AS TRANSACTION …
		st.TxnSetting = true
		if s.Name == "TRANSACTION" && hasOption(s.Args, "transaction_read_only") {
			st.ReadOnly = true
		}
	default:
		if isFenceSetting(s.Name) {
			st.SetsFenceSetting = true
		}
		if isLexingSetting(s.Name) {
			st.SetsLexing = true
		}
		if strings.EqualFold(s.Name, "search_path") {
			for _, a := range s.Args {
				if v, ok := constString(a); !ok || mentionsFence(v) {
					st.TouchesFence = true
				}
			}
		}
	}
}

// classifyTransaction handles BEGIN, COMMIT, ROLLBACK, savepoints and
// two-phase commit.
func classifyTransaction(t *pg_query.TransactionStmt, st *Statement) Kind {
	st.Chain = t.Chain
	switch t.Kind {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		st.ReadOnly = hasOption(t.Options, "transaction_read_only")
		return Begin
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT:
		return Commit
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		return Rollback
	case pg_query.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		st.Name = t.SavepointName
		return Savepoint
	case pg_query.TransactionStmtKind_TRANS_STMT_RELEASE:
		st.Name = t.SavepointName
		return Release
	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		st.Name = t.SavepointName
		return RollbackTo
	case pg_query.TransactionStmtKind_TRANS_STMT_PREPARE:
		st.Name, st.PreparesTxn = t.Gid, true
		return Commit
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT_PREPARED, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_PREPARED:
		st.Name = t.Gid
		return NoTxnBlock
	}
	return Other
}

// dedupe removes repeated table references, keeping the first of each, in
// time linear in len(refs): a client may name tens of thousands of tables
// in one TRUNCATE.
func dedupe(refs []TableRef) []TableRef {
	if len(refs) < 2 {
		return refs
	}
	seen := make(map[TableRef]struct{}, len(refs))
	out := refs[:0:0]
	for _, r := range refs {
		if _, ok := seen[r]; !ok {
			seen[r] = struct{}{}
			out = append(out, r)
		}
	}
	return out
}

// RegistryChange is what a statement does to the session's prepared
// statements and cursors (which share their namespaces with the protocol's
// statements and portals).
type RegistryChange uint8

const (
	RegNone            RegistryChange = iota
	RegPrepare                        // PREPARE name AS …
	RegDeallocate                     // DEALLOCATE name
	RegDeallocateAll                  // DEALLOCATE ALL
	RegDeclare                        // DECLARE name CURSOR …
	RegCloseCursor                    // CLOSE name
	RegCloseAllCursors                // CLOSE ALL
	RegDiscardAll                     // DISCARD ALL: statements and cursors
	RegExecute                        // EXECUTE name: runs a prepared statement (changes nothing)
	RegFetch                          // FETCH or MOVE name: runs a portal (changes nothing)
)

// cursorOptHold is CURSOR_OPT_HOLD of PostgreSQL's parsenodes.h: the
// DeclareCursorStmt option bit of WITH HOLD.
const cursorOptHold = 0x0020

// Bits of Statement.FenceLocal and FenceReset.
const (
	fenceToken    uint8 = 1 << iota // lock.fencing_token
	fenceResource                   // lock.resource
)

// fenceBit returns the bit of a fencing setting's name, 0 for other names.
// Names compare as PostgreSQL compares them (guc_name_compare): ignoring
// the case of ASCII letters only. strings.EqualFold would also take the
// Kelvin sign for 'k' and the long s for 's', and grant trust in the real
// setting for a SET LOCAL of a placeholder the server keeps apart.
func fenceBit(name string) uint8 {
	switch {
	case equalFoldASCII(name, settingToken):
		return fenceToken
	case equalFoldASCII(name, settingResource):
		return fenceResource
	}
	return 0
}

// equalFoldASCII reports whether a and b are equal ignoring the case of
// ASCII letters.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// fenceScoped reports whether every change n makes to the fencing settings
// is known to last only for the current transaction, or to set them back
// to the server's default, and records which in st.
func fenceScoped(n *pg_query.Node, st *Statement) bool {
	switch s := n.Node.(type) {
	case *pg_query.Node_VariableSetStmt:
		v := s.VariableSetStmt
		switch v.Kind {
		case pg_query.VariableSetKind_VAR_RESET_ALL:
			st.FenceReset = fenceToken | fenceResource
			return true
		case pg_query.VariableSetKind_VAR_RESET, pg_query.VariableSetKind_VAR_SET_DEFAULT:
			st.FenceReset = fenceBit(v.Name)
			return true
		case pg_query.VariableSetKind_VAR_SET_VALUE:
			st.FenceLocal, st.fenceExact = fenceBit(v.Name), v.IsLocal
			return v.IsLocal
		}
		return false
	case *pg_query.Node_DiscardStmt:
		st.FenceReset = fenceToken | fenceResource
		return true
	case *pg_query.Node_SelectStmt:
		bits, params, ok := localSetConfigs(s.SelectStmt)
		st.FenceLocal, st.FenceParam = bits, params != nil && bits != 0
		st.fenceParams = paramBits(params)
		st.fenceExact = ok && exactSetConfigs(s.SelectStmt)
		return ok
	}
	return false
}

// localSetConfigs returns the fencing settings set by sel when sel is a
// SELECT of nothing but set_config(name, value, is_local) calls of
// PostgreSQL's set_config (unqualified or pg_catalog.set_config), each
// with a constant name, a value that is a non-null constant or a
// parameter, and a constant true is_local (set for the current transaction
// only), evaluated once (no LIMIT, OFFSET or FETCH, which may evaluate
// none) and with no other clause (ORDER BY, DISTINCT ON and WINDOW hold
// expressions of their own, which this does not read); and ok false for
// any other statement; params are the numbers of the parameters that are
// values of fencing settings. A value computed by other code could itself
// set a setting for the session; a NULL value resets the setting to the
// session's default, which the transaction did not set (a parameter may be
// NULL: see FenceParam).
func localSetConfigs(sel *pg_query.SelectStmt) (bits uint8, params []int32, ok bool) {
	if len(sel.FromClause) > 0 || sel.WhereClause != nil || sel.WithClause != nil || sel.Op != pg_query.SetOperation_SETOP_NONE ||
		len(sel.TargetList) == 0 || len(sel.ValuesLists) > 0 || len(sel.GroupClause) > 0 || sel.HavingClause != nil ||
		sel.LimitCount != nil || sel.LimitOffset != nil ||
		len(sel.SortClause) > 0 || len(sel.DistinctClause) > 0 || len(sel.WindowClause) > 0 || len(sel.LockingClause) > 0 || sel.IntoClause != nil {
		return 0, nil, false
	}
	for _, t := range sel.TargetList {
		fc := t.GetResTarget().GetVal().GetFuncCall()
		if fc == nil || !isCatalogFunc(fc.Funcname, "set_config") || len(fc.Args) != 3 || fc.AggFilter != nil || fc.Over != nil ||
			fc.AggStar || fc.FuncVariadic || len(fc.AggOrder) > 0 {
			return 0, nil, false
		}
		name, okName := constString(fc.Args[0])
		plain, param := plainValue(fc.Args[1])
		if !okName || !plain || !constTrue(fc.Args[2]) {
			return 0, nil, false
		}
		if b := fenceBit(name); b != 0 {
			bits |= b
			if param != 0 {
				params = append(params, param)
			}
		}
	}
	return bits, params, true
}

// exactSetConfigs reports whether each set_config of sel, a statement
// localSetConfigs accepts, can be only PostgreSQL's set_config(text, text,
// boolean) whatever the search_path: schema-qualified
// (pg_catalog.set_config, as the hand-over must be), its name and value
// string literals or parameters cast to nothing but pg_catalog.text, its
// is_local the literal true. An unqualified name, an integer or boolean
// value, or 'true' as is_local may pick a user's function, which may set
// the setting for the session.
func exactSetConfigs(sel *pg_query.SelectStmt) bool {
	for _, t := range sel.TargetList {
		fc := t.GetResTarget().GetVal().GetFuncCall()
		if len(fc.Funcname) != 2 || !exactText(fc.Args[0]) || !exactText(fc.Args[1]) || fc.Args[2].GetAConst().GetBoolval() == nil {
			return false
		}
	}
	return true
}

// exactText reports whether n is a string literal or a parameter, cast to
// nothing but the schema-qualified pg_catalog.text.
func exactText(n *pg_query.Node) bool {
	n, ok := uncastText(n, true)
	return ok && (n.GetParamRef() != nil || n.GetAConst().GetSval() != nil)
}

// paramBits returns the parameters numbered in params as bits (bit n-1 for
// $n), or 0 when one is past $64.
func paramBits(params []int32) uint64 {
	var m uint64
	for _, n := range params {
		if n < 1 || n > 64 {
			return 0
		}
		m |= 1 << (n - 1)
	}
	return m
}

// isCatalogFunc reports whether names is the unqualified or
// pg_catalog-qualified name fn (a function's, or a type's), fn in lower
// case, as the parser folds an unquoted name: a quoted "SET_CONFIG" or
// "TEXT" is another object, a user's, whose code may run.
func isCatalogFunc(names []*pg_query.Node, fn string) bool {
	switch len(names) {
	case 1:
		return names[0].GetString_().GetSval() == fn
	case 2:
		return names[0].GetString_().GetSval() == "pg_catalog" && names[1].GetString_().GetSval() == fn
	}
	return false
}

// plainValue reports whether n is a non-null constant or a parameter (its
// number, param), possibly cast to PostgreSQL's text: nothing that runs code
// (a cast to another type may call a function of the user's).
func plainValue(n *pg_query.Node) (ok bool, param int32) {
	if n, ok = uncastText(n, false); !ok {
		return false, 0
	}
	if p := n.GetParamRef(); p != nil {
		if p.Number < 1 {
			return true, -1 // no such parameter (the server refuses it): still one
		}
		return true, p.Number
	}
	c := n.GetAConst()
	return c != nil && !c.Isnull, 0
}

// constTrue reports whether n is a constant that reads as boolean true:
// true, or a string such as 'true', 'on' or 't'.
func constTrue(n *pg_query.Node) bool {
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return false
	}
	if b := c.GetBoolval(); b != nil {
		return b.Boolval
	}
	if v, ok := constString(n); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "t", "tr", "tru", "true", "y", "ye", "yes", "on", "1":
			return true
		}
	}
	return false
}
