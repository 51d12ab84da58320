package gate

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Transaction pool mode (Config.Pooled): pgwire lends a shared server
// connection to a client for one transaction, or one autocommit unit, so
// nothing a client leaves in the server connection's session state may be
// read by another client. Gate keeps the client's session-level fencing
// settings itself (Tracked), passes them to each check as literal
// arguments, and refuses what needs session state a pool cannot keep per
// client (0A000). Not visible, and so not refused: what a function, a
// procedure (CALL) or a DO block does inside; such code runs as opaque
// code does in every mode (checked first, probed after), and a session
// setting it leaves behind is on the shared connection.

// Tracked is a pooled client's session-level fencing state, kept by gate
// and never on a server connection.
type Tracked struct {
	Token    int64  // 0: none
	Resource string // "": none
}

// reportedSettings are the settings PostgreSQL 15 reports in
// ParameterStatus (GUC_REPORT) that a client can SET: pgwire restores them
// per client on a lent connection. The other reported ones (server_version,
// server_encoding, integer_datetimes, in_hot_standby, is_superuser) are not
// settable, and session_authorization is refused as a role change.
var reportedSettings = []string{
	"application_name", "client_encoding", "datestyle", "default_transaction_read_only",
	"intervalstyle", "standard_conforming_strings", "timezone",
}

func isReported(name string) bool {
	for _, r := range reportedSettings {
		if equalFoldASCII(name, r) {
			return true
		}
	}
	return false
}

// poolSet is a session-level SET, RESET or SET … TO DEFAULT of
// lock.fencing_token or lock.resource (or RESET ALL), which pooled mode
// keeps in Tracked instead of on the server connection.
type poolSet struct {
	bits  uint8  // the settings it changes (fenceToken, fenceResource)
	reset bool   // it sets them back to their startup values; else to value
	value string // SET to a value: the value
	name  string // the name as written, for the replacement
	err   error  // the value is not a valid token
}

// replacement returns the statement sent upstream in place of a SET of a
// value, so that no value reaches the shared connection; "" for a reset,
// which goes upstream as written (its tag, RESET or SET, stays).
func (p *poolSet) replacement() string {
	if p == nil || p.reset {
		return ""
	}
	return "SET " + quoteIdentPath(p.name) + " TO DEFAULT"
}

// quoteIdentPath quotes each dot-separated part of a setting name.
func quoteIdentPath(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// classifyPool fills st.poolSet and st.poolUnsupported for the statement at
// the root of a parse tree; w is the walker that walked it.
func classifyPool(n *pg_query.Node, w *walker, st *Statement) {
	st.poolUnsupported = poolUnsupported(n)
	if st.poolUnsupported == "" {
		st.poolUnsupported = w.poolUnsafe
	}
	if v := n.GetVariableSetStmt(); v != nil && !v.IsLocal {
		st.poolSet = classifyPoolSet(v)
	}
}

// classifyPoolSet returns the poolSet of a session-level VariableSetStmt,
// nil when it does not change the fencing settings or is a form that
// cannot be kept (SET … FROM CURRENT, a value that is not one constant).
func classifyPoolSet(v *pg_query.VariableSetStmt) *poolSet {
	switch v.Kind {
	case pg_query.VariableSetKind_VAR_RESET_ALL:
		return &poolSet{bits: fenceToken | fenceResource, reset: true}
	case pg_query.VariableSetKind_VAR_RESET, pg_query.VariableSetKind_VAR_SET_DEFAULT:
		if b := fenceBit(v.Name); b != 0 {
			return &poolSet{bits: b, reset: true, name: v.Name}
		}
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		b := fenceBit(v.Name)
		if b == 0 || len(v.Args) != 1 {
			return nil
		}
		val, ok := setValue(v.Args[0])
		if !ok {
			return nil
		}
		p := &poolSet{bits: b, value: val, name: v.Name}
		if b == fenceToken && val != "" {
			_, p.err = ParseToken(val)
		}
		return p
	}
	return nil
}

// setValue returns the text a SET's constant argument sets: a string, an
// integer or a bare word, as the server stores it for a placeholder; not
// a long literal that a large text's parse shortened.
func setValue(n *pg_query.Node) (string, bool) {
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return "", false
	}
	switch {
	case c.GetSval() != nil:
		return c.GetSval().Sval, !maybeShortened(c.GetSval().Sval) // see shortLiteral
	case c.GetIval() != nil:
		return strconv.FormatInt(int64(c.GetIval().Ival), 10), true
	case c.GetFval() != nil:
		return c.GetFval().Fval, true
	}
	return "", false
}

// poolUnsupported names what n does that needs session state a pool
// cannot keep per client ("" for nothing of the kind).
func poolUnsupported(n *pg_query.Node) string {
	switch s := n.Node.(type) {
	case *pg_query.Node_ListenStmt:
		return "LISTEN"
	case *pg_query.Node_PrepareStmt:
		return "PREPARE"
	case *pg_query.Node_ExecuteStmt:
		return "EXECUTE of a prepared statement"
	case *pg_query.Node_DeallocateStmt:
		return "DEALLOCATE"
	case *pg_query.Node_DiscardStmt:
		switch s.DiscardStmt.Target {
		case pg_query.DiscardMode_DISCARD_ALL:
			return "DISCARD ALL"
		case pg_query.DiscardMode_DISCARD_PLANS:
			return "DISCARD PLANS"
		}
	case *pg_query.Node_DeclareCursorStmt:
		if s.DeclareCursorStmt.Options&cursorOptHold != 0 {
			return "DECLARE … WITH HOLD"
		}
	case *pg_query.Node_LoadStmt:
		return "LOAD"
	case *pg_query.Node_CreateStmt:
		if isTempRel(s.CreateStmt.Relation) && s.CreateStmt.Oncommit != pg_query.OnCommitAction_ONCOMMIT_DROP {
			return "a temporary table without ON COMMIT DROP"
		}
	case *pg_query.Node_CreateTableAsStmt:
		if ex := s.CreateTableAsStmt.GetQuery().GetExecuteStmt(); ex != nil {
			return "EXECUTE of a prepared statement"
		}
		return tempInto(s.CreateTableAsStmt.Into)
	case *pg_query.Node_SelectStmt:
		// In a set operation the INTO is the leftmost SELECT's.
		for sel := s.SelectStmt; sel != nil; sel = sel.Larg {
			if r := tempInto(sel.IntoClause); r != "" {
				return r
			}
		}
	case *pg_query.Node_CreateSeqStmt:
		if isTempRel(s.CreateSeqStmt.Sequence) {
			return "a temporary sequence"
		}
	case *pg_query.Node_ViewStmt:
		if isTempRel(s.ViewStmt.View) {
			return "a temporary view"
		}
	case *pg_query.Node_CreateFunctionStmt:
		if isTempName(s.CreateFunctionStmt.Funcname) {
			return "a temporary function"
		}
	case *pg_query.Node_DefineStmt: // types, operators, aggregates, collations, text search
		return tempObject(isTempName(s.DefineStmt.Defnames))
	case *pg_query.Node_CreateDomainStmt:
		return tempObject(isTempName(s.CreateDomainStmt.Domainname))
	case *pg_query.Node_CreateEnumStmt:
		return tempObject(isTempName(s.CreateEnumStmt.TypeName))
	case *pg_query.Node_CreateRangeStmt:
		return tempObject(isTempName(s.CreateRangeStmt.TypeName))
	case *pg_query.Node_CompositeTypeStmt:
		return tempObject(isTempRel(s.CompositeTypeStmt.Typevar))
	case *pg_query.Node_CreateConversionStmt:
		return tempObject(isTempName(s.CreateConversionStmt.ConversionName))
	case *pg_query.Node_CreateStatsStmt:
		return tempObject(isTempName(s.CreateStatsStmt.Defnames))
	case *pg_query.Node_CreateOpClassStmt:
		return tempObject(isTempName(s.CreateOpClassStmt.Opclassname))
	case *pg_query.Node_CreateOpFamilyStmt:
		return tempObject(isTempName(s.CreateOpFamilyStmt.Opfamilyname))
	case *pg_query.Node_ExplainStmt:
		if s.ExplainStmt.GetQuery().GetExecuteStmt() != nil {
			return "EXECUTE of a prepared statement" // EXPLAIN evaluates its parameters
		}
		if hasOption(s.ExplainStmt.Options, "analyze") {
			return poolUnsupported(s.ExplainStmt.Query)
		}
	case *pg_query.Node_VariableSetStmt:
		return poolSetting(s.VariableSetStmt)
	}
	return ""
}

// poolSetting names a SET a pool cannot keep per client: one for the
// session of a setting PostgreSQL does not report (pgwire restores only
// those it reports), a role change, or a session's transaction
// characteristics. SET LOCAL, RESET and SET … TO DEFAULT (nothing is left
// that another client could read: no session-level value of those is ever
// set through the pool), and the fencing settings (see poolSet), pass.
func poolSetting(v *pg_query.VariableSetStmt) string {
	if v.IsLocal && equalFoldASCII(v.Name, "search_path") && v.Kind == pg_query.VariableSetKind_VAR_SET_VALUE {
		for _, a := range v.Args {
			if val, ok := setValue(a); !ok || containsFold(val, "pg_temp") {
				return refTempPath
			}
		}
	}
	if v.IsLocal || fenceBit(v.Name) != 0 {
		return ""
	}
	switch v.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE, pg_query.VariableSetKind_VAR_SET_CURRENT:
		switch {
		case equalFoldASCII(v.Name, "session_authorization"):
			return "SET SESSION AUTHORIZATION"
		case equalFoldASCII(v.Name, "role"):
			return "SET ROLE"
		case !isReported(v.Name) && !shortestFloatDigits(v):
			return "SET of " + v.Name + " for the session"
		}
	case pg_query.VariableSetKind_VAR_SET_MULTI:
		if v.Name != "TRANSACTION" && v.Name != "TRANSACTION SNAPSHOT" { // SET TRANSACTION …: this transaction only
			return "SET SESSION CHARACTERISTICS"
		}
	}
	return ""
}

// shortestFloatDigits reports whether v sets extra_float_digits to 1, 2
// or 3, as pgjdbc does after connecting (SET extra_float_digits = 3): since
// PostgreSQL 12 each of them prints floats in the shortest exact form, as
// the default 1 does, so the value left on a shared server connection
// changes no other client's results (pgwire accepts the same values at
// startup).
func shortestFloatDigits(v *pg_query.VariableSetStmt) bool {
	if !equalFoldASCII(v.Name, "extra_float_digits") || v.Kind != pg_query.VariableSetKind_VAR_SET_VALUE || len(v.Args) != 1 {
		return false
	}
	val, ok := setValue(v.Args[0])
	return ok && (val == "1" || val == "2" || val == "3")
}

// refTempPath names a search_path that may put pg_temp first: an
// unqualified CREATE then makes a temporary object, which outlives the
// transaction.
const refTempPath = "a search_path with pg_temp"

func tempInto(into *pg_query.IntoClause) string {
	if into != nil && isTempRel(into.Rel) && into.OnCommit != pg_query.OnCommitAction_ONCOMMIT_DROP {
		return "a temporary table without ON COMMIT DROP"
	}
	return ""
}

// isTempRel reports whether rv names a temporary relation: TEMP or
// TEMPORARY, or a name in pg_temp (or pg_temp_N).
func isTempRel(rv *pg_query.RangeVar) bool {
	return rv != nil && (rv.Relpersistence == "t" || isTempSchema(rv.Schemaname))
}

// isTempName reports whether a qualified name's schema is pg_temp (or
// pg_temp_N).
func isTempName(names []*pg_query.Node) bool {
	return len(names) > 1 && isTempSchema(names[len(names)-2].GetString_().GetSval())
}

func tempObject(temp bool) string {
	if temp {
		return "a temporary object"
	}
	return ""
}

func isTempSchema(schema string) bool {
	return strings.HasPrefix(schema, "pg_temp")
}

// poolSetConfig notes, for pooled mode, a set_config call that may set a
// setting for the session which pgwire does not restore per client: its
// is_local is not a constant true, and its name is not a constant naming
// a reported setting (the fencing settings are judged as FenceSession).
func (w *walker) poolSetConfig(n *pg_query.FuncCall) {
	if len(n.Args) > 1 {
		if name, ok := constString(n.Args[0]); ok && equalFoldASCII(name, "search_path") {
			if v, ok := constString(n.Args[1]); !ok || containsFold(v, "pg_temp") || maybeShortened(v) {
				w.poolUnsafe = refTempPath
				return
			}
		}
	}
	if len(n.Args) == 3 && constTrue(n.Args[2]) {
		return
	}
	if len(n.Args) > 0 {
		if name, ok := constString(n.Args[0]); ok && (isReported(name) || isFenceSetting(name)) {
			return
		}
	}
	w.poolUnsafe = "set_config of a setting for the session"
}

// isSessionLockFunc reports whether name is a function that takes an
// advisory lock held by the session (not the _xact_ ones, which the
// transaction holds): the lock would stay with the server connection, for
// another client. The unlock functions pass: no client can take such a
// lock through the proxy in transaction pool mode, so they find none to
// release (pg_advisory_unlock_all, in a pool's reset query, does nothing).
func isSessionLockFunc(name string) bool {
	switch strings.ToLower(name) {
	case "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared":
		return true
	}
	return false
}

// refPoolUnsupported refuses what (a statement, or what it does) that
// needs session state a transaction pool cannot keep per client.
func refPoolUnsupported(what string) refusal {
	return refusal{code: codeCannotFence,
		message: "fenceproxy: " + what + " is not supported in transaction pool mode",
		detail:  "The proxy lends a shared server connection to each transaction; session state left on it would be another client's next.",
		hint:    "Keep the state inside one transaction (SET LOCAL, ON COMMIT DROP, a cursor without HOLD), or connect to a proxy in session pool mode."}
}

// refPoolSession refuses a session-level change of lock.fencing_token or
// lock.resource that the pool cannot keep for the client: not alone in its
// unit, inside a transaction block, or a form whose value is unknown.
var refPoolSession = refusal{
	code:    codeSessionToken,
	message: "fenceproxy: lock.fencing_token and lock.resource can be set for the session here only by a SET or RESET alone in its unit, outside a transaction block",
	detail:  "The proxy runs in transaction pool mode: it keeps the session's fencing settings itself, and follows only a SET or RESET of a constant that is the only statement of its Query or Sync, or a RESET that ends a Query without transaction control or DO or CALL before it, outside a transaction block.",
	hint:    "Set them inside the transaction with SET LOCAL (or set_config(name, value, true)), or carry them in a /* fencing_token=N resource=R */ comment.",
}

// poolIdle reports whether the server confirmed that no transaction block
// is open and nothing sent is unanswered.
func (s *Session) poolIdle() bool {
	return s.slots.unitsInFlight == 0 && s.lastReady == 'I'
}

// poolAloneIn reports whether statement i of a Query's analysis a may
// change the session's fencing settings in transaction pool mode
// (poolRefusal): outside a transaction block with nothing unanswered, the
// only statement of the Query, or a RESET that ends it after statements
// that neither control the transaction nor run code the proxy cannot see.
// Such a Query runs as one implicit transaction: an error anywhere in it
// undoes the RESET, and the unit's answer says whether one came (a pool's
// reset query, such as asyncpg's "SELECT pg_advisory_unlock_all(); CLOSE
// ALL; UNLISTEN *; RESET ALL", ends so). A SET's value is taken only from
// a SET alone.
func (s *Session) poolAloneIn(a *Analysis, i int) bool {
	if s.extOpen || !s.poolIdle() {
		return false
	}
	if len(a.Statements) == 1 {
		return true
	}
	st := &a.Statements[i]
	if i != len(a.Statements)-1 || st.poolSet == nil || !st.poolSet.reset {
		return false
	}
	for j := range a.Statements[:i] {
		switch prev := &a.Statements[j]; {
		case prev.Kind != Read && prev.Kind != Write && prev.Kind != Other, prev.Opaque, prev.poolSet != nil, prev.FenceSession:
			return false
		}
	}
	return true
}

// poolRefusal returns, under Config.Pooled, the refusal of run (which st
// runs), or nil; a session-level SET or RESET of the fencing settings it
// accepts is recorded in the unit, and kept once the server answered it.
func (s *Session) poolRefusal(st, run *Statement) *refusal {
	switch {
	case s.unit.poolSet != nil:
		return &refPoolSession // the change must be alone in its unit
	case run.poolUnsupported != "" && !poolDeallocates(st, run):
		r := refPoolUnsupported(run.poolUnsupported)
		return &r
	case run.poolSet != nil && run == st:
		if err, ok := run.poolSet.err.(*TokenError); ok {
			return &refusal{code: err.SQLState(), message: "fenceproxy: " + err.Error()}
		}
		if !s.poolAlone {
			return &refPoolSession
		}
		s.unit.poolSet = run.poolSet
		return nil
	case run.FenceSession || run.poolSet != nil:
		return &refPoolSession
	case run.FenceParam && (run != st || !s.fenceArgsSet(run)):
		return &refPoolParamSet
	case run.Local && run.FenceReset != 0:
		return &refPoolLocalDefault
	}
	return nil
}

// refPoolLocalDefault refuses SET LOCAL lock.… TO DEFAULT in transaction
// pool mode: the client's server would go back to the client's startup
// value for the transaction, the shared connection to its own default; the
// proxy keeps no per-transaction memory of a reset to pass the former.
var refPoolLocalDefault = refusal{
	code:    codeSessionToken,
	message: "fenceproxy: SET LOCAL of lock.fencing_token or lock.resource TO DEFAULT cannot be fenced in transaction pool mode",
	detail:  "The shared server connection's default is not this session's startup value, which the proxy would have to pass to the checks of the rest of the transaction.",
	hint:    "SET LOCAL the value itself.",
}

// refPoolParamSet refuses set_config(lock.*, $1, true) in transaction pool
// mode unless the Bind of the portal that runs it, in the same unit, gave
// each such parameter a value: a NULL would reset the setting, for the
// transaction, to the shared connection's default, where the client's own
// server would reset it to the client's startup value (SQL EXECUTE, a
// portal bound in an earlier unit, or a Bind pgwire did not hold whole:
// the proxy does not see the value).
var refPoolParamSet = refusal{
	code:    codeSessionToken,
	message: "fenceproxy: set_config of lock.fencing_token or lock.resource with a parameter for its value cannot be fenced in transaction pool mode",
	detail:  "A NULL value would reset the setting to the shared server connection's default, not to this session's; the proxy sees the parameter's value only in a Bind sent with the Execute, before the same Sync.",
	hint:    "Pass the value as a literal (set_config('lock.fencing_token', '42', true)), use SET LOCAL, or carry it in a /* fencing_token=N resource=R */ comment.",
}

// withTracked fills in what d lacks from the session's tracked settings,
// where the transaction did not set them itself: the check then passes
// them as literal arguments and never reads the server connection's.
func (s *Session) withTracked(d Directives) Directives {
	if d.Token == 0 && s.trust&fenceToken == 0 {
		d.Token = s.tracked.Token
	}
	if d.Resource == "" && s.trust&fenceResource == 0 {
		d.Resource = s.tracked.Resource
	}
	return d
}

// poolReplacement returns, under Config.Pooled, the text sent instead of
// st, a statement of a simple Query or the text of a Parse: "" to send it
// as written. A session
// SET of a fencing setting goes without its value (poolSet); a DEALLOCATE
// of the client's statements (ALL, or a name the gate knows as the
// client's) goes as poolNoop: the server has them under names of the
// proxy's (pooled_names.go in pgwire), beside other clients', and the gate
// drops them from its registry when the server answers; the statements
// left on server connections are closed by a later setup's sweep. A
// DEALLOCATE of a name the client has not prepared goes as written, and the
// server answers 26000 as PostgreSQL would (a Parse's text is judged when
// it is sent; its Execute drops what the client's text names, once the
// server answers it). Called before statementOps.
func (s *Session) poolReplacement(st *Statement) string {
	if !s.cfg.Pooled {
		return ""
	}
	switch st.Registry {
	case RegDeallocateAll:
		return poolNoop
	case RegDeallocate:
		if _, found, wait := s.reg.lookup(regKey{name: st.Name}); found || wait {
			return poolNoop
		}
		return ""
	}
	return st.poolSet.replacement()
}

// poolNoop is a statement that does nothing, sent instead of a client's
// DEALLOCATE in transaction pool mode; the client sees its command tag,
// DO, in place of DEALLOCATE's.
const poolNoop = "DO $fence$BEGIN END$fence$"

// poolDeallocates reports whether run is a DEALLOCATE, which runs in
// transaction pool mode as poolReplacement sent it: the server never sees
// DEALLOCATE ALL, nor a name of another client's statement (the client's
// names are never the server's: pooled_names.go in pgwire).
func poolDeallocates(st, run *Statement) bool {
	return run == st && (run.Registry == RegDeallocate || run.Registry == RegDeallocateAll)
}

// poolParseText returns, under Config.Pooled, the text a Parse carries
// upstream instead of sql when sql is a SET of a fencing setting to a
// value: the server never sees the value; the Execute decides on the
// client's text, which the registry keeps. "" to send sql.
func (s *Session) poolParseText(sql string) string {
	if !s.cfg.Pooled || !s.memo.mayMatter(sql) {
		return "" // a SET of lock.* and a DEALLOCATE are texts that may matter
	}
	a, err := s.cfg.Analyzer.analyzeKnown(sql, true, &s.parsing)
	if err != nil || len(a.Statements) != 1 {
		return ""
	}
	return s.poolReplacement(&a.Statements[0])
}

// applyPoolSet keeps what a unit's accepted poolSet set, once the server
// answered the unit without an error. A reset goes back to the startup
// value, as the server's RESET does (a startup setting is its reset value).
func (s *Session) applyPoolSet(p *poolSet) {
	if p.bits&fenceToken != 0 {
		s.tracked.Token = s.startup.Token
		if !p.reset {
			s.tracked.Token, _ = ParseToken(p.value) // 0 for ""
		}
	}
	if p.bits&fenceResource != 0 {
		s.tracked.Resource, s.trackedEnc = s.startup.Resource, s.startupEnc
		if !p.reset {
			s.tracked.Resource, s.trackedEnc = p.value, s.settings.encoding
		}
	}
}

// trackedResourceUnsure reports whether the tracked resource, passed to a
// check as a literal, may read otherwise than the client wrote it: the
// server converts the check's text from the client_encoding in force, and
// a name with non-ASCII bytes written under another encoding (a SET before
// SET client_encoding; startup options, which PostgreSQL keeps as sent)
// would name another resource, with another mark.
func (s *Session) trackedResourceUnsure() bool {
	return !isASCII(s.tracked.Resource) && (s.trackedEnc != s.settings.encoding || !s.bytesAsUTF8() || s.unit.lexing)
}

// poolUnitFailed marks the unit an error answered as not changing the
// tracked settings: the unit still open, or the first one in the queue
// still waiting for its ReadyForQuery.
func (s *Session) poolUnitFailed() {
	if s.unit.poolSet != nil {
		s.unit.poolSet = nil // no Sync sent yet: the server skips the rest
		return
	}
	if s.poolPending == 0 {
		return
	}
	if sl := s.slots.firstEnd(); sl != nil {
		sl.poolFailed = true
	}
}

// ServerStatementName returns the n-th name pgwire gives a client's
// protocol-level statement on a shared server connection (Msg.Server). It
// starts with the reserved prefix, which the gate refuses in a client's
// names, so no client can reach another's statement by naming it.
func ServerStatementName(n uint64) string {
	return reservedPrefix + "s" + strconv.FormatUint(n, 36)
}
