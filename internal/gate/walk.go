package gate

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fenceSchema is the schema internal/fencestore installs the marks in.
const fenceSchema = "fence"

// Settings that carry the fencing token and resource (docs/design.md).
const (
	settingToken    = "lock.fencing_token"
	settingResource = "lock.resource"
)

// walker visits every node of one statement's parse tree, generically through
// protobuf reflection so that no node type is missed, and collects what the
// classification needs beyond the statement's top-level type.
type walker struct {
	writes []TableRef // DML targets and INTO targets, outside deferred subtrees
	dml    int        // INSERT/UPDATE/DELETE/MERGE nodes outside deferred subtrees
	anyDML bool       // such a node anywhere, deferred or not

	fenceRels  []string // relations named in schema fence (relation names)
	fenceOther bool     // any other reference to schema fence
	locking    bool     // a FOR UPDATE/SHARE clause somewhere
	setsFence  bool     // may change lock.fencing_token or lock.resource
	poolUnsafe string   // what a pool cannot keep per client (see poolSetConfig)
	setsLexing bool     // may change standard_conforming_strings or client_encoding
	opaque     bool     // runs code the text does not show (DO, CALL)

	// deferred > 0 inside subtrees that this statement does not execute
	// now: function bodies, rule actions, PREPARE's statement, EXPLAIN
	// without ANALYZE. Their DML is not counted as written, but their fence
	// references are (conservatively).
	deferred int
	// schemaObj > 0 inside statements whose bare names are schema names
	// (DROP SCHEMA, GRANT … ON SCHEMA / ALL … IN SCHEMA, …).
	schemaObj int
}

// walk visits m and, unless enter handled them itself, its children.
func (w *walker) walk(m protoreflect.Message) {
	if w.enter(m.Interface()) {
		w.children(m)
	}
}

// children visits the set fields of m.
func (w *walker) children(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			w.nameListField(fd.Name(), l)
			for i := 0; i < l.Len(); i++ {
				w.walk(l.Get(i).Message())
			}
		case fd.IsMap():
			// pg_query's tree has no maps.
		case fd.Message() != nil:
			if fd.Name() == "object" {
				w.qualifiedName(asNode(v.Message()).GetList().GetItems())
			}
			w.walk(v.Message())
		case fd.Kind() == protoreflect.StringKind:
			// CreateSchemaStmt.schemaname, AlterObjectSchemaStmt.newschema,
			// ImportForeignSchemaStmt.local_schema, …
			if strings.Contains(string(fd.Name()), "schema") && v.String() == fenceSchema {
				w.fenceOther = true
			}
		}
		return true
	})
}

// qualifiedNameFields are the repeated fields of pg_query's tree that hold a
// qualified object name as String nodes ([schema,] name), or a list of such
// names as List nodes. Other String lists (column lists, USING (…), enum
// labels, aliases) hold bare names that are never schemas.
var qualifiedNameFields = map[protoreflect.Name]bool{
	"funcname": true, "names": true, "type_name": true, "objname": true,
	"defnames": true, "collname": true, "opclass": true, "opclassname": true,
	"opfamilyname": true, "name": true, "oper_name": true, "handler_name": true,
	"plhandler": true, "plinline": true, "plvalidator": true, "domainname": true,
	"dictname": true, "cfgname": true, "dicts": true, "conversion_name": true,
	"func_name": true, "order_family": true, "exclude_op_names": true,
	"objects": true, // DROP, GRANT, …: one List node per qualified name
}

// nameListField checks a repeated field that may hold qualified names.
func (w *walker) nameListField(field protoreflect.Name, l protoreflect.List) {
	if !qualifiedNameFields[field] {
		return
	}
	items := make([]*pg_query.Node, 0, l.Len())
	for i := 0; i < l.Len(); i++ {
		n := asNode(l.Get(i).Message())
		if sub := n.GetList(); sub != nil {
			w.qualifiedName(sub.Items)
		}
		items = append(items, n)
	}
	if field != "objects" { // there, bare Strings are separate names
		w.qualifiedName(items)
	}
}

// qualifiedName flags a qualified name (two or more String nodes, as in
// funcname, TypeName.names or DROP's object names) whose schema part is
// fence. A bare single name is not a schema except under schemaObj.
func (w *walker) qualifiedName(items []*pg_query.Node) {
	if len(items) < 2 {
		return
	}
	for _, it := range items {
		if it.GetString_() == nil {
			return
		}
	}
	for _, it := range items[:len(items)-1] {
		if it.GetString_().Sval == fenceSchema {
			w.fenceOther = true
		}
	}
}

// asNode returns m as a *pg_query.Node, or nil when it is another message.
func asNode(m protoreflect.Message) *pg_query.Node {
	n, _ := m.Interface().(*pg_query.Node)
	return n
}

// enter records what node m says and reports whether walk should descend
// into its children (false when enter visited them itself, or there is
// nothing below worth seeing).
func (w *walker) enter(m protoreflect.ProtoMessage) bool {
	switch n := m.(type) {
	case *pg_query.A_Const:
		return false // literal values are data, never names
	case *pg_query.ExecuteStmt:
		// CREATE TABLE … AS EXECUTE p: the prepared statement runs unseen.
		if w.deferred == 0 {
			w.opaque = true
		}
	case *pg_query.ColumnRef:
		return false // column reads; the relation is seen as a RangeVar
	case *pg_query.String:
		if w.schemaObj > 0 && n.Sval == fenceSchema {
			w.fenceOther = true
		}
	case *pg_query.RangeVar:
		if n.Schemaname == fenceSchema {
			w.fenceRels = append(w.fenceRels, n.Relname)
		}
		return false
	case *pg_query.InsertStmt:
		w.modifies(n.Relation)
	case *pg_query.UpdateStmt:
		w.modifies(n.Relation)
	case *pg_query.DeleteStmt:
		w.modifies(n.Relation)
	case *pg_query.MergeStmt:
		w.modifies(n.Relation)
	case *pg_query.IntoClause:
		// SELECT … INTO, CREATE TABLE … AS, CREATE MATERIALIZED VIEW.
		if w.deferred == 0 && n.Rel != nil {
			w.writes = append(w.writes, tableRef(n.Rel))
		}
	case *pg_query.RenameStmt:
		// ALTER SCHEMA fence RENAME TO x, ALTER SCHEMA x RENAME TO fence.
		if n.RenameType == pg_query.ObjectType_OBJECT_SCHEMA && (n.Subname == fenceSchema || n.Newname == fenceSchema) {
			w.fenceOther = true
		}
	case *pg_query.CreateSchemaStmt:
		// CREATE SCHEMA AUTHORIZATION fence names the schema after the role.
		if n.Schemaname == "" && n.GetAuthrole().GetRolename() == fenceSchema {
			w.fenceOther = true
		}
	case *pg_query.DefElem:
		// CREATE EXTENSION … SCHEMA fence, ALTER EXTENSION … (options).
		if strings.Contains(n.Defname, "schema") && n.Arg.GetString_().GetSval() == fenceSchema {
			w.fenceOther = true
		}
	case *pg_query.LockingClause:
		w.locking = true
	case *pg_query.FuncCall:
		w.funcCall(n)
	case *pg_query.DoStmt:
		w.doStmt(n)
	case *pg_query.CallStmt:
		if w.deferred == 0 {
			w.opaque = true
		}
	case *pg_query.ExplainStmt:
		if !hasOption(n.Options, "analyze") {
			w.deferredChildren(m)
			return false
		}
	case *pg_query.CreateFunctionStmt:
		w.functionBody(n)
		w.deferredChildren(m)
		return false
	case *pg_query.RuleStmt, *pg_query.PrepareStmt:
		w.deferredChildren(m)
		return false
	case *pg_query.DropStmt, *pg_query.GrantStmt, *pg_query.AlterOwnerStmt,
		*pg_query.CommentStmt, *pg_query.SecLabelStmt,
		*pg_query.AlterDefaultPrivilegesStmt:
		if namesSchemas(m) {
			w.schemaObj++
			w.children(m.ProtoReflect())
			w.schemaObj--
			return false
		}
	}
	return true
}

// deferredChildren visits the children of a node whose statements do not run
// now.
func (w *walker) deferredChildren(m protoreflect.ProtoMessage) {
	w.deferred++
	w.children(m.ProtoReflect())
	w.deferred--
}

// modifies records the target of an INSERT, UPDATE, DELETE or MERGE.
func (w *walker) modifies(rv *pg_query.RangeVar) {
	w.anyDML = true
	if w.deferred > 0 {
		return
	}
	w.dml++
	if rv != nil {
		w.writes = append(w.writes, tableRef(rv))
		// pg_settings' rules call set_config: any setting may change,
		// ours and the lexing ones, without the text naming it.
		if rv.Relname == "pg_settings" && (rv.Schemaname == "" || rv.Schemaname == "pg_catalog") {
			w.setsFence, w.setsLexing, w.opaque = true, true, true
			w.poolUnsafe = "a write to pg_settings"
		}
	}
}

// funcCall notes set_config calls, outside deferred subtrees, that may change
// the fencing settings or the search_path. Calls of fence.* functions are
// caught by qualifiedName.
func (w *walker) funcCall(n *pg_query.FuncCall) {
	if w.deferred > 0 {
		return // a call in a body or a PREPAREd statement does not run now
	}
	if isSessionLockFunc(lastName(n.Funcname)) {
		w.poolUnsafe = "a session-level advisory lock"
	}
	if !strings.EqualFold(lastName(n.Funcname), "set_config") {
		return
	}
	w.poolSetConfig(n)
	if len(n.Args) == 0 {
		w.setsFence, w.setsLexing = true, true
		return
	}
	name, ok := constString(n.Args[0])
	if !ok {
		w.setsFence, w.setsLexing = true, true // set_config($1, …) or an expression: could be ours
		return
	}
	if isFenceSetting(name) {
		w.setsFence = true
	}
	if isLexingSetting(name) {
		w.setsLexing = true
	}
	if strings.EqualFold(name, "search_path") && len(n.Args) > 1 {
		if v, ok := constString(n.Args[1]); !ok || mentionsFence(v) {
			w.fenceOther = true
		}
	}
}

// doStmt handles DO: its body is PL/pgSQL text, not parsed here, so it is
// assumed to change the fencing settings, and to touch the fence schema when
// its text mentions it at all.
func (w *walker) doStmt(n *pg_query.DoStmt) {
	w.opaque = true
	for _, a := range n.Args {
		if d := a.GetDefElem(); d != nil && d.Defname == "as" {
			if mentionsFence(d.Arg.GetString_().GetSval()) {
				w.fenceOther = true
			}
		}
	}
}

// functionBody treats a function or procedure body given as a string (AS
// '…', AS $$…$$) like a DO block's: not parsed here, so any mention of fence
// in it counts. A BEGIN ATOMIC body is parsed and walked like other trees.
func (w *walker) functionBody(n *pg_query.CreateFunctionStmt) {
	for _, o := range n.Options {
		d := o.GetDefElem()
		if d == nil || d.Defname != "as" {
			continue
		}
		for _, it := range d.Arg.GetList().GetItems() {
			if mentionsFence(it.GetString_().GetSval()) {
				w.fenceOther = true
			}
		}
	}
}

// namesSchemas reports whether the bare names in a DROP, GRANT, ALTER …
// OWNER, COMMENT or SECURITY LABEL statement are schema names, and
// for ALTER DEFAULT PRIVILEGES whether it has an IN SCHEMA list.
func namesSchemas(m protoreflect.ProtoMessage) bool {
	switch n := m.(type) {
	case *pg_query.DropStmt:
		return n.RemoveType == pg_query.ObjectType_OBJECT_SCHEMA
	case *pg_query.GrantStmt:
		return n.Objtype == pg_query.ObjectType_OBJECT_SCHEMA || n.Targtype == pg_query.GrantTargetType_ACL_TARGET_ALL_IN_SCHEMA
	case *pg_query.AlterOwnerStmt:
		return n.ObjectType == pg_query.ObjectType_OBJECT_SCHEMA
	case *pg_query.CommentStmt:
		return n.Objtype == pg_query.ObjectType_OBJECT_SCHEMA
	case *pg_query.SecLabelStmt:
		return n.Objtype == pg_query.ObjectType_OBJECT_SCHEMA
	case *pg_query.AlterDefaultPrivilegesStmt:
		return hasOption(n.Options, "schemas")
	}
	return false
}

// isFenceSetting reports whether a configuration parameter name is one of
// ours. PostgreSQL compares parameter names case-insensitively.
func isFenceSetting(name string) bool {
	return strings.EqualFold(name, settingToken) || strings.EqualFold(name, settingResource)
}

// isLexingSetting reports whether a parameter changes how the server lexes
// query text. SET NAMES is client_encoding.
func isLexingSetting(name string) bool {
	return strings.EqualFold(name, "standard_conforming_strings") || strings.EqualFold(name, "client_encoding")
}

// mentionsFence reports whether s contains "fence" in any case.
func mentionsFence(s string) bool { return containsFold(s, fenceSchema) }

// constString returns the value of a string literal, looking through casts
// ('x'::text).
func constString(n *pg_query.Node) (string, bool) {
	n, ok := uncastText(n, false)
	if !ok {
		return "", false
	}
	c := n.GetAConst()
	if c == nil || c.GetSval() == nil {
		return "", false
	}
	return c.GetSval().Sval, true
}

// uncastText returns n without its casts to PostgreSQL's text (text or
// pg_catalog.text; only the schema-qualified one when qualified, as an
// unqualified name resolves through search_path), and false when a cast is
// to anything else: other casts change the value
// ('lock.fencing_tokenXX'::varchar(18)), or run code ('…'::alice.text, a
// type of the user's).
func uncastText(n *pg_query.Node, qualified bool) (*pg_query.Node, bool) {
	for tc := n.GetTypeCast(); tc != nil; tc = n.GetTypeCast() {
		t := tc.GetTypeName()
		if qualified && len(t.GetNames()) != 2 || !isCatalogFunc(t.GetNames(), "text") || len(t.GetTypmods()) > 0 || len(t.GetArrayBounds()) > 0 {
			return nil, false
		}
		n = tc.Arg
	}
	return n, true
}

// lastName returns the last element of a qualified name list.
func lastName(names []*pg_query.Node) string {
	if len(names) == 0 {
		return ""
	}
	return names[len(names)-1].GetString_().GetSval()
}

// hasOption reports whether a DefElem list sets the boolean option name to
// true: present without a value, or with a value PostgreSQL reads as true.
func hasOption(opts []*pg_query.Node, name string) bool {
	for _, o := range opts {
		if d := o.GetDefElem(); d != nil && strings.EqualFold(d.Defname, name) {
			return defBool(d)
		}
	}
	return false
}

// optionIsFalse reports whether a DefElem list explicitly sets name to false.
func optionIsFalse(opts []*pg_query.Node, name string) bool {
	for _, o := range opts {
		if d := o.GetDefElem(); d != nil && strings.EqualFold(d.Defname, name) {
			return !defBool(d)
		}
	}
	return false
}

// defBool reads a DefElem's value as PostgreSQL's defGetBoolean does: no
// value means true; 0/1, true/false, on/off, yes/no.
func defBool(d *pg_query.DefElem) bool {
	if d.Arg == nil {
		return true
	}
	switch {
	case d.Arg.GetInteger() != nil:
		return d.Arg.GetInteger().Ival != 0
	case d.Arg.GetBoolean() != nil:
		return d.Arg.GetBoolean().Boolval
	case d.Arg.GetAConst() != nil:
		c := d.Arg.GetAConst()
		switch {
		case c.GetIval() != nil:
			return c.GetIval().Ival != 0
		case c.GetBoolval() != nil:
			return c.GetBoolval().Boolval
		case c.GetSval() != nil:
			return boolWord(c.GetSval().Sval)
		}
	case d.Arg.GetString_() != nil:
		return boolWord(d.Arg.GetString_().Sval)
	}
	return true
}

// boolWord reads a boolean word as PostgreSQL's parse_bool does; anything it
// does not recognise as false is taken as true (the server rejects it).
func boolWord(s string) bool {
	s = strings.ToLower(s)
	switch {
	case s == "0", s == "off", s == "of":
		return false
	case s != "" && (strings.HasPrefix("false", s) || strings.HasPrefix("no", s)):
		return false
	}
	return true
}
